"""ACL operations of :class:`~kafkette.admin.AsyncAdminClient`, as Kafka's
``Admin.createAcls``, ``Admin.describeAcls`` and ``Admin.deleteAcls``.

Bindings and filters are :class:`kafkette.acl.AclBinding` and
:class:`kafkette.acl.AclBindingFilter`. A broker without an authorizer answers
every one with SecurityDisabledError; a principal without ALTER (create,
delete) or DESCRIBE (describe) on the cluster gets
ClusterAuthorizationFailedError.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import anyio

from kafkette.acl import AclBinding, AclBindingFilter
from kafkette.admin.groups import GroupOperations
from kafkette.admin.types import Outcome, Results
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import make_error
from kafkette.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkette.protocol.messages.create_acls_request import AclCreation
from kafkette.protocol.messages.delete_acls_request import DeleteAclsFilter
from kafkette.protocol.schema import Request, Response

R = TypeVar("R", bound=Response)


class AclOperations(GroupOperations):
    """The ACL half of the admin client (mixed into AsyncAdminClient)."""

    async def create_acls(
        self,
        bindings: Iterable[AclBinding],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[AclBinding, None]:
        """Create ``bindings``; per binding, None or its error (e.g.
        InvalidRequestError for an ANY operation). An existing binding stays."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(dict.fromkeys(bindings))
        request = CreateAclsRequest(
            creations=[
                AclCreation(
                    resource_type=b.resource_type,
                    resource_name=b.resource_name,
                    resource_pattern_type=b.pattern_type,
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission,
                )
                for b in wanted
            ]
        )
        response = await self._send_acl_request(
            request, CreateAclsResponse, "create ACLs", timeout_ms
        )
        return Results(
            {
                binding: Outcome(
                    None,
                    make_error(result.error_code, result.error_message)
                    if result.error_code
                    else None,
                )
                for binding, result in zip(wanted, response.results, strict=True)
            }
        )

    async def describe_acls(
        self,
        acl_filter: AclBindingFilter | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> list[AclBinding]:
        """The bindings ``acl_filter`` selects (every binding for None)."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        f = acl_filter or AclBindingFilter()
        request = DescribeAclsRequest(**_filter_fields(f))
        response = await self._send_acl_request(
            request, DescribeAclsResponse, "describe ACLs", timeout_ms
        )
        if response.error_code:
            raise make_error(response.error_code, response.error_message)
        return [
            AclBinding.from_wire(
                resource.resource_type,
                resource.resource_name,
                resource.pattern_type,
                acl.principal,
                acl.host,
                acl.operation,
                acl.permission_type,
            )
            for resource in response.resources
            for acl in resource.acls
        ]

    async def delete_acls(
        self,
        filters: Iterable[AclBindingFilter],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[AclBindingFilter, list[AclBinding]]:
        """Delete what each filter selects; per filter, the bindings it deleted
        or its error."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(dict.fromkeys(filters))
        request = DeleteAclsRequest(filters=[DeleteAclsFilter(**_filter_fields(f)) for f in wanted])
        response = await self._send_acl_request(
            request, DeleteAclsResponse, "delete ACLs", timeout_ms
        )
        outcomes: dict[AclBindingFilter, Outcome[list[AclBinding]]] = {}
        for acl_filter, result in zip(wanted, response.filter_results, strict=True):
            if result.error_code:
                outcomes[acl_filter] = Outcome(
                    error=make_error(result.error_code, result.error_message)
                )
                continue
            outcomes[acl_filter] = Outcome(
                [
                    AclBinding.from_wire(
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in result.matching_acls
                ]
            )
        return Results(outcomes)

    async def _send_acl_request(
        self, request: Request, response_type: type[R], what: str, timeout_ms: float | None
    ) -> R:
        async def attempt() -> R:
            node = await self._client.any_node()
            response = await self._client.send(node, request)
            assert isinstance(response, response_type)
            return response

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        return await self._until_done(attempt, what, deadline)


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A filter as the fields DescribeAcls and a DeleteAcls filter both carry."""
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission,
    }
