"""The C append of the producer (kafkette.producer._accumulate) against pure Python.

``append_open`` adds a record to its partition's open batch, or changes
nothing and returns None for ``RecordAccumulator.append_plain`` to take it.
Fed the same records, an accumulator driven through it (with the Python
method behind) and one driven through the Python method alone must cut the
same batches and futures, account the same bytes and wake the sender at the
same moments.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.client.config import ProducerConfig
from kafkette.client.metadata import ClusterMetadata
from kafkette.producer import _accumulate, accumulator, append_state
from kafkette.producer import core as core_module
from kafkette.producer import speedups as producer_speedups
from kafkette.producer.accumulator import RecordAccumulator, append_open
from kafkette.producer.core import ProducerCore
from kafkette.producer.futures import BatchResult, RecordFuture
from kafkette.producer.partitioner import StickyPartitioner, keyed_partition
from kafkette.protocol.records import Record as Record_
from kafkette.protocol.records import RecordBatch, speedups
from kafkette.protocol.records.batch_header import TRANSACTIONAL_MASK
from kafkette.protocol.records.default_records import RESERVED_HEADER, build_reserved

Record = tuple[int, int, bytes | None, bytes | None]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(**kwargs: object) -> tuple[RecordAccumulator, list[int]]:
    """An accumulator on a fake clock, and the list its wakeups are counted in."""
    woken: list[int] = []
    settings_: dict[str, object] = {"batch_size": 400, "linger_ms": 5, "clock": FakeClock()}
    settings_.update(kwargs)
    acc = RecordAccumulator(**settings_)  # type: ignore[arg-type]
    acc.wakeup = lambda: woken.append(1)
    return acc, woken


def c_append(
    acc: RecordAccumulator, topic: str, partition: int, ts: Any, key: object, value: object
) -> RecordFuture | None:
    """The C append (``AccumulatorState.append_open``)."""
    assert append_open is not None
    return append_open(acc, topic, partition, ts, key, value)


def c_then_python(
    acc: RecordAccumulator, topic: str, partition: int, ts: int, key: object, value: object
) -> tuple[RecordFuture | None, bool]:
    """The core's order: the C append first, the Python method when it declines."""
    future = c_append(acc, topic, partition, ts, key, value)
    if future is not None:
        return future, True
    return acc.append_plain(topic, partition, ts, key, value), False  # type: ignore[arg-type]


def test_the_extension_is_in_use() -> None:
    """Built in CI (scripts/setup.sh), selected, and the base of the accumulator's classes."""
    assert speedups.encode_record is not None
    assert append_open is _accumulate.AccumulatorState.append_open
    assert producer_speedups.append_open is append_open
    assert accumulator.RecordAccumulator.__bases__ == (_accumulate.AccumulatorState,)
    assert accumulator.ProducerBatch.__bases__ == (_accumulate.BatchState, BatchResult)


_records = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2),  # partition
        st.integers(min_value=0, max_value=2**40),  # timestamp
        st.one_of(st.none(), st.binary(max_size=30)),
        st.one_of(st.none(), st.binary(max_size=200)),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=80, deadline=None)
@given(_records, st.integers(min_value=300, max_value=5_000), st.data())
def test_c_and_python_cut_the_same_batches(
    records: list[Record], buffer_memory: int, data: st.DataObject
) -> None:
    c_acc, c_woken = make(buffer_memory=buffer_memory)
    py_acc, py_woken = make(buffer_memory=buffer_memory)
    taken_by_c = 0
    for partition, ts, key, value in records:
        c_future, by_c = c_then_python(c_acc, "t", partition, ts, key, value)
        taken_by_c += by_c
        py_future = py_acc.append_plain("t", partition, ts, key, value)
        assert (c_future is None) == (py_future is None)
        if c_future is not None and py_future is not None:
            assert c_future._index == py_future._index
            assert c_future._timestamp == py_future._timestamp
            assert c_future._batch.partition == partition
        assert c_acc.buffer_used == py_acc.buffer_used
        assert len(c_woken) == len(py_woken)
        if data.draw(st.booleans(), label="sender looks"):
            assert c_acc.ready(0) == py_acc.ready(0)
    for partition in range(3):
        tp = [("t", partition)] * len(records)
        c_batches = c_acc.drain(tp, 1 << 30)
        py_batches = py_acc.drain(tp, 1 << 30)
        assert [(b.full, b.reserved, b.size) for b in c_batches] == [
            (b.full, b.reserved, b.size) for b in py_batches
        ]
        assert [bytes(b.build()) for b in c_batches] == [bytes(b.build()) for b in py_batches]
    if len(records) > 3 * 2:
        assert taken_by_c > 0  # the C path was exercised, not only the fallback


