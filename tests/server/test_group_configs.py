"""Group configs (config resource type 32) in process: DescribeConfigs with sources,
IncrementalAlterConfigs and AlterConfigs checked with Kafka's messages (GroupConfig), the
ACLs Kafka checks (DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP), persistence across a
restart, and the KIP-848 coordinator acting on a group's session timeout and heartbeat
interval."""

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
    AlterConfigsRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkette.protocol.messages import alter_configs_request as legacy
from kafkette.protocol.messages import incremental_alter_configs_request as incremental
from kafkette.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkette.server import Broker, BrokerConfig
from kafkette.server.acl import (
    AclAuthorizer,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.server.dispatch import RequestContext
from tests.server.dataplane import call

pytestmark = pytest.mark.anyio

GROUP_ACL, LITERAL = ResourceType.GROUP, PatternType.LITERAL

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
DEFAULT, GROUP_CONFIG = 5, 8
INVALID_CONFIG, INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED = 40, 42, 30
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
# Bounds low enough for the coordinator tests (Kafka's defaults: 45000-60000, 5000-15000).
LOW_BOUNDS = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


async def describe(broker: Broker, name: str, *, version: int = 4, ctx: Any = None) -> Any:
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(GROUP, name, None)],
        include_synonyms=version >= 1,
        include_documentation=version >= 3,
    )
    response = await (
        call(broker, request, version) if ctx is None else call_as(broker, request, version, ctx)
    )
    (result,) = response.results
    assert (result.resource_type, result.resource_name) == (GROUP, name)
    return result


def entries(result: Any) -> dict[str, tuple[str | None, int, list[tuple[str, str | None, int]]]]:
    return {
        c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
        for c in result.configs
    }


async def incremental_alter(
    broker: Broker,
    name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
    ctx: Any = None,
) -> tuple[int, str | None]:
    request = IncrementalAlterConfigsRequest(
        resources=[
            incremental.AlterConfigsResource(
                GROUP, name, [incremental.AlterableConfig(k, op, v) for k, op, v in ops]
            )
        ],
        validate_only=validate_only,
    )
    response = await (call(broker, request, 1) if ctx is None else call_as(broker, request, 1, ctx))
    (result,) = response.responses
    assert (result.resource_type, result.resource_name) == (GROUP, name)
    return result.error_code, result.error_message


async def call_as(broker: Broker, request: Any, version: int, ctx: dict[str, Any]) -> Any:
    """:func:`call` with a principal and the broker's authorizer in the request context."""
    frame = encode_request(request, version, 7, "tests")
    header, decoded = decode_request(memoryview(bytes(frame)))
    response = await broker.handle(RequestContext(header, **ctx), decoded)
    raw = encode_response(response, version, 7)
    return decode_response(bytes(raw), request.API_KEY, version)[1]


def consumer_entries(result: Any) -> dict[str, Any]:
    return {k: v for k, v in entries(result).items() if k.startswith("consumer.")}


async def test_describe_shows_the_brokers_values_until_a_group_overrides_them() -> None:
    broker = Broker(BrokerConfig.from_properties({"group.consumer.session.timeout.ms": "50000"}))
    assert consumer_entries(await describe(broker, "g")) == {
        HEARTBEAT: ("5000", DEFAULT, [(HEARTBEAT, "5000", DEFAULT)]),
        SESSION: ("50000", DEFAULT, [(SESSION, "50000", DEFAULT)]),
    }
    assert await incremental_alter(broker, "g", [(SESSION, SET, " 55000 ")]) == (0, None)
    result = await describe(broker, "g")
    assert consumer_entries(result) == {
        HEARTBEAT: ("5000", DEFAULT, [(HEARTBEAT, "5000", DEFAULT)]),
        SESSION: ("55000", GROUP_CONFIG, [(SESSION, "55000", GROUP_CONFIG)]),
    }
    assert [
        (c.config_type, c.read_only, c.is_sensitive)
        for c in result.configs
        if c.name.startswith("consumer.")
    ] == [(3, False, False)] * 2
    assert all(c.documentation for c in result.configs)
    assert entries(await describe(broker, "other"))[SESSION][:2] == ("50000", DEFAULT)
    assert await incremental_alter(broker, "g", [(SESSION, DELETE, None)]) == (0, None)
    assert entries(await describe(broker, "g"))[SESSION][:2] == ("50000", DEFAULT)
    assert broker.cluster.group_configs == {}


