"""Kafka's per-request limits on CreateTopics and CreatePartitions, in process.

Over 10,000 new partitions in one request (KAFKA-17870, KAFKA-19673), or over
10,000 topics and configs, every topic of the request fails with
POLICY_VIOLATION and Kafka's message, before anything is allocated. Within the
limits, partition logs are opened in steps (on disk, in a worker thread):
other requests are served meanwhile, and a creation that fails or is
cancelled half way leaves nothing behind.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkette.errors import KafkaStorageError
from kafkette.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
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
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.server import Broker, BrokerConfig
from kafkette.server.steps import run_in_steps
from tests.server.dataplane import call

pytestmark = pytest.mark.anyio

NONE = 0
LEADER_NOT_AVAILABLE = 5
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


def topic(
    name: str,
    partitions: int = -1,
    *,
    configs: int = 0,
    assignments: int = 0,
) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(p, [1]) for p in range(assignments)],
        configs=[CreatableTopicConfig(f"x.{i}", "1") for i in range(configs)],
    )


async def create(
    broker: Broker, *topics: CreatableTopic, validate_only: bool = False, version: int = 7
) -> list[tuple[str, int, str | None]]:
    request = CreateTopicsRequest(topics=list(topics), validate_only=validate_only)
    response = await call(broker, request, version)
    return [(t.name, t.error_code, t.error_message) for t in response.topics]


async def grow(
    broker: Broker, *counts: tuple[str, int], validate_only: bool = False
) -> list[tuple[str, int, str | None]]:
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name, count, None) for name, count in counts],
        timeout_ms=30_000,
        validate_only=validate_only,
    )
    response = await call(broker, request, 3)
    return [(r.name, r.error_code, r.error_message) for r in response.results]


def refused(*names: str, message: str = TOO_MANY_PARTITIONS) -> list[tuple[str, int, str]]:
    return [(name, POLICY_VIOLATION, message) for name in names]


# ---- CreateTopics


async def test_huge_partition_count_is_refused_before_anything_is_allocated() -> None:
    """The attack of the issue: 16,777,215 partitions, refused at once, a few KB at most."""
    broker = Broker()
    tracemalloc.start()
    try:
        results = await create(broker, topic("huge", 16_777_215))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert results == refused("huge")
    assert "huge" not in broker.cluster.topics
    assert broker.cluster.storage.list_partitions() == []
    assert peak < 1_000_000


async def test_ten_thousand_partitions_in_one_request_are_created() -> None:
    broker = Broker()
    results = await create(broker, topic("a", 4_000), topic("b", 6_000))
    assert results == [("a", NONE, None), ("b", NONE, None)]
    assert len(broker.cluster.topics["a"].partitions) == 4_000
    assert len(broker.cluster.topics["b"].partitions) == 6_000


async def test_ten_thousand_and_one_partitions_fail_every_topic_of_the_request() -> None:
    broker = Broker()
    results = await create(broker, topic("a", 1), topic("b", 10_000), topic("a", 1))
    assert results == refused("a", "b", "a")
    assert broker.cluster.topics == {}


async def test_default_partition_counts_and_assignments_count_towards_the_limit() -> None:
    """-1 counts as the broker's num.partitions; a manual assignment as its length."""
    broker = Broker(BrokerConfig(num_partitions=5_000))
    assert await create(broker, topic("a"), topic("b"), topic("c", assignments=1)) == refused(
        "a", "b", "c"
    )
    assert await create(Broker(), topic("m", assignments=10_001)) == refused("m")


async def test_invalid_partition_counts_count_as_none() -> None:
    """As Kafka: a zero or negative count adds nothing, and fails on its own."""
    broker = Broker()
    results = await create(broker, topic("bad", -5), topic("ok", 10_000))
    assert [(name, code) for name, code, _ in results] == [("bad", 37), ("ok", NONE)]


async def test_validate_only_requests_are_limited_too() -> None:
    broker = Broker()
    assert await create(broker, topic("v", 2**31 - 1), validate_only=True) == refused("v")


async def test_old_versions_get_the_same_refusal() -> None:
    broker = Broker()
    (result,) = await create(broker, topic("old", 10_001), version=0)
    assert result[:2] == ("old", POLICY_VIOLATION)  # v0 has no error message


async def test_over_ten_thousand_topics_and_configs_are_refused() -> None:
    """Kafka's 10,000 metadata records per operation: a record per topic and per config."""
    broker = Broker()
    topics = [topic(f"t{i}", 1, configs=1) for i in range(5_001)]
    results = await create(broker, *topics)
    assert {r[1:] for r in results} == {(POLICY_VIOLATION, TOO_LARGE_BATCH)}
    assert len(results) == 5_001
    assert broker.cluster.topics == {}
    (one,) = await create(broker, topic("many-configs", 1, configs=10_000))
    assert one == ("many-configs", POLICY_VIOLATION, TOO_LARGE_BATCH)