def test_declines_and_changes_nothing_when_python_must_decide() -> None:
    acc, woken = make(batch_size=200, buffer_memory=1_000)
    assert c_append(acc, "t", 0, 1, None, b"v") is None  # no queue yet
    first = acc.append_plain("t", 0, 1, None, b"x" * 100)
    assert first is not None
    batch = acc._queues[("t", 0)][-1]
    state = (
        bytes(batch.buffer or b""),
        batch.count,
        batch.size,
        batch.reserved,
        acc.buffer_used,
        len(woken),
    )
    declined: list[tuple[Any, object, object]] = [
        (2, "text", b"v"),  # a key that is not bytes
        (2, None, bytearray(b"v")),  # nor a value
        (2.5, None, b"v"),  # a timestamp that is not an int
        (2**70, None, b"v"),  # past 64 bits
        (-(2**63), None, b"v"),  # its delta from the batch's first (1) past 64 bits
    ]
    for ts, key, value in declined:
        assert c_append(acc, "t", 0, ts, key, value) is None
        assert (
            bytes(batch.buffer or b""),
            batch.count,
            batch.size,
            batch.reserved,
            acc.buffer_used,
            len(woken),
        ) == state
    acc.buffer_memory = acc.buffer_used + 21  # room for 0 more bytes of key and value
    assert c_append(acc, "t", 0, 2, None, b"v") is None
    acc.buffer_memory = 1_000
    acc.batch_size = 50  # an empty batch takes any record, which Python decides
    empty = acc.append_plain("t", 1, 1, None, b"x" * 100)
    assert empty is not None and empty._batch.full
    acc._queues[("t", 1)][-1].full = False
    empty._batch.count, empty._batch.size = 0, 61
    assert c_append(acc, "t", 1, 2, None, b"y" * 100) is None
    acc.batch_size = 200
    acc._max_record = 61 + 21  # a record larger than max.request.size or buffer.memory
    batch.full = True
    assert c_append(acc, "t", 0, 2, None, b"v") is None
    batch.full = False
    acc._max_record = 1_000
    acc.close()
    assert c_append(acc, "t", 0, 2, None, b"v") is None
    assert (bytes(batch.buffer or b""), batch.count) == state[:2]