NOT_INT = "Not a number of type INT"
AT_LEAST_1 = "Value must be at least 1"
AT_LEAST = "must be greater than or equal to group.consumer.min"
AT_MOST = "must be less than or equal to group.consumer.max"
REFUSALS = [
    ("streams.session.timeout.ms", SET, "1", "Unknown group config name: streams.session.timeout.ms"),  # noqa: E501
    (SESSION, SET, "soon", f"Invalid value soon for configuration {SESSION}: {NOT_INT}"),
    (SESSION, SET, "1_000", f"Invalid value 1_000 for configuration {SESSION}: {NOT_INT}"),
    (SESSION, SET, str(2**31), f"Invalid value {2**31} for configuration {SESSION}: {NOT_INT}"),
    (HEARTBEAT, SET, "0", f"Invalid value 0 for configuration {HEARTBEAT}: {AT_LEAST_1}"),
    (SESSION, SET, "44999", f"{SESSION} {AT_LEAST}.session.timeout.ms"),
    (SESSION, SET, "60001", f"{SESSION} {AT_MOST}.session.timeout.ms"),
    (HEARTBEAT, SET, "4999", f"{HEARTBEAT} {AT_LEAST}.heartbeat.interval.ms"),
    (HEARTBEAT, SET, "15001", f"{HEARTBEAT} {AT_MOST}.heartbeat.interval.ms"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "op", "value", "message"), REFUSALS)
async def test_invalid_configs_are_refused_with_kafkas_messages(
    name: str, op: int, value: str, message: str
) -> None:
    """INVALID_CONFIG with GroupConfig's messages, against the broker's default bounds
    (group.consumer.min/max.session.timeout.ms 45000/60000, heartbeat 5000/15000)."""
    broker = Broker()
    assert await incremental_alter(broker, "g", [(name, op, value)]) == (INVALID_CONFIG, message)
    assert broker.cluster.group_configs == {}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([(HEARTBEAT, APPEND, "6000")], f"Config value append is not allowed for config key: {HEARTBEAT}"),  # noqa: E501
        ([(SESSION, SET, None)], f"Null value not supported for : {SESSION}"),
    ],
)  # fmt: skip
async def test_malformed_changes_are_invalid_requests(
    ops: list[tuple[str, int, str | None]], message: str
) -> None:
    broker = Broker()
    assert await incremental_alter(broker, "g", ops) == (INVALID_REQUEST, message)
    assert broker.cluster.group_configs == {}


