"""CreateTopics, DeleteTopics and CreatePartitions in process: results and exact error codes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkette.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from kafkette.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsTopic,
)
from kafkette.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)
from kafkette.protocol.messages.delete_topics_request import DeleteTopicState
from kafkette.protocol.schema import ZERO_UUID
from kafkette.server import Broker, BrokerConfig
from tests.server.dataplane import call

pytestmark = pytest.mark.anyio

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TOPIC_DELETION_DISABLED = 73
UNKNOWN_TOPIC_ID = 100


def topic(
    name: str,
    partitions: int = -1,
    replication: int = -1,
    configs: dict[str, str | None] | None = None,
    assignments: dict[int, list[int]] | None = None,
) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[CreatableReplicaAssignment(p, ids) for p, ids in (assignments or {}).items()],
        configs=[CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
    )


async def create(
    broker: Broker, *topics: CreatableTopic, version: int = 7, validate_only: bool = False
) -> list[Any]:
    request = CreateTopicsRequest(topics=list(topics), validate_only=validate_only)
    response = await call(broker, request, version)
    return list(response.topics)


def codes(results: list[Any]) -> dict[str, int]:
    return {r.name: r.error_code for r in results}


async def test_create_with_defaults_returns_id_counts_and_configs() -> None:
    """-1 partitions/replicas take the defaults; v7 returns id, counts and every config."""
    broker = Broker(BrokerConfig(num_partitions=3))
    (result,) = await create(broker, topic("orders", configs={"retention.ms": "1000"}))
    created = broker.cluster.topics["orders"]
    assert (result.error_code, result.error_message) == (NONE, None)
    assert result.topic_id == created.topic_id != ZERO_UUID
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    assert len(created.partitions) == 3
    configs = {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}
    assert configs["retention.ms"] == ("1000", 1, False)
    assert configs["segment.bytes"] == ("1073741824", 5, False)
    assert created.partitions[0].log.config.retention_ms == 1000


async def test_create_v4_has_no_config_listing() -> None:
    """Before v5 the response has no counts or configs; the topic is still created."""
    broker = Broker()
    (result,) = await create(broker, topic("old", 2, 1), version=4)
    assert (result.error_code, result.num_partitions, result.configs) == (NONE, -1, [])
    assert len(broker.cluster.topics["old"].partitions) == 2


async def test_validate_only_creates_nothing_but_describes() -> None:
    """validate_only answers as a creation would (counts, configs) without creating."""
    broker = Broker()
    (result,) = await create(
        broker, topic("dry", 4, 1, {"cleanup.policy": "compact"}), validate_only=True
    )
    assert (result.error_code, result.num_partitions, result.topic_id) == (NONE, 4, ZERO_UUID)
    assert {c.name: c.value for c in result.configs}["cleanup.policy"] == "compact"
    assert "dry" not in broker.cluster.topics


async def test_create_errors_are_per_topic() -> None:
    """Each bad topic gets its own error code and message; the good ones are created."""
    broker = Broker()
    broker.cluster.create_topic("exists", 1)
    broker.cluster.create_topic("a.b", 1)
    results = await create(
        broker,
        topic("exists"),
        topic("ok", 2, 1),
        topic("bad name!"),
        topic("a_b"),
        topic("zero", 0),
        topic("negative", -2),
        topic("rf0", 1, 0),
        topic("rf3", 1, 3),
        topic("unknown-config", configs={"no.such.thing": "1"}),
        topic("bad-value", configs={"retention.ms": "forever"}),
        topic("null-value", configs={"retention.ms": None}),
        topic("tiered", configs={"remote.storage.enable": "true"}),
        topic("__consumer_offsets"),
        topic("twice"),
        topic("twice"),
    )
    assert codes(results) == {
        "exists": TOPIC_ALREADY_EXISTS,
        "ok": NONE,
        "bad name!": INVALID_TOPIC_EXCEPTION,
        "a_b": INVALID_TOPIC_EXCEPTION,
        "zero": INVALID_PARTITIONS,
        "negative": INVALID_PARTITIONS,
        "rf0": INVALID_REPLICATION_FACTOR,
        "rf3": INVALID_REPLICATION_FACTOR,
        "unknown-config": INVALID_CONFIG,
        "bad-value": INVALID_CONFIG,
        "null-value": INVALID_REQUEST,
        "tiered": INVALID_CONFIG,
        "__consumer_offsets": POLICY_VIOLATION,
        "twice": INVALID_REQUEST,
    }
    messages = {r.name: r.error_message for r in results}
    assert messages["exists"] == "Topic 'exists' already exists."
    assert messages["a_b"] == "Topic 'a_b' collides with existing topic: a.b"
    assert messages["unknown-config"] == "Unknown topic config name: no.such.thing"
    assert messages["bad-value"] == (
        "Invalid value forever for configuration retention.ms: Not a number of type LONG"
    )
    assert "only 1 broker(s) are registered" in messages["rf3"]
    assert all(r.configs is None for r in results if r.error_code)
    assert sorted(broker.cluster.topics) == ["a.b", "exists", "ok"]


async def test_manual_assignments() -> None:
    """A manual assignment may only name this node, once per consecutive partition."""
    broker = Broker()
    results = await create(
        broker,
        topic("manual", assignments={0: [1], 1: [1]}),
        topic("other-broker", assignments={0: [2]}),
        topic("two-replicas", assignments={0: [1, 2]}),
        topic("duplicate-replica", assignments={0: [1, 1]}),
        topic("empty", assignments={0: []}),
        topic("gap", assignments={0: [1], 2: [1]}),
        topic("both", 2, -1, assignments={0: [1]}),
    )
    assert codes(results) == {
        "manual": NONE,
        "other-broker": INVALID_REPLICA_ASSIGNMENT,
        "two-replicas": INVALID_REPLICA_ASSIGNMENT,
        "duplicate-replica": INVALID_REPLICA_ASSIGNMENT,
        "empty": INVALID_REPLICA_ASSIGNMENT,
        "gap": INVALID_REPLICA_ASSIGNMENT,
        "both": INVALID_REQUEST,
    }
    assert (results[0].num_partitions, results[0].replication_factor) == (2, 1)
    assert len(broker.cluster.topics["manual"].partitions) == 2


async def test_default_replication_factor_above_one_is_refused() -> None:
    """default.replication.factor=3 cannot be met by one broker."""
    broker = Broker(BrokerConfig(default_replication_factor=3))
    (result,) = await create(broker, topic("t"))
    assert result.error_code == INVALID_REPLICATION_FACTOR


# ---- DeleteTopics


async def test_delete_by_name_and_by_id() -> None:
    """Names (v0-5) and topic ids (v6) delete; unknown, ambiguous or empty ones fail alone."""
    broker = Broker()
    first = broker.cluster.create_topic("first", 1)
    second = broker.cluster.create_topic("second", 2)
    assert first is not None and second is not None
    response = await call(broker, DeleteTopicsRequest(topic_names=["first", "missing"]), 5)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("first", NONE),
        ("missing", UNKNOWN_TOPIC_OR_PARTITION),
    ]
    stray = uuid.uuid4()
    response = await call(
        broker,
        DeleteTopicsRequest(
            topics=[
                DeleteTopicState(None, second.topic_id),
                DeleteTopicState(None, stray),
                DeleteTopicState("x", stray),
                DeleteTopicState(None, ZERO_UUID),
            ]
        ),
        6,
    )
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        ("second", second.topic_id, NONE),
        (None, stray, UNKNOWN_TOPIC_ID),
        ("x", stray, INVALID_REQUEST),
        (None, ZERO_UUID, INVALID_REQUEST),
    ]
    assert broker.cluster.topics == {}


async def test_delete_disabled_and_internal() -> None:
    """delete.topic.enable=false (INVALID_REQUEST before v3) and internal topics are refused."""
    broker = Broker(BrokerConfig(delete_topic_enable=False))
    broker.cluster.create_topic("kept", 1)
    response = await call(broker, DeleteTopicsRequest(topic_names=["kept"]), 5)
    assert response.responses[0].error_code == TOPIC_DELETION_DISABLED
    response = await call(broker, DeleteTopicsRequest(topic_names=["kept"]), 2)
    assert response.responses[0].error_code == INVALID_REQUEST
    assert "kept" in broker.cluster.topics

    broker = Broker()
    broker.cluster.create_topic("__transaction_state", 1)
    response = await call(
        broker, DeleteTopicsRequest(topic_names=["__transaction_state", "x", "x"]), 5
    )
    assert [r.error_code for r in response.responses] == [
        POLICY_VIOLATION,
        INVALID_REQUEST,
        INVALID_REQUEST,
    ]


async def test_delete_then_recreate_on_disk(tmp_path: Path) -> None:
    """A deleted topic can be recreated with a new id, which survives a restart."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    old = broker.cluster.create_topic("t", 1)
    assert old is not None
    await call(broker, DeleteTopicsRequest(topic_names=["t"]), 5)
    (result,) = await create(broker, topic("t", 1, 1))
    assert result.error_code == NONE and result.topic_id != old.topic_id
    broker.close()
    reopened = Broker(BrokerConfig(data_dir=str(tmp_path)))
    assert reopened.cluster.topics["t"].topic_id == result.topic_id
    reopened.close()


