"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), every version Kafka defines
(0-3; version 0 has no pattern type: LITERAL):
the broker's ACL bindings (:mod:`kafkette.server.acl`).

Without an authorizer (``kafkette serve`` without ``--authorizer``) each is
answered SECURITY_DISABLED, "No Authorizer is configured.", as Kafka answers.
With one, creating and deleting need ALTER on the cluster and describing needs
DESCRIBE on it, else CLUSTER_AUTHORIZATION_FAILED. A binding Kafka would refuse
(an ANY or UNKNOWN value, an empty name, a CLUSTER not named ``kafka-cluster``,
a principal not ``Type:name``) is INVALID_REQUEST with Kafka's message; the
others of the request are created. A broker with a data directory keeps the
bindings in it (:mod:`kafkette.server.acl.store`).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from kafkette.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
    new_binding_error,
)
from kafkette.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
)
from kafkette.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkette.protocol.messages.create_acls_response import AclCreationResult
from kafkette.protocol.messages.delete_acls_request import DeleteAclsFilter
from kafkette.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
)
from kafkette.protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource
from kafkette.server.acl.store import bindings_document
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

NO_AUTHORIZER = "No Authorizer is configured."


def _cluster_refusal(ctx: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """The (error code, message) refusing the whole request, or None."""
    if ctx.authorizer is None:
        return SecurityDisabledError.code, NO_AUTHORIZER
    if not ctx.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ClusterAuthorizationFailedError.code, ClusterAuthorizationFailedError.description
    return None


@handler(CreateAclsRequest)
async def handle_create_acls(
    broker: Broker, ctx: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse:
    refusal = _cluster_refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        return CreateAclsResponse(
            results=[AclCreationResult(code, message) for _ in request.creations]
        )
    assert ctx.authorizer is not None
    results: list[AclCreationResult] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        binding = AclBinding.from_wire(
            creation.resource_type,
            creation.resource_name,
            creation.resource_pattern_type,
            creation.principal,
            creation.host,
            creation.operation,
            creation.permission_type,
        )
        error = new_binding_error(binding)
        if error is None:
            valid.append(binding)
            results.append(AclCreationResult(0, None))
        else:
            results.append(AclCreationResult(InvalidRequestError.code, error))
    before = len(ctx.authorizer.bindings)
    ctx.authorizer.create(valid)
    if len(ctx.authorizer.bindings) != before:
        await _persist(broker, ctx)
    return CreateAclsResponse(results=results)


@handler(DescribeAclsRequest)
async def handle_describe_acls(
    broker: Broker, ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    refusal = _cluster_refusal(ctx, AclOperation.DESCRIBE)
    if refusal is not None:
        code, message = refusal
        return DescribeAclsResponse(error_code=code, error_message=message)
    assert ctx.authorizer is not None
    acl_filter = _filter(request)
    error = acl_filter.error()
    if error is not None:
        return DescribeAclsResponse(error_code=InvalidRequestError.code, error_message=error)

    def resource(b: AclBinding) -> tuple[int, str, int]:
        return b.resource_type, b.resource_name, b.pattern_type

    matched = sorted(ctx.authorizer.describe(acl_filter), key=resource)
    return DescribeAclsResponse(
        error_code=0,
        error_message=None,
        resources=[
            DescribeAclsResource(
                resource_type=kind,
                resource_name=name,
                pattern_type=pattern,
                acls=[
                    AclDescription(b.principal, b.host, b.operation, b.permission) for b in group
                ],
            )
            for (kind, name, pattern), group in groupby(matched, key=resource)
        ],
    )


@handler(DeleteAclsRequest)
async def handle_delete_acls(
    broker: Broker, ctx: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    refusal = _cluster_refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        code, message = refusal
        return DeleteAclsResponse(
            filter_results=[DeleteAclsFilterResult(code, message) for _ in request.filters]
        )
    assert ctx.authorizer is not None
    filters = [_filter(f) for f in request.filters]
    errors = [f.error() for f in filters]
    removed = ctx.authorizer.delete(f for f, e in zip(filters, errors, strict=True) if e is None)
    if any(removed):
        await _persist(broker, ctx)
    results: list[DeleteAclsFilterResult] = []
    deleted = iter(removed)
    for error in errors:
        if error is not None:
            results.append(DeleteAclsFilterResult(InvalidRequestError.code, error))
            continue
        results.append(
            DeleteAclsFilterResult(
                0,
                None,
                [
                    DeleteAclsMatchingAcl(
                        0,
                        None,
                        b.resource_type,
                        b.resource_name,
                        b.pattern_type,
                        b.principal,
                        b.host,
                        b.operation,
                        b.permission,
                    )
                    for b in next(deleted)
                ],
            )
        )
    return DeleteAclsResponse(filter_results=results)


def _filter(wire: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    """The filter a DescribeAcls request or a DeleteAcls filter names (same fields)."""
    return AclBindingFilter.from_wire(
        wire.resource_type_filter,
        wire.resource_name_filter,
        wire.pattern_type_filter,
        wire.principal_filter,
        wire.host_filter,
        wire.operation,
        wire.permission_type,
    )


async def _persist(broker: Broker, ctx: RequestContext) -> None:
    """Keep the bindings in the data directory, answered only once they are on disk."""
    assert ctx.authorizer is not None
    if broker.acls_file is not None and not broker.config.read_only:
        broker.acls_file.change(bindings_document(ctx.authorizer.bindings))
        await broker.acls_file.saved()
