"""LogGroupStore through a real Broker: the internal topic, round trips on memory and
disk storage (also across a restart), compaction, foreign and transactional records."""

from __future__ import annotations

import logging
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.errors import InvalidCommitOffsetSizeError, UnknownServerError
from kafkette.protocol.messages import ConsumerGroupMetadataValue, MetadataRequest
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.records import (
    ControlRecordType,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
)
from kafkette.server import Broker, BrokerConfig
from kafkette.server.groups.consumer_protocol.records import RecordKey as ConsumerGroupRecordKey
from kafkette.server.groups.log_store import (
    OFFSETS_TOPIC,
    LogGroupStore,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from kafkette.server.groups.store import (
    CommittedOffset,
    LoadedGroups,
    MemoryGroupStore,
    StoredGroup,
    StoredMember,
)
from kafkette.server.internal_topic import partition_for
from tests.server.dataplane import NOW, FakeClock, call

PARTITIONS = 3
UNKNOWN_TOPIC_OR_PARTITION = 3


def make_broker(clock: FakeClock, data_dir: Path | None = None, **settings: Any) -> Broker:
    settings.setdefault("offsets_topic_num_partitions", PARTITIONS)
    return Broker(
        BrokerConfig(data_dir=None if data_dir is None else str(data_dir), **settings),
        clock=clock,
    )


def group(generation: int, *member_ids: str, protocol: str | None = "range") -> StoredGroup:
    return StoredGroup(
        protocol_type="consumer",
        generation=generation,
        protocol_name=protocol if member_ids else None,
        leader_id=member_ids[0] if member_ids else None,
        current_state_timestamp_ms=NOW + generation,
        members=tuple(
            StoredMember(
                member_id=m,
                group_instance_id=None,
                client_id=f"client-{m}",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=300000,
                session_timeout_ms=45000,
                subscription=b"sub-" + m.encode(),
                assignment=b"asg-" + m.encode(),
            )
            for m in member_ids
        ),
    )


def offset(value: int, **fields: Any) -> CommittedOffset:
    fields.setdefault("commit_timestamp_ms", NOW)
    return CommittedOffset(offset=value, **fields)


def records_of(broker: Broker, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of a partition of the offsets topic (a read stops at a segment's end)."""
    log = broker.cluster.get_partition(OFFSETS_TOPIC, partition).log
    out: list[tuple[int, bytes | None, bytes | None]] = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        for batch in iter_batches(log.read(position, 1 << 24).to_bytes()):
            assert isinstance(batch, RecordBatch)
            out += [(r.offset, r.key, r.value) for r in batch]
            position = batch.next_offset
    return out


# ---- the internal topic


def test_topic_made_on_first_write() -> None:
    """No topic until the first write; then Kafka's shape: offsets.topic.num.partitions
    partitions, compacted, offsets.topic.segment.bytes segments."""
    broker = make_broker(
        FakeClock(), offsets_topic_num_partitions=5, offsets_topic_segment_bytes=4096
    )
    store = LogGroupStore(broker.offsets_topic)
    assert store.load() == LoadedGroups({}, {})
    assert OFFSETS_TOPIC not in broker.cluster.topics
    store.write_offsets("g", {})
    assert OFFSETS_TOPIC not in broker.cluster.topics  # nothing to write: no topic
    store.write_group("g", group(1, "a"))
    topic = broker.cluster.topics[OFFSETS_TOPIC]
    assert topic.is_internal
    assert len(topic.partitions) == 5
    assert topic.configs == {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "compression.type": "producer",
    }
    log = topic.partitions[0].log
    assert log.config.compact
    assert log.config.segment_bytes == 4096
    assert store.ensure_topic() is topic


def test_ensure_topic_makes_it_without_a_write() -> None:
    """ensure_topic (for FindCoordinator, as Kafka) makes the topic empty, once."""
    broker = make_broker(FakeClock())
    store = LogGroupStore(broker.offsets_topic)
    topic = store.ensure_topic()
    assert broker.cluster.topics[OFFSETS_TOPIC] is topic
    assert [p.log.log_end_offset for p in topic.partitions] == [0] * PARTITIONS
    assert store.ensure_topic() is topic
    assert store.load() == LoadedGroups({}, {})


def test_existing_topic_partition_count_wins() -> None:
    """Groups are placed by the partitions the topic has, as Kafka's coordinator does
    when offsets.topic.num.partitions changed after the topic was made."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        broker = make_broker(clock, Path(tmp), offsets_topic_num_partitions=2)
        LogGroupStore(broker.offsets_topic).write_offsets("my-group", {("t", 0): offset(1)})
        broker.close()
        broker = make_broker(clock, Path(tmp), offsets_topic_num_partitions=50)
        store = LogGroupStore(broker.offsets_topic)
        assert store.partition_count == 2
        assert store.partition_for("my-group") == partition_for("my-group", 2)
        assert store.load().offsets == {"my-group": {("t", 0): offset(1)}}
        broker.close()


def test_records_land_in_the_group_partition() -> None:
    """One batch per write, in partition Utils.abs(hash) % n, keys and values in Kafka's
    formats, timestamps from the broker clock; tombstones have null values."""
    clock = FakeClock()
    broker = make_broker(clock, offsets_topic_num_partitions=50)
    store = LogGroupStore(broker.offsets_topic)
    assert store.partition_for("my-group") == 12
    first = {("t", 0): offset(10), ("t", 1): offset(11, leader_epoch=2, metadata="x")}
    store.write_offsets("my-group", first)
    clock.advance(5)
    store.write_group("my-group", group(1, "a"))
    store.write_offsets("my-group", {("t", 0): None})
    store.write_group("my-group", None)
    assert records_of(broker, 12) == [
        (0, encode_offset_key("my-group", "t", 0), encode_offset_value(offset(10))),
        (1, encode_offset_key("my-group", "t", 1), encode_offset_value(first[("t", 1)])),
        (2, encode_group_key("my-group"), encode_group_value(group(1, "a"))),
        (3, encode_offset_key("my-group", "t", 0), None),
        (4, encode_group_key("my-group"), None),
    ]
    log = broker.cluster.get_partition(OFFSETS_TOPIC, 12).log
    batches = list(iter_batches(log.read(0, 1 << 20).to_bytes()))
    assert [(b.base_offset, b.next_offset) for b in batches] == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert [r.timestamp for b in batches for r in b] == [NOW, NOW, NOW + 5, NOW + 5, NOW + 5]
    assert log.high_watermark == 5
    for other in range(50):
        if other != 12:
            assert records_of(broker, other) == []


@pytest.mark.anyio
async def test_metadata_lists_it_as_internal_and_never_auto_creates_it() -> None:
    """All-topics Metadata lists __consumer_offsets with is_internal once it exists;
    asking for it by name (auto-creation on) does not create it."""
    broker = make_broker(FakeClock())
    wanted = MetadataRequest(
        topics=[MetadataRequestTopic(name=OFFSETS_TOPIC)], allow_auto_topic_creation=True
    )
    response = await call(broker, wanted, 12)
    assert [(t.name, t.error_code) for t in response.topics] == [
        (OFFSETS_TOPIC, UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert OFFSETS_TOPIC not in broker.cluster.topics
    response = await call(
        broker, MetadataRequest(topics=[MetadataRequestTopic(name="__transaction_state")]), 12
    )
    assert response.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    broker.cluster.create_topic("plain", 1)
    LogGroupStore(broker.offsets_topic).write_group("g", group(1, "a"))
    response = await call(broker, MetadataRequest(topics=None), 12)
    listed = {t.name: (t.is_internal, len(t.partitions)) for t in response.topics}
    assert listed == {"plain": (False, 1), OFFSETS_TOPIC: (True, PARTITIONS)}
    response = await call(broker, wanted, 12)
    assert [(t.name, t.error_code, t.is_internal) for t in response.topics] == [
        (OFFSETS_TOPIC, 0, True)
    ]


# ---- round trips against the dict model


write_op = st.one_of(
    st.tuples(
        st.just("group"),
        st.sampled_from(["g1", "g2", "my-group", "orders"]),
        st.none()
        | st.integers(1, 5).map(lambda gen: group(gen, *[f"m{i}" for i in range(gen % 3)])),
    ),
    st.tuples(
        st.just("offsets"),
        st.sampled_from(["g1", "g2", "my-group", "orders"]),
        st.dictionaries(
            st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2)),
            st.none()
            | st.builds(
                CommittedOffset,
                offset=st.integers(0, 1000),
                leader_epoch=st.integers(-1, 3),
                metadata=st.sampled_from(["", "meta"]),
                commit_timestamp_ms=st.just(NOW),
                expire_timestamp_ms=st.none() | st.just(NOW + 1000),
            ),
            max_size=3,
        ),
    ),
)


def apply(ops: list[tuple[str, str, Any]], *stores: Any) -> None:
    for kind, group_id, payload in ops:
        for store in stores:
            if kind == "group":
                store.write_group(group_id, payload)
            else:
                store.write_offsets(group_id, payload)


def expected(ops: list[tuple[str, str, Any]]) -> LoadedGroups:
    """What the dict store holds, with v1's loss of the leader epoch applied."""
    model = MemoryGroupStore()
    apply(ops, model)
    loaded = model.load()
    for offsets in loaded.offsets.values():
        for key, value in offsets.items():
            if value.expire_timestamp_ms is not None:
                offsets[key] = CommittedOffset(
                    offset=value.offset,
                    metadata=value.metadata,
                    commit_timestamp_ms=value.commit_timestamp_ms,
                    expire_timestamp_ms=value.expire_timestamp_ms,
                )
    return loaded


@settings(max_examples=40, deadline=None)
@given(st.lists(write_op, max_size=12))
def test_memory_round_trip(ops: list[tuple[str, str, Any]]) -> None:
    """Whatever is written, load() gives what the dict store holds."""
    broker = make_broker(FakeClock())
    apply(ops, LogGroupStore(broker.offsets_topic))
    assert LogGroupStore(broker.offsets_topic).load() == expected(ops)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(write_op, max_size=10), st.lists(write_op, max_size=4))
def test_disk_round_trip_across_restart(
    before: list[tuple[str, str, Any]], after: list[tuple[str, str, Any]]
) -> None:
    """On disk, a new Broker over the same data directory loads the same groups, and
    writes after the restart add to them."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        broker = make_broker(clock, Path(tmp))
        apply(before, LogGroupStore(broker.offsets_topic))
        broker.close()
        broker = make_broker(clock, Path(tmp))
        assert LogGroupStore(broker.offsets_topic).load() == expected(before)
        apply(after, LogGroupStore(broker.offsets_topic))
        broker.close()
        broker = make_broker(clock, Path(tmp))
        assert LogGroupStore(broker.offsets_topic).load() == expected(before + after)
        broker.close()


# ---- compaction


def test_compaction_keeps_the_latest_values(tmp_path: Path) -> None:
    """Compacting the disk log drops superseded records and, after delete.retention.ms,
    tombstones; load() gives the same groups before and after, and after a restart."""
    clock = FakeClock()
    broker = make_broker(clock, tmp_path, offsets_topic_num_partitions=1)
    store = LogGroupStore(broker.offsets_topic)
    for i in range(20):
        store.write_offsets("g", {("t", 0): offset(i), ("t", 1): offset(100 + i)})
        store.write_group("g", group(i + 1, "a", "b"))
    store.write_offsets("g", {("t", 1): None})
    store.write_group("gone", group(1, "x"))
    store.write_offsets("gone", {("t", 0): offset(5)})
    store.write_group("gone", None)
    store.write_offsets("gone", {("t", 0): None})
    want = LoadedGroups({"g": group(20, "a", "b")}, {"g": {("t", 0): offset(19)}})
    assert store.load() == want
    log = broker.cluster.get_partition(OFFSETS_TOPIC, 0).log
    end = log.log_end_offset
    assert end == 65
    log.roll()
    stats = log.compact(force=True)
    assert stats is not None
    # the latest record of each key stays: g's t-0 and group, and three tombstones
    kept = [(o, k) for o, k, _ in records_of(broker, 0)]
    assert kept == [
        (57, encode_offset_key("g", "t", 0)),
        (59, encode_group_key("g")),
        (60, encode_offset_key("g", "t", 1)),
        (63, encode_group_key("gone")),
        (64, encode_offset_key("gone", "t", 0)),
    ]
    assert store.load() == want
    clock.advance(log.config.delete_retention_ms + 1)
    store.write_offsets("h", {("t", 0): offset(1)})  # written after the horizon passed
    log.roll()
    log.compact(force=True)
    assert [(o, k) for o, k, _ in records_of(broker, 0)] == [
        (57, encode_offset_key("g", "t", 0)),
        (59, encode_group_key("g")),
        (65, encode_offset_key("h", "t", 0)),
    ]
    want.offsets["h"] = {("t", 0): offset(1)}
    assert store.load() == want
    assert log.log_end_offset == 66
    broker.close()
    broker = make_broker(clock, tmp_path, offsets_topic_num_partitions=1)
    assert LogGroupStore(broker.offsets_topic).load() == want
    broker.close()


# ---- records the store does not write


def append_raw(broker: Broker, group_id: str, batch: bytes) -> None:
    partition = broker.cluster.get_partition(
        OFFSETS_TOPIC, LogGroupStore(broker.offsets_topic).partition_for(group_id)
    )
    partition.log.append(batch)
    broker.appended(partition.log)


def raw_batch(records: list[tuple[bytes | None, bytes | None]], **options: Any) -> bytes:
    builder = RecordBatchBuilder(**options)
    for key, value in records:
        builder.append(NOW, key, value)
    return builder.build()


def test_kafka4_consumer_group_records_are_read(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka 4's consumer group records (ConsumerGroupMetadataKey, key version 3, as Kafka
    encodes it) are read back; an undecodable consumer group key and a share group record
    (key version 9) are skipped with a log line; the classic records around them load."""
    broker = make_broker(FakeClock(), offsets_topic_num_partitions=1)
    store = LogGroupStore(broker.offsets_topic)
    store.write_offsets("g", {("t", 0): offset(3)})
    group_id = b"g"
    consumer_group_key = struct.pack(">hh", 3, len(group_id)) + group_id
    consumer_group_value = struct.pack(">hi", 0, 7) + b"\x00"  # v0: epoch 7, no tags
    append_raw(broker, "g", raw_batch([(consumer_group_key, consumer_group_value)]))
    append_raw(broker, "g", raw_batch([(struct.pack(">h", 8) + b"\x00\x01\x02", None)]))
    share_group_key = struct.pack(">hh", 9, len(group_id)) + group_id
    append_raw(broker, "g", raw_batch([(share_group_key, None)]))
    store.write_group("g", group(2, "a"))
    with caplog.at_level(logging.INFO, logger="kafkette.server.groups"):
        loaded = store.load()
    assert loaded == LoadedGroups(
        {"g": group(2, "a")},
        {"g": {("t", 0): offset(3)}},
        {ConsumerGroupRecordKey(3, "g"): ConsumerGroupMetadataValue(epoch=7)},
    )
    skipped = [r.getMessage() for r in caplog.records if "key" in r.getMessage()]
    assert len(skipped) == 2
    assert skipped[0].startswith(f"{OFFSETS_TOPIC}-0 offset 2: undecodable key skipped: ")
    assert skipped[1] == (
        f"{OFFSETS_TOPIC}-0 offset 3: skipped a record with key version 9 "
        "(not a group or offset record)"
    )


def test_undecodable_values_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    """A value that does not decode is logged and left out; a keyless record too."""
    broker = make_broker(FakeClock(), offsets_topic_num_partitions=1)
    store = LogGroupStore(broker.offsets_topic)
    store.write_offsets("g", {("t", 0): offset(3), ("t", 1): offset(4)})
    append_raw(broker, "g", raw_batch([(encode_offset_key("g", "t", 1), b"\x00\x03\x00")]))
    with caplog.at_level(logging.WARNING, logger="kafkette.server.groups"):
        assert store.load() == LoadedGroups({}, {"g": {("t", 0): offset(3)}})
    assert len(caplog.records) == 1
    assert "offset 2: undecodable value" in caplog.records[0].getMessage()


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_offsets_count_once_committed(commit: bool) -> None:
    """TxnOffsetCommit records count when their COMMIT marker is read, not on ABORT; a
    plain commit after the transactional one (before the marker) is not overwritten."""
    broker = make_broker(FakeClock(), offsets_topic_num_partitions=1)
    store = LogGroupStore(broker.offsets_topic)
    store.write_offsets("g", {("t", 0): offset(1), ("t", 1): offset(1)})
    append_raw(
        broker,
        "g",
        raw_batch(
            [
                (encode_offset_key("g", "t", 0), encode_offset_value(offset(50))),
                (encode_offset_key("g", "t", 1), encode_offset_value(offset(51))),
            ],
            producer_id=9,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        ),
    )
    store.write_offsets("g", {("t", 1): offset(60)})
    assert store.load().offsets == {"g": {("t", 0): offset(1), ("t", 1): offset(60)}}
    append_raw(
        broker,
        "g",
        build_control_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            producer_id=9,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=NOW,
        ),
    )
    assert store.load().offsets == {
        "g": {("t", 0): offset(50 if commit else 1), ("t", 1): offset(60)}
    }


def test_batches_over_max_message_bytes_fail_with_kafkas_codes() -> None:
    """A commit too large for the topic's max.message.bytes is INVALID_COMMIT_OFFSET_SIZE
    and a group record UNKNOWN_SERVER_ERROR (Kafka's mapping); nothing is appended."""
    broker = make_broker(FakeClock(), offsets_topic_num_partitions=1)
    store = LogGroupStore(broker.offsets_topic)
    store.write_offsets("g", {("t", 0): offset(1)})
    broker.cluster.set_topic_configs(OFFSETS_TOPIC, {"max.message.bytes": "200"})
    with pytest.raises(InvalidCommitOffsetSizeError):
        store.write_offsets("g", {("t", p): offset(p, metadata="x" * 50) for p in range(5)})
    with pytest.raises(UnknownServerError):
        store.write_group("g", group(1, "a", "b", "c"))
    assert broker.cluster.get_partition(OFFSETS_TOPIC, 0).log.log_end_offset == 1
    assert store.load() == LoadedGroups({}, {"g": {("t", 0): offset(1)}})
