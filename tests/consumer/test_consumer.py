"""The consumer in assign mode, sync and async, against every target (see conftest)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from kafkette import AsyncConsumer, Consumer, ConsumerRecord, TopicPartition
from kafkette.consumer import CREATE_TIME, NoOffsetForPartitionError, OffsetAndTimestamp
from kafkette.errors import IllegalStateError, OffsetOutOfRangeError
from kafkette.protocol.records import GZIP, LZ4, NO_COMPRESSION, SNAPPY, ZSTD
from tests.brokers import BrokerProcess
from tests.consumer.helpers import apoll_n, offsets, poll_n
from tests.consumer.targets import Row, Target

ROWS: list[Row] = [
    (1_700_000_000_000, b"key-0", b"value-0", [("trace", b"abc"), ("empty", b"")]),
    (1_700_000_000_005, None, b"no key", []),
    (1_700_000_000_003, b"no value", None, [("null", None)]),
    (1_700_000_000_010, None, None, []),
    (1_700_000_000_020, b"", b"", [("a", b"1"), ("a", b"2")]),
]


def expected_records(
    topic: str, base: int, rows: list[Row], epoch: int | None
) -> list[tuple[object, ...]]:
    return [
        (topic, 0, base + i, ts, key, value, tuple(headers), CREATE_TIME)
        for i, (ts, key, value, headers) in enumerate(rows)
    ]


def fields(records: list[ConsumerRecord]) -> list[tuple[object, ...]]:
    return [tuple(r)[:8] for r in records]


def config(target: Target, **settings: object) -> dict[str, object]:
    return {"bootstrap_servers": target.bootstrap, "fetch_max_wait_ms": 100, **settings}


@pytest.mark.anyio
@pytest.mark.parametrize("codec", [NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD])
async def test_records_come_back_exactly_async(target: Target, topic: str, codec: int) -> None:
    """Keys, values, headers (null, empty, repeated), timestamps and offsets, every codec."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce(tp, ROWS, codec)
    target.produce(tp, ROWS[:2], codec)
    async with AsyncConsumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        got = await apoll_n(consumer, 7)
    assert fields(got) == expected_records(topic, 0, ROWS, 0) + expected_records(
        topic, 5, ROWS[:2], 0
    )
    assert all(r.leader_epoch is None or r.leader_epoch >= 0 for r in got)


def test_records_come_back_exactly_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce(tp, ROWS, ZSTD)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        got = poll_n(consumer, 5)
    assert fields(got) == expected_records(topic, 0, ROWS, 0)


@pytest.mark.anyio
async def test_max_records_and_seek_inside_a_batch_async(target: Target, topic: str) -> None:
    """poll splits batches at max_records; a seek into a batch skips the records before it."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in (0, 5, 10):
        target.produce_values(tp, 5, start=start)
    async with AsyncConsumer(config(target)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 7)
        assert await consumer.position(tp) == 7
        first = await apoll_n(consumer, 3, max_records=3)
        assert offsets(first) == [7, 8, 9]
        assert await consumer.position(tp) == 10
        rest = await apoll_n(consumer, 5, max_records=3)
        assert offsets(rest) == [10, 11, 12, 13, 14]
        assert [r.value for r in rest] == [b"v10", b"v11", b"v12", b"v13", b"v14"]
        consumer.seek(tp, 2)
        again = await apoll_n(consumer, 13)
        assert offsets(again) == list(range(2, 15))


def test_max_records_and_seek_inside_a_batch_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in (0, 5, 10):
        target.produce_values(tp, 5, start=start)
    with Consumer(config(target)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 7)
        assert consumer.position(tp) == 7
        assert offsets(poll_n(consumer, 3, max_records=3)) == [7, 8, 9]
        assert consumer.position(tp) == 10
        assert offsets(poll_n(consumer, 5, max_records=3)) == [10, 11, 12, 13, 14]
        consumer.seek(tp, 2)
        assert offsets(poll_n(consumer, 13)) == list(range(2, 15))


@pytest.mark.anyio
async def test_seek_to_beginning_end_and_offsets_async(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: its ListOffsets LATEST is the last batch's base offset + 1."""
    kafkette_target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    kafkette_target.produce_values(tp0, 4)
    kafkette_target.produce_values(tp1, 6)
    async with AsyncConsumer(config(kafkette_target)) as consumer:
        consumer.assign([tp0, tp1])
        assert consumer.assignment() == {tp0, tp1}
        assert await consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert await consumer.end_offsets([tp0, tp1]) == {tp0: 4, tp1: 6}
        # auto.offset.reset defaults to latest
        assert await consumer.position(tp0) == 4
        consumer.seek_to_beginning(tp0)
        assert await consumer.position(tp0) == 0
        consumer.seek_to_beginning()
        assert await consumer.position(tp1) == 0
        consumer.seek_to_end(tp1)
        assert await consumer.position(tp1) == 6
        got = await apoll_n(consumer, 4)
        assert [(r.partition, r.offset) for r in got] == [(0, 0), (0, 1), (0, 2), (0, 3)]
        kafkette_target.produce_values(tp1, 2, start=6)
        got = await apoll_n(consumer, 2)
        assert [(r.partition, r.offset, r.value) for r in got] == [(1, 6, b"v6"), (1, 7, b"v7")]
        assert await consumer.position(tp1) == 8


