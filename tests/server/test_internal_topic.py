"""InternalTopic, and the offsets store built on it, from their few collaborators (a
cluster over memory logs, a clock, an ``appended`` callback): no Broker."""

from __future__ import annotations

import logging

import pytest

from kafkette.backends import Log, LogConfig, MemoryStorage
from kafkette.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches
from kafkette.protocol.records.batch_header import BatchHeader
from kafkette.server.cluster import Cluster
from kafkette.server.groups.log_store import (
    OFFSETS_TOPIC,
    LogGroupStore,
    decode_key,
    decode_offset_value,
    offsets_topic,
)
from kafkette.server.groups.store import CommittedOffset, LoadedGroups
from kafkette.server.internal_topic import InternalTopic, partition_for
from kafkette.testing import ManualClock

NAME = "__internal"


def make_cluster(clock: ManualClock) -> Cluster:
    return Cluster(MemoryStorage(clock=lambda: clock.now_ms), LogConfig(), None)


def make_topic(
    cluster: Cluster, clock: ManualClock, appended: list[Log], partitions: int = 4
) -> InternalTopic:
    return InternalTopic(
        cluster,
        NAME,
        partitions=partitions,
        configs={"cleanup.policy": "compact", "segment.bytes": "4096"},
        clock=lambda: clock.now_ms,
        appended=appended.append,
        logger=logging.getLogger("tests.internal_topic"),
    )


def batches(log: Log) -> list[RecordBatch]:
    found = []
    for b in iter_batches(log.read(0, 1 << 20).to_bytes()):
        assert isinstance(b, RecordBatch)
        found.append(b)
    return found


def test_made_on_first_use_with_its_partitions_and_configs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing until ensure; then the planned partitions and configs, one log line, and
    the same topic on every later call."""
    clock = ManualClock()
    cluster = make_cluster(clock)
    topic = make_topic(cluster, clock, [], partitions=3)
    assert topic.existing() is None
    assert topic.partition_count == 3
    assert NAME not in cluster.topics
    with caplog.at_level(logging.INFO, "tests.internal_topic"):
        made = topic.ensure()
        assert topic.ensure() is made
    assert cluster.topics[NAME] is made
    assert [p.index for p in made.partitions] == [0, 1, 2]
    assert made.configs == {"cleanup.policy": "compact", "segment.bytes": "4096"}
    assert made.partitions[0].log.config.compact
    assert [r.getMessage() for r in caplog.records] == [f"created {NAME} with 3 partitions"]


def test_an_existing_topic_keeps_its_partition_count() -> None:
    """A topic already there (e.g. from an earlier run with another setting) is used as is."""
    clock = ManualClock()
    cluster = make_cluster(clock)
    cluster.create_topic(NAME, 7)
    topic = make_topic(cluster, clock, [], partitions=3)
    assert topic.partition_count == 7
    assert topic.partition("g").index == partition_for("g", 7)


def test_keys_go_to_kafkas_partition() -> None:
    """Utils.abs(hashCode) % partitions: Java's "group-1".hashCode() is 293427299
    (java 17), so partition 293427299 % 4 == 3."""
    clock = ManualClock()
    topic = make_topic(make_cluster(clock), clock, [])
    assert partition_for("group-1", 4) == 3
    assert topic.partition("group-1").index == 3


def test_append_at_the_leader_epoch_then_tells_the_broker() -> None:
    """The batch lands at the log end with the partition's leader epoch, and ``appended``
    gets that log, once per append."""
    clock = ManualClock()
    appended: list[Log] = []
    topic = make_topic(make_cluster(clock), clock, appended)
    partition = topic.partition("k")
    partition.leader_epoch = 5
    for value in (b"a", b"b"):
        builder = RecordBatchBuilder()
        builder.append(topic.now_ms(), b"k", value)
        topic.append(partition, builder.build())
    assert appended == [partition.log, partition.log]
    data = partition.log.read(0, 1 << 20).to_bytes()
    first = BatchHeader.parse(data)
    second = BatchHeader.parse(data, first.size)
    assert [(h.base_offset, h.partition_leader_epoch) for h in (first, second)] == [(0, 5), (1, 5)]
    found = batches(partition.log)
    assert [r.value for b in found for r in b] == [b"a", b"b"]
    assert [r.timestamp for b in found for r in b] == [clock.now_ms, clock.now_ms]


def test_offsets_store_without_a_broker() -> None:
    """LogGroupStore over offsets_topic: a commit is one record in the group's partition,
    stamped by the clock, handed to ``appended``, and read back by a new store."""
    clock = ManualClock()
    cluster = make_cluster(clock)
    appended: list[Log] = []

    def topic() -> InternalTopic:
        return offsets_topic(
            cluster,
            partitions=4,
            segment_bytes=8192,
            clock=lambda: clock.now_ms,
            appended=appended.append,
        )

    store = LogGroupStore(topic())
    committed = CommittedOffset(offset=42, commit_timestamp_ms=clock.now_ms)
    clock.advance(10)
    store.write_offsets("group-1", {("t", 0): committed})
    made = cluster.topics[OFFSETS_TOPIC]
    assert made.configs == {
        "cleanup.policy": "compact",
        "segment.bytes": "8192",
        "compression.type": "producer",
    }
    log = made.partitions[3].log
    assert appended == [log]
    [record] = [r for b in batches(log) for r in b]
    assert record.timestamp == clock.now_ms
    assert record.key is not None and record.value is not None
    assert str(decode_key(record.key)) == "OffsetKey(group_id='group-1', topic='t', partition=0)"
    assert decode_offset_value(record.value) == committed
    assert LogGroupStore(topic()).load() == LoadedGroups({}, {"group-1": {("t", 0): committed}})
