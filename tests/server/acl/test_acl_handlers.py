"""CreateAcls, DescribeAcls and DeleteAcls in process, through the codec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkette.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkette.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kafkette.protocol.messages.create_acls_request import AclCreation
from kafkette.protocol.messages.delete_acls_request import DeleteAclsFilter
from kafkette.protocol.schema import Request
from kafkette.server import Broker, BrokerConfig
from kafkette.server.acl import (
    AclAuthorizer,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.server.acl.store import load_bindings
from kafkette.server.dispatch import RequestContext

pytestmark = pytest.mark.anyio

SECURITY_DISABLED = 54
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_REQUEST = 42
TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, READ, WRITE, ALTER, DESCRIBE = 1, 2, 3, 4, 7, 8
DENY, ALLOW = 2, 3


async def call(
    broker: Broker,
    request: Request,
    version: int,
    *,
    principal: str = "User:admin",
    authorizer: AclAuthorizer | None,
) -> Any:
    frame = encode_request(request, version, 7, "tests")
    header, decoded = decode_request(memoryview(bytes(frame)))
    ctx = RequestContext(header, "10.1.2.3:5555", principal=principal, authorizer=authorizer)
    response = await broker.handle(ctx, decoded)
    correlation, parsed = decode_response(
        bytes(encode_response(response, version, 7)), request.API_KEY, version
    )
    assert correlation == 7
    return parsed


def creation(name: str, op: int = READ, permission: int = ALLOW, **kwargs: Any) -> AclCreation:
    fields: dict[str, Any] = {
        "resource_type": TOPIC,
        "resource_name": name,
        "resource_pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": op,
        "permission_type": permission,
    }
    fields.update(kwargs)
    return AclCreation(**fields)


def everything(**kwargs: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": OP_ANY,
        "permission_type": ANY,
    }
    fields.update(kwargs)
    return fields


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_without_an_authorizer_every_acl_api_says_security_disabled(version: int) -> None:
    broker = Broker(BrokerConfig())
    create = await call(
        broker, CreateAclsRequest(creations=[creation("t")]), version, authorizer=None
    )
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (SECURITY_DISABLED, "No Authorizer is configured.")
    ]
    describe = await call(
        broker,
        DescribeAclsRequest(**everything(pattern_type_filter=LITERAL if version == 0 else ANY)),
        version,
        authorizer=None,
    )
    assert (describe.error_code, describe.error_message) == (
        SECURITY_DISABLED,
        "No Authorizer is configured.",
    )
    delete = await call(
        broker,
        DeleteAclsRequest(
            filters=[
                DeleteAclsFilter(**everything(pattern_type_filter=LITERAL if version == 0 else ANY))
            ]
        ),
        version,
        authorizer=None,
    )
    assert [r.error_code for r in delete.filter_results] == [SECURITY_DISABLED]


async def test_create_describe_delete_round_trip_and_kafkas_refusals(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    authorizer = AclAuthorizer(["User:admin"])
    create = await call(
        broker,
        CreateAclsRequest(
            creations=[
                creation("orders"),
                creation("pay-", WRITE, DENY, resource_pattern_type=PREFIXED),
                creation("g", DESCRIBE, resource_type=GROUP, principal="User:*", host="10.0.0.9"),
                creation("", READ),
                creation("other", ALTER, resource_type=CLUSTER),
                creation("t", OP_ANY),
                creation("t", READ, resource_pattern_type=MATCH),
                creation("t", READ, principal="alice"),
            ]
        ),
        3,
        authorizer=authorizer,
    )
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (0, None),
        (0, None),
        (0, None),
        (INVALID_REQUEST, "Invalid empty resource name"),
        (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (INVALID_REQUEST, "Invalid operation ANY"),
        (INVALID_REQUEST, "Invalid patternType MATCH"),
        (INVALID_REQUEST, "Invalid principal 'alice': expected TYPE:NAME, e.g. User:alice"),
    ]
    expected = [
        AclBinding(
            ResourceType.TOPIC,
            "orders",
            PatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            "pay-",
            PatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        ),
        AclBinding(
            ResourceType.GROUP,
            "g",
            PatternType.LITERAL,
            "User:*",
            "10.0.0.9",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        ),
    ]
    assert authorizer.bindings == expected
    assert load_bindings(tmp_path) == expected

    describe = await call(
        broker,
        DescribeAclsRequest(
            **everything(
                resource_type_filter=TOPIC, resource_name_filter="pay-eu", pattern_type_filter=MATCH
            )
        ),
        3,
        authorizer=authorizer,
    )
    assert describe.error_code == 0
    assert [
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            [(a.principal, a.host, a.operation, a.permission_type) for a in r.acls],
        )
        for r in describe.resources
    ] == [(TOPIC, "pay-", PREFIXED, [("User:alice", "*", WRITE, DENY)])]

    bad = await call(
        broker, DescribeAclsRequest(**everything(operation=0)), 3, authorizer=authorizer
    )
    assert (bad.error_code, bad.error_message) == (INVALID_REQUEST, "Unknown entryFilter.")

    delete = await call(
        broker,
        DeleteAclsRequest(
            filters=[
                DeleteAclsFilter(
                    **everything(resource_type_filter=TOPIC, resource_name_filter="orders")
                ),
                DeleteAclsFilter(**everything(pattern_type_filter=0)),
                DeleteAclsFilter(**everything(resource_type_filter=GROUP)),
            ]
        ),
        3,
        authorizer=authorizer,
    )
    assert [
        (
            r.error_code,
            r.error_message,
            [(m.resource_type, m.resource_name, m.operation) for m in r.matching_acls],
        )
        for r in delete.filter_results
    ] == [
        (0, None, [(TOPIC, "orders", READ)]),
        (INVALID_REQUEST, "Unknown patternFilter.", []),
        (0, None, [(GROUP, "g", DESCRIBE)]),
    ]
    assert authorizer.bindings == expected[1:2]
    assert load_bindings(tmp_path) == expected[1:2]


async def test_acl_apis_need_alter_or_describe_on_the_cluster() -> None:
    broker = Broker(BrokerConfig())
    authorizer = AclAuthorizer(["User:admin"])
    authorizer.create(
        [
            AclBinding(
                ResourceType.CLUSTER,
                "kafka-cluster",
                PatternType.LITERAL,
                "User:viewer",
                "*",
                AclOperation.DESCRIBE,
                AclPermissionType.ALLOW,
            )
        ]
    )
    for who in ("User:viewer", "User:nobody"):
        create = await call(
            broker,
            CreateAclsRequest(creations=[creation("t")]),
            2,
            principal=who,
            authorizer=authorizer,
        )
        assert [r.error_code for r in create.results] == [CLUSTER_AUTHORIZATION_FAILED]
        delete = await call(
            broker,
            DeleteAclsRequest(filters=[DeleteAclsFilter(**everything())]),
            2,
            principal=who,
            authorizer=authorizer,
        )
        assert [(r.error_code, r.matching_acls) for r in delete.filter_results] == [
            (CLUSTER_AUTHORIZATION_FAILED, [])
        ]
    viewer = await call(
        broker,
        DescribeAclsRequest(**everything()),
        2,
        principal="User:viewer",
        authorizer=authorizer,
    )
    assert (viewer.error_code, [r.resource_type for r in viewer.resources]) == (0, [CLUSTER])
    nobody = await call(
        broker,
        DescribeAclsRequest(**everything()),
        2,
        principal="User:nobody",
        authorizer=authorizer,
    )
    assert (nobody.error_code, nobody.resources) == (CLUSTER_AUTHORIZATION_FAILED, [])
    assert len(authorizer.bindings) == 1


async def test_version_0_has_literal_patterns_only() -> None:
    broker = Broker(BrokerConfig())
    authorizer = AclAuthorizer(["User:admin"])
    create = await call(
        broker, CreateAclsRequest(creations=[creation("orders")]), 0, authorizer=authorizer
    )
    assert [r.error_code for r in create.results] == [0]
    assert [b.pattern_type for b in authorizer.bindings] == [PatternType.LITERAL]
    describe = await call(
        broker,
        DescribeAclsRequest(
            **everything(
                resource_type_filter=TOPIC,
                resource_name_filter="orders",
                pattern_type_filter=LITERAL,
            )
        ),
        0,
        authorizer=authorizer,
    )
    assert [(r.resource_name, r.pattern_type, len(r.acls)) for r in describe.resources] == [
        ("orders", LITERAL, 1)
    ]
