"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs in process.

Sources, synonyms, filtering, versions, per-resource errors with exact codes,
dynamic broker configs reaching topic logs, and persistence across a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkette.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkette.protocol.messages import alter_configs_request as legacy
from kafkette.protocol.messages import incremental_alter_configs_request as incremental
from kafkette.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkette.server import Broker, BrokerConfig
from kafkette.server.config.catalog import ALL_BROKER_CONFIGS, TOPIC_CONFIGS
from tests.server.dataplane import call

pytestmark = pytest.mark.anyio

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_CONFIG = 40
INVALID_REQUEST = 42


async def describe(
    broker: Broker,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    *,
    version: int = 4,
    synonyms: bool = True,
) -> Any:
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type, name, keys)],
        include_synonyms=synonyms and version >= 1,
        include_documentation=version >= 3,
    )
    response = await call(broker, request, version)
    (result,) = response.results
    return result


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


async def incremental_alter(
    broker: Broker,
    resource_type: int,
    name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    request = IncrementalAlterConfigsRequest(
        resources=[
            incremental.AlterConfigsResource(
                resource_type,
                name,
                [incremental.AlterableConfig(k, op, v) for k, op, v in ops],
            )
        ],
        validate_only=validate_only,
    )
    response = await call(broker, request, 1)
    (result,) = response.responses
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result.error_code, result.error_message


async def alter(
    broker: Broker,
    resource_type: int,
    name: str,
    configs: dict[str, str | None],
    *,
    validate_only: bool = False,
) -> int:
    request = AlterConfigsRequest(
        resources=[
            legacy.AlterConfigsResource(
                resource_type, name, [legacy.AlterableConfig(k, v) for k, v in configs.items()]
            )
        ],
        validate_only=validate_only,
    )
    response = await call(broker, request, 2)
    return int(response.responses[0].error_code)


# ---- describe


async def test_describe_topic_lists_every_config_with_sources_and_types() -> None:
    """A topic lists every Kafka topic config, with source, synonyms, type and doc."""
    broker = Broker()
    broker.cluster.create_topic("t", 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    result = await describe(broker, TOPIC, "t")
    assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
    configs = by_name(result)
    assert list(configs) == sorted(TOPIC_CONFIGS)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("1000", 1, False)
    assert synonyms(retention) == [("retention.ms", "1000", DYNAMIC_TOPIC)]
    assert retention.config_type == 5  # LONG
    assert retention.documentation
    policy = configs["cleanup.policy"]
    assert synonyms(policy) == [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC),
        ("log.cleanup.policy", "delete", DEFAULT),
    ]
    assert policy.config_type == 7  # LIST
    # Kafka's quirk kept: the default sits on log.retention.hours, not the primary name
    assert synonyms(configs["segment.ms"]) == []
    assert configs["segment.ms"].config_source == DEFAULT
    assert configs["min.cleanable.dirty.ratio"].value == "0.5"
    assert configs["min.cleanable.dirty.ratio"].config_type == 6  # DOUBLE
    assert configs["local.retention.ms"].value == "-2"
    assert all(not c.is_sensitive and not c.read_only for c in configs.values())


async def test_describe_filters_keys_and_versions() -> None:
    """configuration_keys filters; v0 has is_default, v1 sources and synonyms, v3 types."""
    broker = Broker()
    broker.cluster.create_topic("t", 1)
    result = await describe(broker, TOPIC, "t", ["retention.ms", "nope"])
    assert [c.name for c in result.configs] == ["retention.ms"]
    # an empty key list means every key, as in Kafka's ConfigHelper
    assert len((await describe(broker, TOPIC, "t", [])).configs) == len(TOPIC_CONFIGS)
    old = await describe(broker, TOPIC, "t", ["retention.bytes"], version=0)
    (entry,) = old.configs
    assert (entry.value, entry.is_default, entry.synonyms) == ("-1", True, [])
    v1 = await describe(broker, TOPIC, "t", ["retention.bytes"], version=1)
    (entry,) = v1.configs
    assert (entry.config_source, entry.config_type, entry.documentation) == (DEFAULT, 0, "")
    assert synonyms(entry) == [("log.retention.bytes", "-1", DEFAULT)]
    no_synonyms = await describe(broker, TOPIC, "t", ["retention.bytes"], synonyms=False)
    assert no_synonyms.configs[0].synonyms == []


async def test_describe_errors_per_resource() -> None:
    """Unknown topics, bad names, other brokers and unsupported types fail per resource."""
    broker = Broker()
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(TOPIC, "missing", None),
            DescribeConfigsResource(TOPIC, "bad name", None),
            DescribeConfigsResource(BROKER, "7", None),
            DescribeConfigsResource(BROKER, "one", None),
            DescribeConfigsResource(BROKER_LOGGER, "1", None),
            DescribeConfigsResource(BROKER, "1", ["num.partitions"]),
        ]
    )
    response = await call(broker, request, 4)
    assert [(r.error_code, len(r.configs)) for r in response.results] == [
        (UNKNOWN_TOPIC_OR_PARTITION, 0),
        (INVALID_TOPIC_EXCEPTION, 0),
        (INVALID_REQUEST, 0),
        (INVALID_REQUEST, 0),
        (INVALID_REQUEST, 0),
        (0, 1),
    ]