def test_adds_to_the_open_batch_and_opens_the_next_one() -> None:
    acc, woken = make(batch_size=240)
    opened = acc.append_plain("t", 0, 5, b"k", b"a" * 50)  # opens: wakes
    assert opened is not None and len(woken) == 1
    acc.ready(0)  # the sender looked
    second = c_append(acc, "t", 0, 7, None, b"b" * 50)
    third = c_append(acc, "t", 0, 6, None, b"c" * 40)
    assert isinstance(second, RecordFuture) and isinstance(third, RecordFuture)
    assert [(f._index, f._timestamp) for f in (second, third)] == [(1, 7), (2, 6)]
    assert second._batch is opened._batch is third._batch
    batch = acc._queues[("t", 0)][-1]
    assert (batch.full, batch.max_timestamp, batch.base_timestamp) == (False, 7, 5)
    assert batch.size == 61 + 58 + 57 + 47  # the records as encoded
    assert acc.buffer_used == batch.reserved == 3 * 21 + 1 + 140
    assert len(woken) == 1  # adding to an open batch does not wake the sender
    acc.clock.now = 1003.0  # type: ignore[attr-defined]
    fourth = c_append(acc, "t", 0, 8, None, b"d")  # 223 + 22 > 240: the next batch
    assert fourth is not None and batch.full and len(woken) == 2
    nxt = fourth._batch
    assert acc._queues[("t", 0)] == deque([batch, nxt]) and acc.incomplete == 2
    assert (nxt.tp, nxt.topic, nxt.partition) == (("t", 0), "t", 0) and nxt.tp is batch.tp
    assert (nxt.created_ms, nxt.base_timestamp, nxt.count, nxt.full) == (1003.0, 8, 1, False)
    assert not gc.is_tracked(nxt) and type(nxt) is type(batch)
    assert acc.buffer_used == 3 * 21 + 1 + 140 + 22
    parsed = [(r.offset, r.timestamp, r.key, r.value) for r in _records_of(batch)]
    assert parsed == [(0, 5, b"k", b"a" * 50), (1, 7, None, b"b" * 50), (2, 6, None, b"c" * 40)]
    acc.complete(batch, 40)
    assert [f.result(0).offset for f in (opened, second, third)] == [40, 41, 42]
    assert [r.value for r in _records_of(nxt)] == [b"d"]
    # an empty queue (its batches drained): the next batch shares the partition's key
    acc.ready(0)
    acc._queues[("t", 0)].clear()
    fifth = c_append(acc, "t", 0, 9, None, b"e")
    assert fifth is not None and fifth._batch.tp is batch.tp and len(woken) == 3


def test_a_batch_opened_in_c_wakes_the_sender_as_python_would() -> None:
    """A linger alarm (wake_at) that will have the sender look spares the wake-up, one
    that cannot does not; a flush, or a batch behind a full one, wakes at once."""
    told: list[float] = []
    answers = [True, False]

    def wake_at(at: float) -> bool:
        told.append(at)
        return answers.pop(0)

    acc, woken = make(batch_size=100)
    acc.append_plain("t", 0, 1, None, b"a")  # the partition's queue, then drained
    acc.wake_at = wake_at
    acc.ready(0)
    acc.drain([("t", 0)], 1 << 20)
    woken.clear()
    assert c_append(acc, "t", 0, 2, None, b"b") is not None
    assert (told, woken) == ([1005.0], [])  # told the linger's end instead of waking
    acc.drain([("t", 0)], 1 << 20)
    assert c_append(acc, "t", 0, 3, None, b"c") is not None
    assert (told, woken) == ([1005.0, 1005.0], [1])  # the alarm could not: woken now
    acc.ready(0)
    assert c_append(acc, "t", 0, 4, None, b"x" * 60) is not None  # fills: the next opens
    assert len(told) == 2 and woken == [1, 1]  # behind a full batch: woken, not told
    acc.ready(0)
    acc.drain([("t", 0)], 1 << 20)
    acc.drain([("t", 0)], 1 << 20)
    acc.begin_flush()
    acc.ready(0)
    acc.drain([("t", 0)], 1 << 20)
    assert c_append(acc, "t", 0, 5, None, b"d") is not None
    assert len(told) == 2 and woken == [1, 1, 1, 1]  # a flush: woken at once


def test_each_partition_gets_its_records_whichever_was_appended_to_last() -> None:
    """The C append remembers the last partition's queue: records alternating between
    partitions, and a new ``_queues``, still land in their own partition's batch."""
    acc, _ = make(batch_size=16_384)
    for partition in (0, 1):
        assert acc.append_plain("t", partition, 1, None, b"first") is not None
    for i in range(6):
        assert c_append(acc, "t", i % 2, 2, None, b"%d" % i) is not None
    assert [[r.value for r in _records_of(acc._queues[("t", p)][-1])] for p in (0, 1)] == [
        [b"first", b"0", b"2", b"4"],
        [b"first", b"1", b"3", b"5"],
    ]
    acc._queues = {}
    assert c_append(acc, "t", 1, 2, None, b"v") is None  # no queue in the new dict
    assert acc.append_plain("t", 1, 1, None, b"new") is not None
    assert c_append(acc, "t", 1, 2, None, b"again") is not None
    assert [r.value for r in _records_of(acc._queues[("t", 1)][-1])] == [b"new", b"again"]