# ---- CreatePartitions


async def test_create_partitions_adding_ten_thousand_works_and_one_more_is_refused() -> None:
    broker = Broker()
    await create(broker, topic("a", 1), topic("b", 1))
    assert await grow(broker, ("a", 5_001), ("b", 5_002)) == refused("a", "b")
    assert [len(broker.cluster.topics[n].partitions) for n in "ab"] == [1, 1]
    assert await grow(broker, ("a", 5_001), ("b", 5_001)) == [("a", NONE, None), ("b", NONE, None)]
    assert [len(broker.cluster.topics[n].partitions) for n in "ab"] == [5_001, 5_001]


async def test_create_partitions_to_a_huge_count_is_refused() -> None:
    broker = Broker()
    await create(broker, topic("a", 1))
    assert await grow(broker, ("a", 2**31 - 1), validate_only=True) == refused("a")
    assert await grow(broker, ("a", 16_777_215)) == refused("a")
    assert len(broker.cluster.topics["a"].partitions) == 1


async def test_create_partitions_with_too_many_topics_is_refused() -> None:
    broker = Broker()
    counts = [(f"t{i}", 2) for i in range(10_001)]
    results = await grow(broker, *counts)
    assert {r[1:] for r in results} == {(POLICY_VIOLATION, TOO_LARGE_BATCH)}


async def test_create_partitions_still_checks_assignments_within_the_limit() -> None:
    broker = Broker()
    await create(broker, topic("a", 1))
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic("a", 3, [CreatePartitionsAssignment([1])])],
        timeout_ms=30_000,
        validate_only=False,
    )
    response = await call(broker, request, 3)
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (39, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
    ]


# ---- large work within the limits


async def test_other_requests_are_served_while_partitions_are_opened() -> None:
    """A 10,000-partition creation yields: a Metadata request in the meantime is answered,
    and sees the topic as being created (LEADER_NOT_AVAILABLE), not missing."""
    broker = Broker()
    seen: list[tuple[int, bool]] = []

    async def look() -> None:
        while "big" not in broker.cluster.creating:
            await anyio.sleep(0)
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name="big")], allow_auto_topic_creation=True
        )
        response = await call(broker, request, 12)
        seen.append((response.topics[0].error_code, "big" in broker.cluster.topics))

    async with anyio.create_task_group() as tg:
        tg.start_soon(look)
        assert await create(broker, topic("big", 10_000)) == [("big", NONE, None)]
    assert seen == [(LEADER_NOT_AVAILABLE, False)]
    assert broker.cluster.creating == set()


async def test_a_cancelled_creation_leaves_nothing_behind() -> None:
    broker = Broker()
    async with anyio.create_task_group() as tg:
        tg.start_soon(create, broker, topic("big", 10_000))
        while "big" not in broker.cluster.creating:
            await anyio.sleep(0)
        tg.cancel_scope.cancel()
    assert broker.cluster.topics == {}
    assert broker.cluster.creating == set()
    assert broker.cluster.storage.list_partitions() == []
    assert await create(broker, topic("big", 2)) == [("big", NONE, None)]


async def test_a_storage_error_half_way_deletes_the_logs_already_opened(tmp_path: Path) -> None:
    """On disk: out of file descriptors at partition 5, say; no directory or file stays."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    storage = broker.cluster.storage
    real_open = storage.open_log

    def failing_open(topic: str, partition: int, config: Any = None) -> Any:
        if partition == 5:
            raise KafkaStorageError("Too many open files")
        return real_open(topic, partition, config)

    storage.open_log = failing_open  # type: ignore[method-assign]
    try:
        assert await create(broker, topic("t", 8)) == [
            ("t", KAFKA_STORAGE_ERROR, "Too many open files")
        ]
        assert storage.list_partitions() == []
        await create(broker, topic("u", 2))
        assert await grow(broker, ("u", 9)) == [("u", KAFKA_STORAGE_ERROR, "Too many open files")]
        assert storage.list_partitions() == [("u", 0), ("u", 1)]
        assert len(broker.cluster.topics["u"].partitions) == 2
    finally:
        broker.close()


async def test_disk_logs_are_opened_off_the_event_loop(tmp_path: Path) -> None:
    """On disk a new log is a directory and a file, whose creation may wait milliseconds
    on the file system's journal: CreateTopics and CreatePartitions open them in a worker
    thread (the loop only registers them)."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    storage = broker.cluster.storage
    real_open = storage.open_log
    threads: set[int] = set()

    def recording_open(topic: str, partition: int, config: Any = None) -> Any:
        threads.add(threading.get_ident())
        return real_open(topic, partition, config)

    storage.open_log = recording_open  # type: ignore[method-assign]
    try:
        assert await create(broker, topic("t", 30)) == [("t", NONE, None)]
        assert await grow(broker, ("t", 50)) == [("t", NONE, None)]
        assert threads and threading.get_ident() not in threads
        assert storage.list_partitions() == [("t", i) for i in range(50)]
        assert [p.index for p in broker.cluster.topics["t"].partitions] == list(range(50))
    finally:
        broker.close()