def test_seek_to_beginning_end_and_offsets_sync(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: its ListOffsets LATEST is the last batch's base offset + 1."""
    kafkette_target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    kafkette_target.produce_values(tp0, 4)
    kafkette_target.produce_values(tp1, 6)
    with Consumer(config(kafkette_target)) as consumer:
        consumer.assign([tp0, tp1])
        assert consumer.assignment() == {tp0, tp1}
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 4, tp1: 6}
        assert consumer.position(tp0) == 4
        consumer.seek_to_beginning(tp0)
        assert consumer.position(tp0) == 0
        consumer.seek_to_end(tp1)
        assert consumer.position(tp1) == 6
        assert [(r.partition, r.offset) for r in poll_n(consumer, 4)] == [
            (0, 0),
            (0, 1),
            (0, 2),
            (0, 3),
        ]
        kafkette_target.produce_values(tp1, 2, start=6)
        got = poll_n(consumer, 2)
        assert [(r.partition, r.offset, r.value) for r in got] == [(1, 6, b"v6"), (1, 7, b"v7")]


@pytest.mark.anyio
async def test_pause_and_resume_async(target: Target, topic: str) -> None:
    target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    target.produce_values(tp0, 3)
    target.produce_values(tp1, 3)
    async with AsyncConsumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp0, tp1])
        consumer.pause(tp0)
        assert consumer.paused() == {tp0}
        got = await apoll_n(consumer, 3)
        assert [(r.partition, r.offset) for r in got] == [(1, 0), (1, 1), (1, 2)]
        assert await consumer.poll(timeout_ms=300) == {}
        assert await consumer.position(tp0) == 0
        consumer.resume(tp0)
        assert consumer.paused() == set()
        got = await apoll_n(consumer, 3)
        assert [(r.partition, r.offset) for r in got] == [(0, 0), (0, 1), (0, 2)]


def test_pause_and_resume_sync(target: Target, topic: str) -> None:
    target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    target.produce_values(tp0, 3)
    target.produce_values(tp1, 3)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp0, tp1])
        consumer.pause(tp0)
        assert consumer.paused() == {tp0}
        got = poll_n(consumer, 3)
        assert [(r.partition, r.offset) for r in got] == [(1, 0), (1, 1), (1, 2)]
        assert consumer.poll(timeout_ms=300) == {}
        consumer.resume(tp0)
        got = poll_n(consumer, 3)
        assert [(r.partition, r.offset) for r in got] == [(0, 0), (0, 1), (0, 2)]