@pytest.mark.parametrize("remembered", [False, True])
def test_the_lock_is_taken(remembered: bool) -> None:
    """Another thread holding the accumulator's lock keeps the C append waiting, whether
    or not the partition is the one the C append remembers (whose append may do without
    the lock while it is free)."""
    acc, _ = make()
    assert acc.append_plain("t", 0, 1, None, b"a") is not None
    if remembered:
        assert c_append(acc, "t", 0, 1, None, b"a2") is not None
    done = threading.Event()
    acc._lock.acquire()

    def append() -> None:
        c_append(acc, "t", 0, 1, None, b"b")
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    assert not done.wait(0.05)
    acc._lock.release()
    assert done.wait(10)
    thread.join()
    assert acc._queues[("t", 0)][-1].count == 2 + remembered


class CountingLock:
    """A lock that counts its acquisitions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acquired = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.acquired += 1
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()


def test_a_free_lock_is_not_taken_for_a_remembered_partition() -> None:
    """With the lock free, the C append to a partition whose queue it remembers (the
    topic it appended to last) holds the GIL throughout instead of taking the lock (an
    acquire and a release a record); to another topic's, or to a partition not seen yet,
    it takes the lock. The records land as with the lock."""
    acc, _ = make(batch_size=16_384)
    for topic, partition in (("t", 0), ("t", 1), ("u", 0)):
        assert acc.append_plain(topic, partition, 1, None, b"first") is not None
    lock = CountingLock()
    acc._lock = lock  # type: ignore[assignment]
    assert c_append(acc, "t", 0, 2, None, b"0") is not None  # not remembered yet: locked
    assert lock.acquired == 1
    for i in range(5):
        assert c_append(acc, "t", 0, 2, None, b"%d" % (i + 1)) is not None
    assert lock.acquired == 1
    assert c_append(acc, "t", 1, 2, None, b"x") is not None  # not seen yet: locked
    assert lock.acquired == 2
    assert c_append(acc, "t", 1, 2, None, b"y") is not None  # now remembered
    assert c_append(acc, "t", 0, 2, None, b"6") is not None  # both are
    assert lock.acquired == 2
    assert c_append(acc, "u", 0, 2, None, b"z") is not None  # another topic: locked
    assert lock.acquired == 3
    assert c_append(acc, "t", 0, 2, None, b"7") is not None  # its topic's left: locked
    assert lock.acquired == 4
    expected = [b"first", *(b"%d" % i for i in range(8))]
    assert [r.value for r in _records_of(acc._queues[("t", 0)][-1])] == expected
    assert [r.value for r in _records_of(acc._queues[("t", 1)][-1])] == [b"first", b"x", b"y"]
    assert [r.value for r in _records_of(acc._queues[("u", 0)][-1])] == [b"first", b"z"]


def _records_of(batch: accumulator.ProducerBatch) -> list[Record_]:
    return list(RecordBatch.from_buffer(bytes(batch.build())))


# ---- send_plain: RouteState.send in C (core.routes.send)


def make_core(*, python: bool = False, **kwargs: Any) -> ProducerCore:
    """A producer core that never connects, with cached partition counts
    (t1: 1 partition, t3: 3) and a seeded sticky partitioner; with ``python``,
    its routes are the pure-Python twin (append_state.RouteState)."""
    config = ProducerConfig.from_user(bootstrap_servers="127.0.0.1:9", batch_size=300, **kwargs)
    core = ProducerCore(config, clock=FakeClock())
    routes = core.routes
    assert type(routes) is _accumulate.RouteState
    if python:
        core.routes = append_state.RouteState(
            routes.metadata,
            routes.accumulator,
            routes.sticky,
            routes.keyed_partition,
            routes.plain,
            routes.ignore_keys,
        )
    core.routes.snapshot = core.client.metadata.snapshot
    core.routes.counts = {"t1": 1, "t3": 3}
    core.routes.sticky = StickyPartitioner(config.batch_size, random.Random(7))
    return core


def python_send_plain(
    core: ProducerCore, topic: str, value: object, key: object, timestamp: int | None
) -> RecordFuture | None:
    """The pure-Python send: append_state.RouteState.send over the same fields (the
    core's accumulator is the same class; its Python append_plain takes the record)."""
    r = core.routes
    twin = append_state.RouteState(
        r.metadata, r.accumulator, r.sticky, r.keyed_partition, r.plain, r.ignore_keys
    )
    twin.snapshot, twin.counts = r.snapshot, r.counts
    return twin.send(topic, value, key, timestamp)


_sends = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t3", "t9"]),  # t9: partition count not cached
        st.one_of(st.none(), st.binary(max_size=20), st.just("text")),
        st.one_of(st.none(), st.binary(max_size=150), st.just(bytearray(b"ba"))),
        st.one_of(st.integers(min_value=0, max_value=2**45), st.just(-1), st.just(2**70)),
        # an explicit partition: None (the producer chooses), one the topic may have,
        # or what the general path must refuse
        st.one_of(st.none(), st.integers(min_value=-1, max_value=3), st.just(True), st.just(1.0)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_sends, st.booleans())
def test_send_plain_matches_the_python_method(
    sends: list[tuple[str, object, object, int, object]], ignore_keys: bool
) -> None:
    c_core = make_core(partitioner_ignore_keys=ignore_keys)
    py_core = make_core(python=True, partitioner_ignore_keys=ignore_keys)
    for topic, key, value, timestamp, partition in sends:
        c_future = c_core.routes.send(topic, value, key, timestamp, partition)
        py_future = py_core.routes.send(topic, value, key, timestamp, partition)
        assert (c_future is None) == (py_future is None), (topic, key, value, timestamp)
        if c_future is not None and py_future is not None:
            assert c_future._index == py_future._index
            assert c_future._timestamp == py_future._timestamp == timestamp
            assert c_future._batch.partition == py_future._batch.partition
            if partition is not None:
                assert type(partition) is int and c_future._batch.partition == partition
            elif isinstance(key, bytes) and not ignore_keys and topic == "t3":
                assert c_future._batch.partition == keyed_partition(key, 3)
    assert c_core.accumulator.buffer_used == py_core.accumulator.buffer_used
    for topic, count in (("t1", 1), ("t3", 3)):
        for partition in range(count):
            tps = [(topic, partition)] * len(sends)
            c_batches = c_core.accumulator.drain(tps, 1 << 30)
            py_batches = py_core.accumulator.drain(tps, 1 << 30)
            assert [bytes(b.build()) for b in c_batches] == [bytes(b.build()) for b in py_batches]


def test_send_plain_declines_what_the_general_path_must_take() -> None:
    core = make_core()
    assert _accumulate.send_plain(core, "t1", b"v", None, 5) is not None
    assert _accumulate.send_plain(core, "t9", b"v", None, 5) is None  # count not cached
    core.client.metadata.request_update()
    core.client.metadata.snapshot = ClusterMetadata()  # a new snapshot: route() recounts
    assert _accumulate.send_plain(core, "t1", b"v", None, 5) is None
    serialized = make_core(value_serializer=bytes)
    assert _accumulate.send_plain(serialized, "t1", b"v", None, 5) is None
    assert serialized.accumulator.buffer_used == 0


@pytest.mark.parametrize("python", [False, True])
def test_send_takes_a_partition_the_topic_has(python: bool) -> None:
    """An explicit partition in range is the record's; anything else is declined (the
    general path raises, or waits for a partition the metadata does not have yet)."""
    core = make_core(python=python)
    future = core.routes.send("t3", b"v", b"k", 5, 2)
    assert future is not None and future._batch.partition == 2
    used = core.accumulator.buffer_used
    for refused in (3, -1, True, 2.0, 1 << 70):
        assert core.routes.send("t3", b"v", None, 5, refused) is None, refused
    assert core.routes.send("t9", b"v", None, 5, 0) is None  # count not cached
    assert core.accumulator.buffer_used == used


def test_send_registers_a_delivery_callback_in_an_open_batch() -> None:
    """With a callback the C send appends only to an open batch, and registers the
    callback on its result before anything can complete it; a batch to open is the
    general path's (None, nothing changed), as is every such send in Python."""

    def on_delivery(error: BaseException | None, metadata: object) -> None:
        raise AssertionError("not delivered in this test")

    core = make_core()
    assert core.routes.send("t3", b"v", None, 5, 1, on_delivery) is None  # no open batch
    assert core.accumulator.buffer_used == 0
    opened = core.routes.send("t3", b"a", None, 5, 1)
    assert opened is not None and opened._batch._callbacks is None
    used = core.accumulator.buffer_used
    future = core.routes.send("t3", b"b", None, 6, 1, on_delivery)
    assert future is not None and future._batch is opened._batch and future._index == 1
    assert future._batch._callbacks == [(future, on_delivery, True)]
    assert core.accumulator.buffer_used > used
    python = make_core(python=True)
    assert python.routes.send("t3", b"a", None, 5, 1) is not None
    assert python.routes.send("t3", b"b", None, 6, 1, on_delivery) is None


def test_send_plain_stamps_records_with_the_wall_clock() -> None:
    core = make_core()
    before = int(time.time() * 1000)
    future = _accumulate.send_plain(core, "t1", b"v", None, None)
    after = int(time.time() * 1000)
    assert future is not None and before <= future._timestamp <= after
    (batch,) = core.accumulator.drain([("t1", 0)], 1 << 30)
    assert [r.timestamp for r in RecordBatch.from_buffer(bytes(batch.build()))] == [
        future._timestamp
    ]


def test_the_producers_send_through_send_plain() -> None:
    assert core_module.send_plain is _accumulate.send_plain


@pytest.mark.parametrize("timestamp", [-1, 1 << 63, 1 << 70, 1.5])
def test_a_timestamp_outside_64_bits_is_refused_by_every_path(timestamp: Any) -> None:
    """Not taken by the plain paths; the general one raises (the batch could not be built)."""
    core = make_core()
    assert _accumulate.send_plain(core, "t1", b"v", None, timestamp) is None
    assert python_send_plain(core, "t1", b"v", None, timestamp) is None
    with pytest.raises(ValueError, match="milliseconds since the epoch"):
        core.route("t1", b"v", None, None, None, timestamp)
    assert core.accumulator.buffer_used == 0


def test_the_largest_timestamp_is_taken() -> None:
    core = make_core()
    future = _accumulate.send_plain(core, "t1", b"v", None, (1 << 63) - 1)
    assert future is not None
    (batch,) = core.accumulator.drain([("t1", 0)], 1 << 30)
    assert [r.timestamp for r in RecordBatch.from_buffer(bytes(batch.build()))] == [(1 << 63) - 1]


# ---- write_header: a drained batch's header and CRC in C


@pytest.mark.parametrize(
    ("count", "timestamps", "ids", "transactional"),
    [
        (1, (0, 0), (-1, -1, -1), False),
        (130, (1_700_000_000_000, 1_700_000_000_007), (4242, 3, 17), True),
        (2**31 - 1, (-(2**63), 2**63 - 1), (2**63 - 1, 2**15 - 1, 2**31 - 1), False),
        (2, (5, 4), (0, -(2**15), -(2**31)), True),
    ],
)
def test_the_c_header_writer_writes_the_bytes_build_reserved_writes(
    count: int, timestamps: tuple[int, int], ids: tuple[int, int, int], transactional: bool
) -> None:
    records = bytes(range(256)) * 3
    expected = build_reserved(
        bytearray(RESERVED_HEADER) + records,
        count,
        *timestamps,
        producer_id=ids[0],
        producer_epoch=ids[1],
        base_sequence=ids[2],
        is_transactional=transactional,
    )
    buffer = bytearray(RESERVED_HEADER) + records
    attributes = TRANSACTIONAL_MASK if transactional else 0
    assert _accumulate.write_header(buffer, count, *timestamps, attributes, *ids) is True
    assert buffer == expected


@pytest.mark.parametrize(
    "fields",
    [
        (0, 0, 0, 0, -1, -1, -1),  # no record: for build_reserved to write
        (2**31, 0, 0, 0, -1, -1, -1),
        (1, 2**63, 0, 0, -1, -1, -1),
        (1, 0, 0, 0, 2**63, -1, -1),
        (1, 0, 0, 0, -1, 2**15, -1),
        (1, 0, 0, 0, -1, -1, 2**31),
        (1, 0, 0, 2**15, -1, -1, -1),
    ],
)
def test_the_c_header_writer_leaves_a_field_out_of_range_to_build_reserved(
    fields: tuple[int, int, int, int, int, int, int],
) -> None:
    buffer = bytearray(RESERVED_HEADER) + b"records"
    assert _accumulate.write_header(buffer, *fields) is False
    assert buffer == bytearray(RESERVED_HEADER) + b"records"
    assert _accumulate.write_header(bytearray(RESERVED_HEADER - 1), 1, 0, 0, 0, -1, -1, -1) is False


# ---- keyed_partition: Kafka's murmur2 in C


@given(st.binary(max_size=64), st.integers(1, 100_000))
def test_keyed_partition_in_c_is_pythons(key: bytes, count: int) -> None:
    """The C keyed_partition picks the partition the Python one does, for bytes and for any
    buffer (a bytearray or memoryview key)."""
    expected = keyed_partition(key, count)
    assert _accumulate.keyed_partition(key, count) == expected
    assert _accumulate.keyed_partition(bytearray(key), count) == expected
    assert _accumulate.keyed_partition(memoryview(key), count) == expected


def test_keyed_partition_in_c_known_values_and_refusals() -> None:
    """Kafka's Utils.murmur2 test vectors, masked to 31 bits (a count of 2**31 leaves the
    hash whole), and the errors of a key that is no buffer or a count under one."""
    whole = 1 << 31
    assert _accumulate.keyed_partition(b"", whole) == 275646681
    assert _accumulate.keyed_partition(b"21", whole) == (-973932308) & 0x7FFFFFFF
    assert _accumulate.keyed_partition(b"foobar", whole) == (-790332482) & 0x7FFFFFFF
    long_key = b"a-little-bit-long-string"
    assert _accumulate.keyed_partition(long_key, whole) == (-985981536) & 0x7FFFFFFF
    assert producer_speedups.keyed_partition is _accumulate.keyed_partition
    with pytest.raises(ValueError, match="at least one partition"):
        _accumulate.keyed_partition(b"k", 0)
    with pytest.raises(TypeError):
        _accumulate.keyed_partition("k", 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("transactional", [False, True])
def test_build_plain_writes_what_build_writes(transactional: bool) -> None:
    """The C build of a batch without compression (drain's) writes the bytes
    ProducerBatch.build writes, sequence and transactional flag included; a compressed
    batch, or one built already, it leaves to build."""
    batches = []
    for _ in range(2):
        acc, _ = make()
        for i in range(3):
            acc.append("t", 0, 10 + i, b"k%d" % i, b"v" * i)
        [batch] = acc._queues[("t", 0)]
        batch.producer_id, batch.producer_epoch, batch.base_sequence = 42, 3, 7
        batch.transactional = transactional
        batches.append(batch)
    by_c, by_python = batches
    assert _accumulate.build_plain(by_c) is True
    assert by_c.buffer is None and by_c.data is not None
    assert bytes(by_c.data) == bytes(by_python.build())
    assert _accumulate.build_plain(by_c) is False  # built already
    compressed, _ = make(compression=1)
    compressed.append("t", 0, 1, None, b"v")
    assert _accumulate.build_plain(compressed._queues[("t", 0)][0]) is False