# ---- CreatePartitions


async def test_create_partitions() -> None:
    """CreatePartitions grows topics; unknown, internal, duplicate or non-increasing counts fail."""
    broker = Broker()
    broker.cluster.create_topic("t", 2)
    broker.cluster.create_topic("__consumer_offsets", 1)
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic("t", 4, None),
            CreatePartitionsTopic("missing", 4, None),
            CreatePartitionsTopic("__consumer_offsets", 4, None),
        ]
    )
    response = await call(broker, request, 3)
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", NONE),
        ("missing", UNKNOWN_TOPIC_OR_PARTITION),
        ("__consumer_offsets", POLICY_VIOLATION),
    ]
    assert len(broker.cluster.topics["t"].partitions) == 4

    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic("t", 4, None),
            CreatePartitionsTopic("t", 2, None),
        ]
    )
    response = await call(broker, request, 3)
    assert [r.error_code for r in response.results] == [INVALID_REQUEST, INVALID_REQUEST]

    for count, message in ((4, "Topic already has 4 partition(s)."), (3, None)):
        response = await call(
            broker, CreatePartitionsRequest(topics=[CreatePartitionsTopic("t", count, None)]), 3
        )
        assert response.results[0].error_code == INVALID_PARTITIONS
        if message is not None:
            assert response.results[0].error_message == message