@pytest.mark.anyio
async def test_offsets_for_times_async(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: its ListOffsets by timestamp answers offset 0."""
    kafkette_target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    kafkette_target.produce_values(tp, 5)  # timestamps 1000..1004
    async with AsyncConsumer(config(kafkette_target)) as consumer:
        found = await consumer.offsets_for_times({tp: 1003})
        assert found == {tp: OffsetAndTimestamp(3, 1003, found[tp].leader_epoch)}  # type: ignore[union-attr]
        assert await consumer.offsets_for_times({tp: 0}) == {
            tp: OffsetAndTimestamp(0, 1000, found[tp].leader_epoch)  # type: ignore[union-attr]
        }
        assert await consumer.offsets_for_times({tp: 2000}) == {tp: None}


def test_offsets_for_times_sync(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: its ListOffsets by timestamp answers offset 0."""
    kafkette_target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    kafkette_target.produce_values(tp, 5)
    with Consumer(config(kafkette_target)) as consumer:
        found = consumer.offsets_for_times({tp: 1001})
        answer = found[tp]
        assert answer is not None and (answer.offset, answer.timestamp) == (1, 1001)
        assert consumer.offsets_for_times({tp: 5000}) == {tp: None}


@pytest.mark.anyio
async def test_iteration_and_deserializers_async(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce_values(tp, 4)
    async with AsyncConsumer(
        config(target, auto_offset_reset="earliest"),
        key_deserializer=bytes.decode,
        value_deserializer=lambda v: v.upper(),
    ) as consumer:
        consumer.assign([tp])
        got = []
        async for record in consumer:
            got.append((record.offset, record.key, record.value))
            if len(got) == 4:
                break
    assert got == [(0, "k0", b"V0"), (1, "k1", b"V1"), (2, "k2", b"V2"), (3, "k3", b"V3")]


def test_iteration_and_deserializers_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce(tp, [(5, None, b"x", []), (6, b"k", None, [])])
    target.produce_values(tp, 2, start=2)
    with Consumer(
        config(target, auto_offset_reset="earliest"),
        **{"key.deserializer": bytes.decode, "value.deserializer": bytes.decode},
    ) as consumer:
        consumer.assign([tp])
        got = []
        for record in consumer:
            got.append((record.offset, record.key, record.value))
            if len(got) == 4:
                break
    assert got == [(0, None, "x"), (1, "k", None), (2, "k2", "v2"), (3, "k3", "v3")]


@pytest.mark.anyio
async def test_metrics_async(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce_values(tp, 10)
    async with AsyncConsumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        await apoll_n(consumer, 4, max_records=4)
        metrics = consumer.metrics()
        assert metrics.records_consumed == 4
        assert metrics.records_lag == {tp: 6}
        await apoll_n(consumer, 6)
        metrics = consumer.metrics()
    assert metrics.records_consumed == 10
    assert metrics.records_lag == {tp: 0}
    assert metrics.fetch_count >= 1
    assert metrics.bytes_consumed > 10 * 2
    assert 0 < metrics.fetch_latency_avg_ms <= metrics.fetch_latency_max_ms


def test_metrics_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce_values(tp, 10)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        poll_n(consumer, 10)
        metrics = consumer.metrics()
    assert metrics.records_consumed == 10
    assert metrics.records_lag == {tp: 0}
    assert metrics.fetch_count >= 1


@pytest.mark.anyio
async def test_reset_none_and_out_of_range_async(kafkette_target: Target, topic: str) -> None:
    """With auto.offset.reset=none a missing or out-of-range position reaches the app.

    Not on Tansu: a Fetch past the log end is not OFFSET_OUT_OF_RANGE.
    """
    kafkette_target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    kafkette_target.produce_values(tp, 5)
    async with AsyncConsumer(config(kafkette_target, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            await consumer.position(tp)
        with pytest.raises(NoOffsetForPartitionError):
            await consumer.poll()
        consumer.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError):
            await apoll_n(consumer, 1)
        assert await consumer.position(tp) == 50
        consumer.seek(tp, 3)
        assert offsets(await apoll_n(consumer, 2)) == [3, 4]


def test_reset_none_and_out_of_range_sync(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: a Fetch past the log end is not OFFSET_OUT_OF_RANGE."""
    kafkette_target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    kafkette_target.produce_values(tp, 5)
    with Consumer(config(kafkette_target, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.position(tp)
        consumer.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError):
            poll_n(consumer, 1)
        consumer.seek(tp, 1)
        assert offsets(poll_n(consumer, 4)) == [1, 2, 3, 4]


@pytest.mark.anyio
@pytest.mark.parametrize("reset", ["earliest", "latest"])
async def test_out_of_range_resets_async(kafkette_target: Target, topic: str, reset: str) -> None:
    """Not on Tansu: a Fetch past the log end is not OFFSET_OUT_OF_RANGE."""
    kafkette_target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    kafkette_target.produce_values(tp, 5)
    async with AsyncConsumer(config(kafkette_target, auto_offset_reset=reset)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        if reset == "earliest":
            assert offsets(await apoll_n(consumer, 5)) == [0, 1, 2, 3, 4]
        else:
            assert await consumer.poll(timeout_ms=500) == {}
            assert await consumer.position(tp) == 5
            kafkette_target.produce_values(tp, 1, start=5)
            assert offsets(await apoll_n(consumer, 1)) == [5]


@pytest.mark.anyio
async def test_close_and_misuse_async(target: Target) -> None:
    consumer = AsyncConsumer(config(target))
    with pytest.raises(IllegalStateError):
        consumer.assign([TopicPartition("x", 0)])
    async with consumer:
        with pytest.raises(IllegalStateError):
            await consumer.position(TopicPartition("not-assigned", 0))
        with pytest.raises(TypeError):
            consumer.assign([("x", 0)])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            await consumer.poll(max_records=0)
        with pytest.raises(ValueError):
            consumer.assign([TopicPartition("x", 0)])
            consumer.seek(TopicPartition("x", 0), -1)
    with pytest.raises(IllegalStateError):
        await consumer.poll()


def test_close_and_misuse_sync(target: Target) -> None:
    consumer = Consumer(config(target))
    with pytest.raises(IllegalStateError):
        consumer.position(TopicPartition("not-assigned", 0))
    consumer.close()
    consumer.close()
    with pytest.raises(IllegalStateError):
        consumer.poll()


@pytest.mark.anyio
async def test_delete_records_then_reset_async(kafkette_target: Target, topic: str) -> None:
    """After DeleteRecords moves the log start past the position: ``none`` raises
    OffsetOutOfRangeError, ``earliest`` resumes at the new log start.

    Not on Tansu: it closes the connection on DeleteRecords (v0.6).
    """
    target = kafkette_target
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in (0, 5):
        target.produce_values(tp, 5, start=start)
    assert target.delete_records(tp, 5) == 5
    async with AsyncConsumer(config(target, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 5}
        consumer.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError):
            await apoll_n(consumer, 1)
    async with AsyncConsumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1)
        got = await apoll_n(consumer, 5)
        assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(5, 10)]


def test_delete_records_then_reset_sync(kafkette_target: Target, topic: str) -> None:
    """Not on Tansu: see the async test."""
    target = kafkette_target
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce_values(tp, 6)
    assert target.delete_records(tp, 4) == 4
    with Consumer(config(target, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 4}
        consumer.seek(tp, 2)
        with pytest.raises(OffsetOutOfRangeError):
            poll_n(consumer, 1)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert offsets(poll_n(consumer, 2)) == [4, 5]


@pytest.mark.anyio
async def test_batch_larger_than_fetch_limits_still_comes_async(target: Target, topic: str) -> None:
    """Kafka returns a whole first batch over max.partition.fetch.bytes / fetch.max.bytes."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    big: list[Row] = [(1000 + i, None, bytes([i]) * 400, []) for i in range(5)]
    target.produce(tp, big)
    target.produce(tp, big)
    settings = config(
        target, auto_offset_reset="earliest", max_partition_fetch_bytes=100, fetch_max_bytes=100
    )
    async with AsyncConsumer(settings) as consumer:
        consumer.assign([tp])
        got = await apoll_n(consumer, 10)
    assert [(r.offset, r.value) for r in got] == [(i, bytes([i % 5]) * 400) for i in range(10)]


def test_batch_larger_than_fetch_limits_still_comes_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    target.produce(tp, [(1, None, b"x" * 2000, [])])
    settings = config(target, auto_offset_reset="earliest", max_partition_fetch_bytes=64)
    with Consumer(settings) as consumer:
        consumer.assign([tp])
        assert [(r.offset, r.value) for r in poll_n(consumer, 1)] == [(0, b"x" * 2000)]


@pytest.mark.anyio
async def test_reassign_drops_partitions_async(target: Target, topic: str) -> None:
    target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    target.produce_values(tp0, 2)
    target.produce_values(tp1, 2)
    async with AsyncConsumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp0])
        assert offsets(await apoll_n(consumer, 2)) == [0, 1]
        consumer.assign([tp1])
        assert consumer.assignment() == {tp1}
        got = await apoll_n(consumer, 2)
        assert [(r.partition, r.offset) for r in got] == [(1, 0), (1, 1)]
        with pytest.raises(IllegalStateError):
            await consumer.position(tp0)
        consumer.assign([])
        assert consumer.assignment() == set()
        assert await consumer.poll(timeout_ms=100) == {}


def test_reassign_drops_partitions_sync(target: Target, topic: str) -> None:
    target.create_topic(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    target.produce_values(tp0, 2)
    target.produce_values(tp1, 3)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp0])
        assert offsets(poll_n(consumer, 2)) == [0, 1]
        consumer.assign([tp1])
        assert consumer.assignment() == {tp1}
        assert [(r.partition, r.offset) for r in poll_n(consumer, 3)] == [(1, 0), (1, 1), (1, 2)]


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_fetches_ahead_of_the_application_async(target: Target, topic: str) -> None:
    """While records wait to be polled, the next fetch goes out: two fetches per partition
    wait besides the one being polled, not more, and polling that one up lets none go
    (two still wait); polling the next one up lets the fourth go."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in range(0, 40, 10):
        target.produce_values(tp, 10, start=start)
    # Both limits at 1 byte: one batch per fetch. (Tansu 0.6 ignores max.partition.fetch.bytes
    # and honours only fetch.max.bytes.)
    settings = config(
        target, auto_offset_reset="earliest", max_partition_fetch_bytes=1, fetch_max_bytes=1
    )
    async with AsyncConsumer(settings) as consumer:
        consumer.assign([tp])
        assert offsets(await apoll_n(consumer, 1, max_records=1)) == [0]
        core = consumer._c
        await _until(lambda: core.buffer.buffered(tp) == 3)
        await anyio.sleep(0.3)  # give a wrong fourth fetch the time to come
        assert core.buffer.buffered(tp) == 3
        assert consumer.metrics().fetch_count == 3
        assert offsets(await apoll_n(consumer, 9, max_records=9)) == list(range(1, 10))
        await anyio.sleep(0.3)
        assert consumer.metrics().fetch_count == 3
        assert offsets(await apoll_n(consumer, 10, max_records=10)) == list(range(10, 20))
        await _until(lambda: consumer.metrics().fetch_count == 4)
        assert offsets(await apoll_n(consumer, 20)) == list(range(20, 40))


def test_fetches_ahead_of_the_application_sync(target: Target, topic: str) -> None:
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in range(0, 30, 10):
        target.produce_values(tp, 10, start=start)
    settings = config(
        target, auto_offset_reset="earliest", max_partition_fetch_bytes=1, fetch_max_bytes=1
    )
    with Consumer(settings) as consumer:
        consumer.assign([tp])
        assert offsets(poll_n(consumer, 1, max_records=1)) == [0]
        deadline = time.monotonic() + 10
        while consumer.metrics().fetch_count < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert offsets(poll_n(consumer, 29)) == list(range(1, 30))


@pytest.mark.anyio
async def test_topic_created_after_assign_async(target: Target, topic: str) -> None:
    """Assigning a topic that does not exist yet is not an error: its records come once
    it exists (metadata is asked again with backoff, not at the metadata max age)."""
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(
        config(target, auto_offset_reset="earliest", retry_backoff_max_ms=200)
    ) as consumer:
        consumer.assign([tp])
        assert await consumer.poll(timeout_ms=300) == {}
        target.create_topic(topic)
        target.produce_values(tp, 2)
        assert offsets(await apoll_n(consumer, 2)) == [0, 1]


def test_topic_created_after_assign_sync(target: Target, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    with Consumer(config(target, auto_offset_reset="none", retry_backoff_max_ms=200)) as c:
        c.assign([tp])
        c.seek(tp, 0)  # a known position: no ListOffsets to find the leader on the way
        assert c.poll(timeout_ms=300) == {}
        target.create_topic(topic)
        target.produce_values(tp, 2)
        assert offsets(poll_n(c, 2)) == [0, 1]


def test_sync_poll_does_not_cross_threads_per_record(target: Target, topic: str) -> None:
    """Consumer.poll drains in the caller's thread: no loop call per poll, and one
    fetcher wake-up per used-up fetch, however many records and polls."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in range(0, 600, 200):
        target.produce_values(tp, 200, start=start)
    with Consumer(config(target, auto_offset_reset="earliest")) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 0
        loop = consumer._loop
        calls = {"call": 0, "wake": 0}
        real_call, real_wake = loop.call, loop.wake

        def counting_call(*args: Any, **kwargs: Any) -> Any:
            calls["call"] += 1
            return real_call(*args, **kwargs)

        def counting_wake(func: Callable[[], None]) -> None:
            calls["wake"] += 1
            real_wake(func)

        loop.call = counting_call  # type: ignore[method-assign]
        loop.wake = counting_wake  # type: ignore[method-assign]
        got = poll_n(consumer, 600, max_records=7)
        polls_needed = 600 // 7
        fetches = consumer.metrics().fetch_count
        assert calls["call"] == 0
    assert offsets(got) == list(range(600))
    assert calls["wake"] <= fetches < polls_needed


def test_sync_poll_is_told_of_a_fetch_before_the_next_fetch_is_sent(
    serve_broker: BrokerProcess, topic: str
) -> None:
    """Over TCP, the sync consumer's poll thread is woken for a fetched batch as soon as
    it is buffered, before the fetcher writes its next FetchRequest (the poll thread then
    parses while that write and the broker's answer go on), and the records come back
    exactly, one batch per fetch."""
    target = Target("serve", serve_broker.bootstrap)
    try:
        target.create_topic(topic)
        tp = TopicPartition(topic, 0)
        for start in range(0, 12, 3):
            target.produce_values(tp, 3, start=start)
        settings = config(target, auto_offset_reset="earliest", max_partition_fetch_bytes=1)
        with Consumer(settings) as consumer:
            buffer = consumer._core.buffer
            client = consumer._core.client
            wake_waiters = buffer.wake_waiters
            in_flight: list[int] = []

            def told() -> None:
                leader = client.metadata.snapshot.leader_for(topic, 0)
                connection = None if leader is None else client.open_connection(leader)
                in_flight.append(connection.in_flight if connection is not None else -1)
                wake_waiters()

            buffer.wake_waiters = told  # type: ignore[method-assign]
            consumer.assign([tp])
            got = poll_n(consumer, 12)
    finally:
        target.close()
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(12)
    ]
    # Told of the first batch while its answer was the connection's last request: the
    # next fetch (always planned after it) was not written yet.
    assert in_flight[0] == 0


def test_sync_poll_gets_a_small_fetch_before_the_next_fetch_is_sent(
    serve_broker: BrokerProcess, topic: str
) -> None:
    """Over TCP, a small answer that a sync poll thread waits for is handed to that thread
    before the next FetchRequest is written: the loop thread, the answer still the
    connection's last request, waits until the woken poll thread is back; the records
    come back exactly, one per fetch."""
    target = Target("serve", serve_broker.bootstrap)
    try:
        target.create_topic(topic)
        tp = TopicPartition(topic, 0)
        settings = config(target, auto_offset_reset="earliest", fetch_max_wait_ms=5_000)
        with Consumer(settings) as consumer:
            buffer = consumer._core.buffer
            client = consumer._core.client
            yield_to_woken = buffer.yield_to_woken
            yields: list[tuple[bool, int]] = []

            def watched(timeout_s: float) -> bool:
                leader = client.metadata.snapshot.leader_for(topic, 0)
                connection = None if leader is None else client.open_connection(leader)
                in_flight = connection.in_flight if connection is not None else -1
                waited = yield_to_woken(timeout_s)
                yields.append((waited, in_flight))
                return waited

            buffer.yield_to_woken = watched  # type: ignore[method-assign]
            consumer.assign([tp])
            assert consumer.position(tp) == 0
            got: list[ConsumerRecord] = []
            for i in range(6):
                # one record, produced once poll's thread waits for it
                producing = threading.Thread(
                    target=_produce_when_waiting, args=(buffer, target, tp, i)
                )
                producing.start()
                got += poll_n(consumer, 1)
                producing.join()
    finally:
        target.close()
    assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(6)]
    assert yields == [(True, 0)] * 6