async def test_describe_broker_sources() -> None:
    """Broker configs report static/default sources and read-only; topics inherit them."""
    config = BrokerConfig.from_properties({"log.retention.hours": "24", "num.partitions": "3"})
    broker = Broker(config)
    result = await describe(broker, BROKER, "1")
    configs = by_name(result)
    assert set(configs) == {n for n, d in ALL_BROKER_CONFIGS.items() if not d.internal}
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.config_source, hours.read_only) == ("24", STATIC, True)
    assert synonyms(hours) == [
        ("log.retention.hours", "24", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
    millis = configs["log.retention.ms"]
    assert (millis.value, millis.config_source, millis.read_only) == (None, DEFAULT, False)
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == (
        "3",
        STATIC,
    )
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    # the topic inherits 24 h
    broker.cluster.create_topic("t", 1)
    topic = by_name(await describe(broker, TOPIC, "t", ["retention.ms"]))["retention.ms"]
    assert topic.value == str(24 * 3_600_000)
    assert broker.cluster.topics["t"].partitions[0].log.config.retention_ms == 24 * 3_600_000


# ---- incremental alter


async def test_incremental_set_delete_append_subtract() -> None:
    """SET, DELETE, APPEND and SUBTRACT edit the overrides and reach every log."""
    broker = Broker()
    broker.cluster.create_topic("t", 2, {"segment.ms": "60000"})
    assert await incremental_alter(
        broker,
        TOPIC,
        "t",
        [
            ("retention.ms", SET, "5000"),
            ("segment.ms", DELETE, None),
            ("cleanup.policy", APPEND, "compact"),
        ],
    ) == (0, None)
    assert broker.cluster.topics["t"].configs == {
        "retention.ms": "5000",
        "cleanup.policy": "delete,compact",
    }
    log_config = broker.cluster.topics["t"].partitions[1].log.config
    assert (log_config.retention_ms, log_config.segment_ms, log_config.compact) == (
        5000,
        604_800_000,
        True,
    )
    configs = by_name(await describe(broker, TOPIC, "t"))
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "5000",
        DYNAMIC_TOPIC,
    )
    assert await incremental_alter(
        broker, TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]
    ) == (
        0,
        None,
    )
    assert broker.cluster.topics["t"].configs["cleanup.policy"] == "compact"
    assert broker.cluster.topics["t"].partitions[0].log.config.cleanup_policy == ("compact",)