async def test_create_partitions_assignments_and_validate_only() -> None:
    """New partitions may only be assigned to this node; validate_only adds none."""
    broker = Broker()
    broker.cluster.create_topic("t", 1)

    async def grow(count: int, assignments: list[list[int]] | None, dry: bool = False) -> int:
        entries = (
            None if assignments is None else [CreatePartitionsAssignment(a) for a in assignments]
        )
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic("t", count, entries)], validate_only=dry
        )
        response = await call(broker, request, 1)
        return int(response.results[0].error_code)

    assert await grow(3, [[1]]) == INVALID_REPLICA_ASSIGNMENT  # one assignment for two
    assert await grow(2, [[2]]) == INVALID_REPLICA_ASSIGNMENT
    assert await grow(2, [[1, 2]]) == INVALID_REPLICA_ASSIGNMENT
    assert await grow(5, None, dry=True) == NONE
    assert len(broker.cluster.topics["t"].partitions) == 1
    assert await grow(3, [[1], [1]]) == NONE
    assert len(broker.cluster.topics["t"].partitions) == 3


async def test_deleting_a_topic_drops_its_committed_offsets() -> None:
    """As Kafka: a topic recreated under the same name starts with no committed offsets."""
    from kafkette.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
    from kafkette.protocol.messages.offset_commit_request import (
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kafkette.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic

    broker = Broker()
    for name in ("gone", "kept"):
        broker.cluster.create_topic(name, 1)
    commit = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(name, [OffsetCommitRequestPartition(0, 42)])
            for name in ("gone", "kept")
        ],
    )
    committed = await call(broker, commit, 8)
    assert [p.error_code for t in committed.topics for p in t.partitions] == [NONE, NONE]
    await call(broker, DeleteTopicsRequest(topic_names=["gone"]), 5)
    broker.cluster.create_topic("gone", 1)
    fetch = OffsetFetchRequest(
        group_id="g",
        topics=[OffsetFetchRequestTopic(name, [0]) for name in ("gone", "kept")],
    )
    fetched = await call(broker, fetch, 7)
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [
        ("gone", -1),
        ("kept", 42),
    ]