def _produce_when_waiting(buffer: Any, target: Target, tp: TopicPartition, i: int) -> None:
    deadline = time.monotonic() + 30.0
    while buffer.sync_waiting == 0:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    target.produce_values(tp, 1, start=i)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio shuffles what is runnable
async def test_async_poll_gets_a_small_fetch_before_the_next_fetch_is_sent(
    serve_broker: BrokerProcess, topic: str
) -> None:
    """Over TCP, an async poll waiting for records gets a small fetched answer before the
    fetcher writes its next FetchRequest (that write would delay records already here), and
    the records come back exactly, one batch per fetch."""
    target = Target("serve", serve_broker.bootstrap)
    try:
        target.create_topic(topic)
        tp = TopicPartition(topic, 0)
        for start in range(0, 12, 3):
            target.produce_values(tp, 3, start=start)
        settings = config(target, auto_offset_reset="earliest", max_partition_fetch_bytes=1)
        got: list[ConsumerRecord] = []
        in_flight: list[int] = []
        async with AsyncConsumer(settings) as consumer:
            client = consumer._c.client
            consumer.assign([tp])
            with anyio.fail_after(30):
                while len(got) < 12:
                    # poll waits for each answer: it never finds one buffered
                    records = (await consumer.poll(timeout_ms=10_000)).get(tp, [])
                    leader = client.metadata.snapshot.leader_for(topic, 0)
                    connection = None if leader is None else client.open_connection(leader)
                    in_flight.append(connection.in_flight if connection is not None else -1)
                    got += records
    finally:
        target.close()
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(12)
    ]
    # Handed the first batch while its answer was the connection's last request: the next
    # fetch was not written yet.
    assert in_flight[0] == 0