async def test_incremental_errors_leave_the_topic_unchanged() -> None:
    """A bad operation fails its resource with the exact code and changes nothing."""
    broker = Broker()
    broker.cluster.create_topic("t", 1, {"retention.ms": "1000"})
    cases: list[tuple[list[tuple[str, int, str | None]], int]] = [
        ([("retention.ms", SET, "-7")], INVALID_CONFIG),
        ([("no.such", SET, "1")], INVALID_CONFIG),
        ([("segment.bytes", SET, "1"), ("retention.ms", SET, "5")], INVALID_CONFIG),
        ([("retention.ms", APPEND, "5")], INVALID_REQUEST),
        ([("retention.ms", SUBTRACT, "5")], INVALID_REQUEST),
        ([("retention.ms", SET, None)], INVALID_REQUEST),
        ([("retention.ms", 9, "1")], INVALID_REQUEST),
        ([("retention.ms", SET, "1"), ("retention.ms", SET, "2")], INVALID_REQUEST),
        ([("cleanup.policy", SUBTRACT, "delete")], INVALID_CONFIG),  # leaves an empty list
        ([("cleanup.policy", APPEND, "shred")], INVALID_CONFIG),
    ]
    for ops, expected in cases:
        code, message = await incremental_alter(broker, TOPIC, "t", ops)
        assert code == expected, ops
        assert message
    assert (await incremental_alter(broker, TOPIC, "missing", [("retention.ms", SET, "1")]))[
        0
    ] == UNKNOWN_TOPIC_OR_PARTITION
    assert (await incremental_alter(broker, BROKER_LOGGER, "1", []))[0] == INVALID_REQUEST
    assert broker.cluster.topics["t"].configs == {"retention.ms": "1000"}
    assert broker.cluster.topics["t"].partitions[0].log.config.retention_ms == 1000


async def test_validate_only_changes_nothing() -> None:
    """validate_only checks topic and broker changes without applying them."""
    broker = Broker()
    broker.cluster.create_topic("t", 1)
    ops: list[tuple[str, int, str | None]] = [("retention.ms", SET, "5")]
    assert await incremental_alter(broker, TOPIC, "t", ops, validate_only=True) == (0, None)
    bad: list[tuple[str, int, str | None]] = [("retention.ms", SET, "x")]
    assert (await incremental_alter(broker, TOPIC, "t", bad, validate_only=True))[0] == 40
    assert await alter(broker, TOPIC, "t", {"retention.ms": "5"}, validate_only=True) == 0
    broker_ops: list[tuple[str, int, str | None]] = [("log.retention.ms", SET, "5")]
    assert await incremental_alter(broker, BROKER, "1", broker_ops, validate_only=True) == (0, None)
    assert broker.cluster.topics["t"].configs == {}
    assert broker.cluster.dynamic_broker_configs == {}


# ---- legacy alter


async def test_alter_configs_replaces_the_override_set() -> None:
    """Legacy AlterConfigs replaces the whole override set; nulls and bad values fail."""
    broker = Broker()
    broker.cluster.create_topic("t", 1, {"retention.ms": "1000", "segment.ms": "60000"})
    assert await alter(broker, TOPIC, "t", {"retention.bytes": "4096"}) == 0
    assert broker.cluster.topics["t"].configs == {"retention.bytes": "4096"}
    log_config = broker.cluster.topics["t"].partitions[0].log.config
    assert (log_config.retention_ms, log_config.retention_bytes) == (604_800_000, 4096)
    assert await alter(broker, TOPIC, "t", {"retention.bytes": None}) == INVALID_REQUEST
    assert await alter(broker, TOPIC, "t", {"retention.bytes": "lots"}) == INVALID_CONFIG
    assert await alter(broker, TOPIC, "nope", {}) == UNKNOWN_TOPIC_OR_PARTITION
    assert broker.cluster.topics["t"].configs == {"retention.bytes": "4096"}


# ---- dynamic broker configs


async def test_dynamic_broker_configs_apply_to_topics_without_overrides() -> None:
    """Dynamic broker and default configs change topics without their own override."""
    broker = Broker()
    broker.cluster.create_topic("plain", 1)
    broker.cluster.create_topic("own", 1, {"retention.ms": "1000"})
    ops: list[tuple[str, int, str | None]] = [("log.retention.ms", SET, "60000")]
    assert await incremental_alter(broker, BROKER, "", ops) == (0, None)
    assert broker.cluster.topics["plain"].partitions[0].log.config.retention_ms == 60000
    assert broker.cluster.topics["own"].partitions[0].log.config.retention_ms == 1000
    entry = by_name(await describe(broker, TOPIC, "plain", ["retention.ms"]))["retention.ms"]
    assert (entry.value, entry.config_source) == ("60000", DYNAMIC_DEFAULT)

    ops = [("log.retention.ms", SET, "120000")]
    assert await incremental_alter(broker, BROKER, "1", ops) == (0, None)
    entry = by_name(await describe(broker, TOPIC, "plain", ["retention.ms"]))["retention.ms"]
    assert (entry.value, entry.config_source) == ("120000", DYNAMIC_BROKER)
    assert synonyms(entry) == [
        ("log.retention.ms", "120000", DYNAMIC_BROKER),
        ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
        ("log.retention.hours", "168", DEFAULT),
    ]
    default_resource = await describe(broker, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in default_resource.configs] == [
        ("log.retention.ms", "60000", DYNAMIC_DEFAULT)
    ]
    # a topic created now inherits it
    broker.cluster.create_topic("later", 1)
    assert broker.cluster.topics["later"].partitions[0].log.config.retention_ms == 120000

    ops = [("log.retention.ms", DELETE, None)]
    assert await incremental_alter(broker, BROKER, "1", ops) == (0, None)
    assert broker.cluster.topics["plain"].partitions[0].log.config.retention_ms == 60000