async def test_checks_cover_the_groups_whole_set_and_the_empty_name() -> None:
    """The session timeout must stay above the heartbeat interval, counting what is set
    already (and GroupConfig's defaults for what is not); the empty name is no group."""
    broker = Broker(BrokerConfig.from_properties(LOW_BOUNDS))
    both = [(SESSION, SET, "3000"), (HEARTBEAT, SET, "1000")]
    assert await incremental_alter(broker, "g", both) == (0, None)
    assert await incremental_alter(broker, "g", [(HEARTBEAT, SET, "3000")]) == (
        INVALID_CONFIG,
        f"{SESSION} must be greater than {HEARTBEAT}",
    )
    assert await incremental_alter(broker, "h", [(SESSION, SET, "4000")]) == (
        INVALID_CONFIG,
        f"{SESSION} must be greater than {HEARTBEAT}",  # against GroupConfig's default 5000
    )
    assert await incremental_alter(broker, "g", [(HEARTBEAT, SET, "500")], validate_only=True) == (
        0,
        None,
    )
    assert broker.cluster.group_configs == {"g": {SESSION: "3000", HEARTBEAT: "1000"}}
    assert await incremental_alter(broker, "", [(SESSION, SET, "50000")]) == (
        INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    result = await describe(broker, "")
    assert (result.error_code, result.error_message) == (
        INVALID_REQUEST,
        "Group name must not be empty",
    )


async def test_legacy_alter_configs_replaces_the_groups_set() -> None:
    broker = Broker(BrokerConfig.from_properties(LOW_BOUNDS))
    assert await incremental_alter(broker, "g", [(SESSION, SET, "50000")]) == (0, None)
    request = AlterConfigsRequest(
        resources=[
            legacy.AlterConfigsResource(GROUP, "g", [legacy.AlterableConfig(HEARTBEAT, "500")])
        ],
        validate_only=False,
    )
    response = await call(broker, request, 2)
    assert response.responses[0].error_code == 0
    assert broker.cluster.group_configs == {"g": {HEARTBEAT: "500"}}


async def test_acls_as_kafka() -> None:
    """DESCRIBE_CONFIGS and ALTER_CONFIGS on the GROUP resource; without them
    GROUP_AUTHORIZATION_FAILED and nothing changes."""
    broker = Broker()
    authorizer = AclAuthorizer(["User:admin"])
    authorizer.create(
        [
            AclBinding(GROUP_ACL, "mine", LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
        ]
    )  # fmt: skip
    alice = {"principal": "User:alice", "authorizer": authorizer}
    assert await incremental_alter(broker, "mine", [(SESSION, SET, "50000")], ctx=alice) == (
        0,
        None,
    )
    assert (await describe(broker, "mine", ctx=alice)).error_code == 0
    code, _ = await incremental_alter(broker, "theirs", [(SESSION, SET, "50000")], ctx=alice)
    assert code == GROUP_AUTHORIZATION_FAILED
    refused = await describe(broker, "theirs", ctx=alice)
    assert (refused.error_code, refused.configs) == (GROUP_AUTHORIZATION_FAILED, [])
    assert broker.cluster.group_configs == {"mine": {SESSION: "50000"}}


async def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({**LOW_BOUNDS, "log.dirs": str(tmp_path)})
    broker = Broker(config)
    await incremental_alter(broker, "g", [(SESSION, SET, "3000"), (HEARTBEAT, SET, "200")])
    broker.close()
    reopened = Broker(config)
    try:
        assert entries(await describe(reopened, "g"))[HEARTBEAT][:2] == ("200", GROUP_CONFIG)
        assert reopened.consumer_groups.heartbeat_interval_ms("g") == 200
        assert reopened.consumer_groups.session_timeout_ms("g") == 3000
    finally:
        reopened.close()


async def heartbeat(broker: Broker, group: str, member: str, epoch: int) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout_ms=30000 if epoch == 0 else -1,
        subscribed_topic_names=["t"] if epoch == 0 else None,
        topic_partitions=[] if epoch == 0 else None,
    )
    return await call(broker, request, 1)


async def test_the_coordinator_acts_on_a_groups_overrides() -> None:
    """A member of a group with overrides is told its heartbeat interval and is fenced
    after its session timeout; a member of another group keeps the broker's."""
    broker = Broker(BrokerConfig.from_properties(LOW_BOUNDS))
    broker.cluster.create_topic("t", 1)
    await incremental_alter(broker, "fast", [(SESSION, SET, "2000"), (HEARTBEAT, SET, "300")])
    fast = await heartbeat(broker, "fast", "m1", 0)
    slow = await heartbeat(broker, "slow", "m2", 0)
    assert (fast.error_code, fast.heartbeat_interval_ms) == (0, 300)
    assert (slow.error_code, slow.heartbeat_interval_ms) == (0, 5000)
    coordinator = broker.consumer_groups
    now = broker.now_ms()
    assert coordinator.groups["fast"].session_deadlines["m1"] - now in range(1000, 2001)
    assert coordinator.groups["slow"].session_deadlines["m2"] - now in range(44000, 45001)
    coordinator.tick(now + 2500)
    assert "m1" not in coordinator.groups["fast"].members
    assert "m2" in coordinator.groups["slow"].members