async def test_a_cancelled_creation_on_disk_leaves_nothing_behind(tmp_path: Path) -> None:
    """Cancelled while the worker thread opens the logs: they are deleted once it ends."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(create, broker, topic("big", 300))
            while "big" not in broker.cluster.creating:
                await anyio.sleep(0)
            tg.cancel_scope.cancel()
        assert broker.cluster.topics == {}
        assert broker.cluster.creating == set()
        assert broker.cluster.storage.list_partitions() == []
        # deleted logs are renamed away at once, their files freed by the next reap
        assert all(n.endswith("-delete") for n in os.listdir(tmp_path / "logs"))
        broker.cluster.storage.reap()
        assert os.listdir(tmp_path / "logs") == []
        assert await create(broker, topic("big", 2)) == [("big", NONE, None)]
        assert broker.cluster.storage.list_partitions() == [("big", 0), ("big", 1)]
    finally:
        broker.close()


async def test_run_in_steps_yields_each_time_the_budget_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six steps of 2 ms with a 5 ms budget: the loop gets a turn after steps 3 and 6."""
    now = [0.0]
    trace: list[str] = []
    real_sleep = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        trace.append("yield")
        await real_sleep(delay)

    def steps() -> Any:
        for i in range(1, 7):
            trace.append(f"step {i}")
            now[0] += 0.002
            yield

    monkeypatch.setattr("kafkette.server.steps.anyio.sleep", recording_sleep)
    await run_in_steps(steps(), budget_s=0.005, clock=lambda: now[0])
    assert trace == ["step 1", "step 2", "step 3", "yield", "step 4", "step 5", "step 6", "yield"]


# ---- Metadata auto-creation


async def metadata(broker: Broker, *names: str) -> list[tuple[str, int, int]]:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name) for name in names], allow_auto_topic_creation=True
    )
    response = await call(broker, request, 12)
    return [(t.name, t.error_code, len(t.partitions)) for t in response.topics]


async def test_auto_creation_of_one_metadata_request_is_one_batch_under_the_limit() -> None:
    """Over 10,000 partitions none is created and each is LEADER_NOT_AVAILABLE, as Kafka."""
    broker = Broker(BrokerConfig(num_partitions=5_000))
    both = [("a", 0, 5_000), ("b", 0, 5_000), ("a", 0, 5_000)]
    assert await metadata(broker, "a", "b", "a") == both
    assert await metadata(broker, "a", "c", "d", "e") == [("a", 0, 5_000)] + [
        (name, LEADER_NOT_AVAILABLE, 0) for name in "cde"
    ]
    assert set(broker.cluster.topics) == {"a", "b"}


async def test_a_metadata_request_naming_many_new_topics_creates_none() -> None:
    broker = Broker()
    names = [f"t{i}" for i in range(10_001)]
    results = await metadata(broker, *names)
    assert {code for _, code, _ in results} == {LEADER_NOT_AVAILABLE}
    assert broker.cluster.topics == {}
    assert broker.cluster.storage.list_partitions() == []


# ---- DeleteTopics


async def delete(broker: Broker, *names: str) -> list[tuple[str, int, str | None]]:
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in names])
    response = await call(broker, request, 6)
    return [(r.name, r.error_code, r.error_message) for r in response.responses]


async def test_over_ten_thousand_topics_in_one_delete_are_refused() -> None:
    broker = Broker()
    await create(broker, topic("kept", 1))
    results = await delete(broker, "kept", *(f"t{i}" for i in range(10_000)))
    assert {r[1:] for r in results} == {(POLICY_VIOLATION, TOO_LARGE_BATCH)}
    assert "kept" in broker.cluster.topics


async def test_a_cancelled_deletion_still_deletes_every_log() -> None:
    broker = Broker()
    await create(broker, topic("big", 10_000))
    async with anyio.create_task_group() as tg:
        tg.start_soon(delete, broker, "big")
        while "big" in broker.cluster.topics:
            await anyio.sleep(0)
        tg.cancel_scope.cancel()
    assert broker.cluster.topics == {}
    assert broker.cluster.storage.list_partitions() == []