async def test_dynamic_broker_config_errors() -> None:
    """Read-only, unknown, invalid or foreign-broker dynamic configs are refused.

    Kafka answers a broker config it refuses with INVALID_REQUEST (KAFKA-13609);
    an unknown name is INVALID_CONFIG here (Kafka would store it as a custom config).
    """
    broker = Broker()
    cases: list[tuple[str, list[tuple[str, int, str | None]], int]] = [
        ("1", [("num.partitions", SET, "3")], INVALID_REQUEST),  # read-only
        ("1", [("log.retention.hours", SET, "3")], INVALID_REQUEST),  # not the primary name
        ("1", [("no.such.thing", SET, "3")], INVALID_CONFIG),
        ("1", [("log.retention.ms", SET, "-9")], INVALID_REQUEST),
        ("1", [("compression.gzip.level", SET, "x")], INVALID_REQUEST),
        ("2", [("log.retention.ms", SET, "1")], INVALID_REQUEST),
        ("x", [("log.retention.ms", SET, "1")], INVALID_REQUEST),
    ]
    for name, ops, expected in cases:
        assert (await incremental_alter(broker, BROKER, name, ops))[0] == expected, ops
    assert broker.cluster.dynamic_broker_configs == {}
    assert await alter(broker, BROKER, "1", {"message.max.bytes": "2048"}) == 0
    assert broker.cluster.defaults.max_message_bytes == 2048


async def test_configs_survive_a_restart(tmp_path: Path) -> None:
    """Topic overrides and dynamic broker configs are reopened from the data dir."""
    data_dir = str(tmp_path)
    broker = Broker(BrokerConfig(data_dir=data_dir))
    broker.cluster.create_topic("t", 1)
    await incremental_alter(broker, TOPIC, "t", [("cleanup.policy", SET, "compact")])
    await incremental_alter(broker, BROKER, "1", [("log.segment.bytes", SET, "100000")])
    await incremental_alter(broker, BROKER, "", [("log.retention.ms", SET, "5000")])
    broker.close()

    reopened = Broker(BrokerConfig(data_dir=data_dir))
    try:
        log_config = reopened.cluster.topics["t"].partitions[0].log.config
        assert (log_config.cleanup_policy, log_config.segment_bytes, log_config.retention_ms) == (
            ("compact",),
            100000,
            5000,
        )
        configs = by_name(await describe(reopened, TOPIC, "t"))
        assert [
            (name, configs[name].value, configs[name].config_source)
            for name in ("cleanup.policy", "segment.bytes", "retention.ms")
        ] == [
            ("cleanup.policy", "compact", DYNAMIC_TOPIC),
            ("segment.bytes", "100000", DYNAMIC_BROKER),
            ("retention.ms", "5000", DYNAMIC_DEFAULT),
        ]
    finally:
        reopened.close()


async def test_append_to_a_broker_list_starts_from_kafkas_default() -> None:
    """APPEND to an unset list-typed broker config starts from its default (delete)."""
    broker = Broker()
    broker.cluster.create_topic("t", 1)
    ops: list[tuple[str, int, str | None]] = [("log.cleanup.policy", APPEND, "compact")]
    assert await incremental_alter(broker, BROKER, "1", ops) == (0, None)
    assert broker.cluster.dynamic_broker_configs == {"log.cleanup.policy": "delete,compact"}
    assert broker.cluster.topics["t"].partitions[0].log.config.cleanup_policy == (
        "compact",
        "delete",
    )