def test_fetches_chained_from_one_node_need_no_round_each(
    serve_broker: BrokerProcess, topic: str
) -> None:
    """A quiet answer whose partitions are fetched again at once wakes no planning round:
    with retry.backoff.ms long, 12 long polls answered one record each take no round, and
    the records come back exactly."""
    target = Target("serve", serve_broker.bootstrap)
    try:
        target.create_topic(topic)
        tp = TopicPartition(topic, 0)
        settings = config(
            target,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=5_000,
            retry_backoff_ms=60_000,
            retry_backoff_max_ms=60_000,
        )
        with Consumer(settings) as consumer:
            fetcher = consumer._core.fetcher
            counts = {"rounds": 0, "fetches": 0}
            run_round, fetch_from = fetcher._round, fetcher._fetch_from

            async def counted_round(*args: Any) -> float:
                counts["rounds"] += 1
                return await run_round(*args)

            async def counted_fetch(*args: Any) -> bool:
                counts["fetches"] += 1
                return await fetch_from(*args)

            fetcher._round = counted_round  # type: ignore[method-assign]
            fetcher._fetch_from = counted_fetch  # type: ignore[method-assign]
            consumer.assign([tp])
            assert consumer.position(tp) == 0
            got = []
            for i in range(12):
                if i == 1:  # the first answer came: the long polls chain from now on
                    before = dict(counts)
                target.produce_values(tp, 1, start=i)
                got += poll_n(consumer, 1)
            after = dict(counts)
    finally:
        target.close()
    assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(12)]
    assert after["fetches"] - before["fetches"] >= 11
    assert after["rounds"] == before["rounds"], (before, after)
