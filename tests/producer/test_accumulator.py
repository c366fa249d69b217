"""The record accumulator and idempotence state, on an injected clock: no sockets, no sleeps."""

from __future__ import annotations

import gc
import threading
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
)
from kafkette.producer.accumulator import BufferFull, ProducerBatch, RecordAccumulator, record_size
from kafkette.producer.futures import RecordMetadata
from kafkette.producer.idempotence import IdempotenceState
from kafkette.protocol.errors import EncodeError
from kafkette.protocol.records import GZIP, NO_COMPRESSION, ZSTD, RecordBatch, speedups
from kafkette.protocol.records.batch_header import verify_crc


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(clock: FakeClock, **kwargs: object) -> RecordAccumulator:
    settings_: dict[str, object] = {"batch_size": 1000, "linger_ms": 5, "clock": clock}
    settings_.update(kwargs)
    return RecordAccumulator(**settings_)  # type: ignore[arg-type]


def records_of(
    batch: ProducerBatch,
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    parsed = RecordBatch.from_buffer(bytes(batch.build()))
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in parsed]


def test_linger_holds_a_batch_until_it_is_old_enough() -> None:
    """A lone record waits linger.ms; ready() says how long is left."""
    clock = FakeClock()
    acc = make(clock)
    acc.append("t", 0, 1, b"k", b"v")
    assert acc.ready(clock()) == ([], 5.0)
    clock.now += 4
    assert acc.ready(clock()) == ([], 1.0)
    clock.now += 1
    assert acc.ready(clock()) == ([("t", 0)], None)


def test_full_batch_is_ready_at_once_and_the_next_record_opens_a_new_one() -> None:
    """batch.size closes a batch: it is ready without waiting for linger."""
    clock = FakeClock()
    acc = make(clock, batch_size=200)
    futures = [acc.append("t", 0, 10 + i, None, bytes([i]) * 40) for i in range(5)]
    ready, _ = acc.ready(clock())
    assert ready == [("t", 0)]
    [first] = acc.drain(ready, 10_000)
    count = first.record_count
    assert count == 2  # 61 header bytes + 2 * 47: a third would pass 200
    assert len(first.build()) == 61 + 2 * 47
    assert records_of(first) == [(i, 10 + i, None, bytes([i]) * 40, ()) for i in range(count)]
    assert acc.queued() == 2
    acc.complete(first, 100)
    assert [f.result(0) for f in futures[:count]] == [
        RecordMetadata("t", 0, 100 + i, 10 + i) for i in range(count)
    ]
    assert not futures[count].done()


def test_batch_size_zero_sends_each_record_alone() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=0)
    for i in range(3):
        acc.append("t", 0, i, None, b"x")
    ready, _ = acc.ready(clock())
    assert ready == [("t", 0)]
    assert [b.record_count for b in acc.drain(ready, 10**6)] == [1]
    assert acc.queued() == 2


def test_wakeup_only_when_a_batch_opens_or_fills_and_once_until_the_sender_looks() -> None:
    """send does not cross threads per record: the sender is woken per batch, not per record."""
    clock = FakeClock()
    wakes: list[int] = []
    acc = make(clock, batch_size=10_000, wakeup=lambda: wakes.append(1))
    for _ in range(50):
        acc.append("t", 0, 1, None, b"v" * 10)
    assert len(wakes) == 1
    acc.append("t", 1, 1, None, b"v")  # a new batch, but the sender has not looked yet
    assert len(wakes) == 1
    acc.ready(clock())
    acc.append("t", 2, 1, None, b"v")
    assert len(wakes) == 2
    acc.ready(clock())
    for _ in range(600):  # fills the batch of t-0 (18 bytes a record), opens the next
        acc.append("t", 0, 1, None, b"v" * 10)
    assert len(wakes) == 3


def test_drain_takes_one_batch_per_partition_within_max_request_size() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=100)
    for p in range(3):
        acc.append("t", p, 1, None, b"x" * 50)
    clock.now += 5
    ready, _ = acc.ready(clock())
    assert sorted(ready) == [("t", 0), ("t", 1), ("t", 2)]
    one = acc.drain(sorted(ready), 150)  # each batch is 61 + 52 bytes: two do not fit
    assert [b.tp for b in one] == [("t", 0)]
    rest = acc.drain(sorted(ready), 10_000)
    assert [b.tp for b in rest] == [("t", 1), ("t", 2)]


def test_backpressure_blocks_then_raises_after_max_block_ms() -> None:
    """A full buffer.memory blocks the append for max.block.ms, then BufferExhaustedError."""
    clock = FakeClock()
    waits: list[float] = []

    def wait(cond: threading.Condition, timeout: float) -> None:
        waits.append(timeout)
        clock.now += timeout * 1000 / 2  # time passes, nobody frees memory

    acc = make(clock, buffer_memory=300, max_block_ms=2000, wait=wait)
    acc.append("t", 0, 1, None, b"x" * 150)
    assert acc.buffer_used == record_size(None, b"x" * 150, ())
    start = clock.now
    with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=2000"):
        acc.append("t", 0, 1, None, b"x" * 150)
    assert clock.now - start >= 2000
    assert waits[0] == 2.0
    assert isinstance(BufferExhaustedError("x"), KafkaTimeoutError)
    with pytest.raises(BufferFull):
        acc.append("t", 0, 1, None, b"x" * 150, block=False)


def test_backpressure_unblocks_when_a_batch_is_acknowledged() -> None:
    clock = FakeClock()
    acc: RecordAccumulator

    def wait(cond: threading.Condition, timeout: float) -> None:
        clock.now += 10
        cond.release()  # the sender completes a batch meanwhile
        try:
            [batch] = acc.drain([("t", 0)], 10_000)
            acc.complete(batch, 0)
        finally:
            cond.acquire()

    acc = make(clock, buffer_memory=300, max_block_ms=2000, wait=wait)
    first = acc.append("t", 0, 1, None, b"x" * 150)
    second = acc.append("t", 0, 2, None, b"y" * 150)
    assert first.result(0).offset == 0
    assert not second.done()
    assert acc.buffer_used == record_size(None, b"y" * 150, ())


def test_an_append_waiting_for_room_makes_the_lingering_batches_ready_and_wakes_once() -> None:
    """Java's rule: while appends wait for room in buffer.memory, a batch is sendable
    whatever its linger (nothing more can join it, and sent it frees room). The first
    append to wait wakes the sender; once it has room, linger counts again."""
    clock = FakeClock()
    woken: list[tuple[list[tuple[str, int]], float | None]] = []
    acc: RecordAccumulator

    def wait(cond: threading.Condition, timeout: float) -> None:
        assert woken == [([("t", 0)], None)]  # ready, with 60 s of linger left
        cond.release()  # the sender sends it meanwhile, and it is acknowledged
        try:
            [batch] = acc.drain([("t", 0)], 10_000)
            acc.complete(batch, 0)
        finally:
            cond.acquire()

    acc = make(clock, linger_ms=60_000, buffer_memory=300, max_block_ms=2000, wait=wait)
    acc.append("t", 0, 1, None, b"x" * 150)
    assert acc.ready(clock()) == ([], 60_000.0)
    acc.wakeup = lambda: woken.append(acc.ready(clock()))
    acc._wake_pending = True  # the sender was told of the open batch already
    second = acc.append("t", 0, 2, None, b"y" * 150)
    # then the wake of the batch the second record opened: with room, linger counts again
    assert woken == [([("t", 0)], None), ([], 60_000.0)]
    assert not acc.exhausted
    assert not second.done()


def test_a_thread_blocked_on_buffer_memory_is_woken_by_the_release() -> None:
    """A release notifies the appends waiting for room (it skips the notify only when
    none waits): the blocked thread goes on at once, not after max.block.ms."""
    clock = FakeClock()
    acc = make(clock, batch_size=200, buffer_memory=300, max_block_ms=60_000)
    first = acc.append("t", 0, 1, None, b"x" * 150)
    appended = threading.Event()

    def append() -> None:
        acc.append("t", 0, 2, None, b"y" * 150)
        appended.set()

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    while not acc._waiting:  # the append is waiting for room
        assert thread.is_alive()
        threading.Event().wait(0.001)
    assert not appended.is_set()
    [batch] = acc.drain([("t", 0)], 10_000)
    acc.complete(batch, 0)
    assert appended.wait(30)
    thread.join(30)
    assert first.result(0).offset == 0
    assert acc.buffer_used == record_size(None, b"y" * 150, ()) and acc._waiting == 0


def test_every_thread_blocked_on_buffer_memory_goes_on_after_one_release() -> None:
    """Several threads waiting for room share one condition, notified to all: one release
    that frees room for every one of them lets each append once (none sleeps out
    max.block.ms, as the async producer's waiters did when they shared one event)."""
    clock = FakeClock()
    acc = make(clock, batch_size=10_000, buffer_memory=400, max_block_ms=60_000)
    first = acc.append("t", 0, 1, None, b"x" * 300)
    values = [b"%d" % i * 80 for i in range(3)]  # 101 bytes each: three fit in 400
    appended: list[bytes] = []

    def append(value: bytes) -> None:
        acc.append("t", 0, 2, None, value)
        appended.append(value)

    threads = [threading.Thread(target=append, args=(v,), daemon=True) for v in values]
    for thread in threads:
        thread.start()
    while acc._waiting < len(threads):
        assert all(t.is_alive() for t in threads)
        threading.Event().wait(0.001)
    [batch] = acc.drain([("t", 0)], 10_000)
    acc.complete(batch, 0)
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    assert first.result(0).offset == 0
    assert sorted(appended) == values
    [batch] = acc.drain([("t", 0)], 10_000)
    assert sorted(r.value for r in RecordBatch.from_buffer(bytes(batch.build()))) == values
    assert acc.buffer_used == 3 * record_size(None, values[0], ()) and acc._waiting == 0


def test_record_larger_than_buffer_memory_is_refused() -> None:
    acc = make(FakeClock(), buffer_memory=100)
    with pytest.raises(MessageTooLargeError, match=r"buffer\.memory"):
        acc.append("t", 0, 1, None, b"x" * 100)


def test_delivery_timeout_expires_queued_batches() -> None:
    """A batch not sent within delivery.timeout.ms of its creation fails with KafkaTimeoutError."""
    clock = FakeClock()
    acc = make(clock, delivery_timeout_ms=1000)
    old = acc.append("t", 0, 1, None, b"a")
    clock.now += 600
    young = acc.append("t", 1, 1, None, b"b")
    assert acc.next_expiry_ms(clock()) == 400
    clock.now += 399
    assert acc.expire(clock()) == []
    clock.now += 1
    [expired] = acc.expire(clock())
    assert expired.tp == ("t", 0)
    assert isinstance(old.exception(0), KafkaTimeoutError)
    assert "delivery.timeout.ms=1000" in str(old.exception(0))
    with pytest.raises(KafkaTimeoutError):
        old.result(0)
    assert not young.done()
    assert acc.buffer_used == record_size(None, b"b", ())
    assert acc.incomplete == 1


def test_flush_makes_lingering_batches_ready() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=10_000)
    future = acc.append("t", 0, 1, None, b"a")
    assert acc.ready(clock())[0] == []
    results = acc.begin_flush()
    assert [r is future._batch for r in results] == [True]
    assert acc.ready(clock())[0] == [("t", 0)]
    acc.end_flush()
    assert acc.ready(clock())[0] == []


def test_retry_goes_back_in_sequence_order_and_waits_its_backoff() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=0)
    for i in range(3):
        acc.append("t", 0, 1, None, bytes([i]))
    clock.now += 5
    first = acc.drain([("t", 0)], 10**6)[0]
    second = acc.drain([("t", 0)], 10**6)[0]
    first.base_sequence, second.base_sequence = 0, 1
    acc.reenqueue(second, clock.now + 100)
    acc.reenqueue(first, clock.now + 50)
    assert acc.ready(clock()) == ([], 50.0)
    clock.now += 50
    assert acc.ready(clock()) == ([("t", 0)], None)
    assert acc.drain([("t", 0)], 10**6) == [first]
    assert acc.ready(clock()) == ([], 50.0)
    clock.now += 50
    assert acc.drain([("t", 0)], 10**6) == [second]


def test_next_ready_ms_times_the_heads_a_drain_left() -> None:
    """After a drain took a partition's first batch, the one behind it is ready at its own
    linger or backoff: next_ready_ms says when (what the sender arms its timer for)."""
    clock = FakeClock()
    acc = make(clock, batch_size=150)  # one record of 50 bytes a batch (61 + 52)
    assert acc.next_ready_ms([("t", 0)], clock()) is None  # nothing queued
    acc.append("t", 0, 1, None, b"x" * 50)
    clock.now += 2
    acc.append("t", 0, 1, None, b"x" * 50)  # does not fit: a second batch, opened now
    assert acc.next_ready_ms([("t", 0)], clock()) == 0.0  # two queued: the head is ready
    [first] = acc.drain([("t", 0)], 10**6)
    assert acc.next_ready_ms([("t", 0)], clock()) == 5.0  # the second's linger
    clock.now += 6
    assert acc.next_ready_ms([("t", 0)], clock()) == 0.0
    first.base_sequence = 0
    acc.reenqueue(first, clock.now + 30)  # a retry waits out its backoff
    assert acc.next_ready_ms([("t", 0)], clock()) == 30.0
    acc.append("t", 1, 1, None, b"x")
    assert acc.next_ready_ms([("t", 0), ("t", 1)], clock()) == 5.0


def test_log_append_time_and_delivery_callbacks() -> None:
    clock = FakeClock()
    acc = make(clock)
    seen: list[tuple[object, object]] = []
    futures = [
        acc.append("t", 3, 5, b"k", b"v", on_delivery=lambda e, m: seen.append((e, m)))
        for _ in range(2)
    ]
    done: list[object] = []
    futures[0].add_done_callback(done.append)
    [batch] = acc.drain([("t", 3)], 10**6)
    acc.complete(batch, 40, log_append_time=777)
    assert seen == [
        (None, RecordMetadata("t", 3, 40, 777)),
        (None, RecordMetadata("t", 3, 41, 777)),
    ]
    assert done == [futures[0]]
    late: list[object] = []
    futures[1].add_done_callback(late.append)
    assert late == [futures[1]]


def test_failed_batch_reports_the_error_to_every_record() -> None:
    acc = make(FakeClock())
    seen: list[tuple[object, object]] = []
    future = acc.append("t", 0, 5, None, b"v", on_delivery=lambda e, m: seen.append((e, m)))
    [batch] = acc.drain([("t", 0)], 10**6)
    error = MessageTooLargeError("t-0")
    acc.fail(batch, error)
    assert future.exception(0) is error
    assert seen == [(error, None)]
    assert acc.buffer_used == 0 and acc.incomplete == 0


def test_abort_fails_every_queued_batch() -> None:
    acc = make(FakeClock())
    futures = [acc.append("t", p, 1, None, b"v") for p in range(3)]
    error = KafkaTimeoutError("closed")
    assert len(acc.abort(error)) == 3
    assert [f.exception(0) for f in futures] == [error] * 3


records_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(records_strategy, st.sampled_from([NO_COMPRESSION, GZIP, ZSTD]), st.integers(0, 2000))
def test_batches_hold_exactly_the_appended_records(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    compression: int,
    batch_size: int,
) -> None:
    """Whatever the batch size and codec, the batches carry the records in order."""
    clock = FakeClock()
    acc = make(clock, batch_size=batch_size, compression=compression)
    for ts, key, value, headers in records:
        acc.append("t", 0, ts, key, value, headers)
    acc.begin_flush()
    got = []
    while True:
        ready, _ = acc.ready(clock())
        if not ready:
            break
        for batch in acc.drain(ready, 10**9):
            assert verify_crc(bytes(batch.build())).compression == compression
            got += [(ts, k, v, list(h)) for _, ts, k, v, h in records_of(batch)]
    assert got == [(ts, k, v, h) for ts, k, v, h in records]


def test_threads_appending_while_the_sender_drains() -> None:
    """Four threads append, one drains and completes: every record resolved once, in order."""
    acc = RecordAccumulator(batch_size=2000, linger_ms=0, buffer_memory=50_000)
    per_thread = 3000
    futures: dict[int, list[object]] = {}
    stop = threading.Event()
    stored: dict[tuple[str, int], list[bytes | None]] = defaultdict(list)

    def produce(n: int) -> None:
        futures[n] = [
            acc.append("t", i % 3, 1, None, f"{n}:{i}".encode()) for i in range(per_thread)
        ]

    def drain() -> None:
        while not stop.is_set() or acc.incomplete:
            ready, _ = acc.ready(acc.clock())
            for batch in acc.drain(ready, 10**6):
                values = [r[3] for r in records_of(batch)]
                acc.complete(batch, len(stored[batch.tp]))
                stored[batch.tp] += values

    sender = threading.Thread(target=drain)
    sender.start()
    threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sender.join(30)
    assert not sender.is_alive()
    assert acc.buffer_used == 0
    for n, futs in futures.items():
        for i, fut in enumerate(futs):
            md = fut.result(0)  # type: ignore[attr-defined]
            assert stored[("t", md.partition)][md.offset] == f"{n}:{i}".encode()
    assert sum(len(v) for v in stored.values()) == 4 * per_thread


def test_idempotence_sequences_per_partition_stamped_with_a_valid_crc() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=0)
    for p in (0, 0, 1):
        for _ in range(1):
            acc.append("t", p, 1, None, b"abc")
    acc.append("t", 0, 1, None, b"d")
    clock.now += 5
    state = IdempotenceState()
    state.reset(42, 3)
    a = acc.drain([("t", 0), ("t", 1)], 10**6)
    b = acc.drain([("t", 0)], 10**6)
    for batch in a + b:
        state.assign(batch)
    headers = [verify_crc(bytes(x.build())) for x in a + b]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (42, 3, 0),
        (42, 3, 0),
        (42, 3, 1),
    ]
    assert state.is_next_expected(a[0]) and not state.is_next_expected(b[0])
    state.acknowledged(a[0])
    assert state.is_next_expected(b[0])
    state.assign(b[0])  # a retry keeps its sequence
    assert verify_crc(bytes(b[0].build())).base_sequence == 1
    state.reset(42, 4)  # epoch bump: sequences start again
    state.assign(b[0])
    header = verify_crc(bytes(b[0].build()))
    assert (header.producer_epoch, header.base_sequence) == (4, 0)


def test_record_larger_than_max_request_size_is_refused() -> None:
    acc = make(FakeClock(), max_request_size=500)
    with pytest.raises(MessageTooLargeError, match=r"max\.request\.size \(500\)"):
        acc.append("t", 0, 1, None, b"x" * 420)
    acc.append("t", 0, 1, None, b"x" * 400)  # 400 + 21 + 61 fits


def test_closed_accumulator_refuses_records() -> None:
    acc = make(FakeClock())
    acc.close()
    with pytest.raises(IllegalStateError):
        acc.append("t", 0, 1, None, b"x")


def test_split_batch_reports_each_record_from_its_part() -> None:
    """A batch cut in two (then one half again): offsets and errors follow each record's part."""
    clock = FakeClock()
    acc = make(clock)
    seen: list[tuple[object, object]] = []
    futures = [
        acc.append("t", 0, 10 + i, None, b"%d" % i, on_delivery=lambda e, m: seen.append((e, m)))
        for i in range(5)
    ]
    [batch] = acc.drain([("t", 0)], 10**6)
    first, second = acc.split(batch)  # records 0-1 and 2-4
    assert [records_of(p) for p in (first, second)] == [
        [(0, 10, None, b"0", ()), (1, 11, None, b"1", ())],
        [(0, 12, None, b"2", ()), (1, 13, None, b"3", ()), (2, 14, None, b"4", ())],
    ]
    assert acc.drain([("t", 0)], 10**6) == [first]
    assert acc.drain([("t", 0)], 10**6) == [second]
    third, fourth = acc.split(second)  # records 2 and 3-4
    acc.drain([("t", 0)], 10**6)
    acc.drain([("t", 0)], 10**6)
    acc.complete(first, 100)
    acc.complete(fourth, 200)
    assert not futures[0].done()
    error = MessageTooLargeError("still too large")
    acc.fail(third, error)
    assert [f.done() for f in futures] == [True] * 5
    assert futures[2].exception(0) is error
    assert [f.result(0).offset for f in futures if f is not futures[2]] == [100, 101, 200, 201]
    assert len(seen) == 5 and seen[2] == (error, None)
    assert seen[4] == (None, RecordMetadata("t", 0, 201, 14))
    assert acc.buffer_used == 0 and acc.incomplete == 0


_plain_records = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**40),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_plain_records)
def test_append_plain_builds_the_batches_append_builds(
    records: list[tuple[int, bytes | None, bytes | None]],
) -> None:
    """The hot path and the general one cut the same batches, byte for byte."""
    general, plain = make(FakeClock()), make(FakeClock())
    for timestamp, key, value in records:
        expected = general.append("t", 0, timestamp, key, value)
        future = plain.append_plain("t", 0, timestamp, key, value)
        if speedups.encode_record is None:  # without the C encoder the general path does all
            assert future is None
            future = plain.append("t", 0, timestamp, key, value)
        assert future is not None
        assert (future._index, future._timestamp) == (expected._index, expected._timestamp)
    assert plain.buffer_used == general.buffer_used
    assert plain.ready(0)[0] == general.ready(0)[0]
    general_batches = general.drain([("t", 0)] * len(records), 1 << 30)
    plain_batches = plain.drain([("t", 0)] * len(records), 1 << 30)
    assert [bytes(b.build()) for b in plain_batches] == [bytes(b.build()) for b in general_batches]
    assert sum(b.record_count for b in plain_batches) == len(records)


def test_append_plain_leaves_to_append_what_it_does_not_take() -> None:
    """No room, a record over the limits, a closed producer, a value that is not
    bytes: append_plain takes nothing and says so; append then waits or raises."""
    clock = FakeClock()
    acc = make(clock, buffer_memory=200, max_request_size=250)
    acc.append("t", 0, 1, None, b"x" * 100)
    used = acc.buffer_used
    assert acc.append_plain("t", 0, 1, None, b"y" * 100) is None  # no room
    with pytest.raises(BufferFull):
        acc.append("t", 0, 1, None, b"y" * 100, block=False)
    assert acc.append_plain("t", 1, 1, None, b"z" * 140) is None  # over the limits
    with pytest.raises(MessageTooLargeError):
        acc.append("t", 1, 1, None, b"z" * 140)
    assert acc.append_plain("t", 2, 1, None, "text") is None  # type: ignore[arg-type]
    assert acc.queued() == 1  # no batch was left behind empty
    assert acc.buffer_used == used
    acc.close()
    assert acc.append_plain("t", 0, 1, None, b"v") is None
    with pytest.raises(IllegalStateError):
        acc.append("t", 0, 1, None, b"v")


def test_a_record_that_cannot_be_encoded_leaves_no_empty_batch() -> None:
    """The batch opened for it is taken back; the partition's earlier records are unharmed."""
    clock = FakeClock()
    acc = make(clock, batch_size=200)
    acc.append("t", 0, 1, None, b"a" * 150)
    with pytest.raises(EncodeError, match="must be bytes"):
        acc.append("t", 0, 1, None, b"b" * 150, [("h", "not bytes")])  # type: ignore[list-item]
    with pytest.raises(EncodeError):
        acc.append("t", 1, 1, None, b"v", [("h", "not bytes")])  # type: ignore[list-item]
    assert acc.queued() == 1
    assert acc.incomplete == 1
    (batch,) = acc.drain([("t", 0), ("t", 1)], 1 << 20)
    assert records_of(batch) == [(0, 1, None, b"a" * 150, ())]


def test_waiters_are_woken_once_an_eighth_of_the_buffer_is_free() -> None:
    """Not at every acknowledged batch while the buffer stays nearly full: a producer
    that outruns the broker then appends many batches per wake-up, not one."""
    clock = FakeClock()
    acc = make(clock, batch_size=500, buffer_memory=16_000)  # wakes at 2,000 bytes free
    woken: list[int] = []
    acc.on_space = lambda: woken.append(acc.buffer_used)
    for i in range(160):  # 100 bytes reserved each, 4 to a batch: 40 batches
        acc.append("t", 0, i, None, b"x" * 79)
    assert acc.buffer_used == 16_000
    batches = [b for _ in range(40) for b in acc.drain([("t", 0)], 1 << 30)]
    assert [b.reserved for b in batches] == [400] * 40
    for batch in batches:
        acc.complete(batch, 0)
    # the 5th release leaves 2,000 bytes free: from there on every release wakes
    assert woken == [16_000 - 400 * k for k in range(5, 41)]


@pytest.mark.parametrize("transactional", [False, True])
def test_a_batch_given_its_sequence_before_it_is_built_matches_one_stamped_after(
    transactional: bool,
) -> None:
    """drain(prepare=assign) writes the producer fields once; the bytes are those of
    a batch built first and stamped (CRC redone) afterwards."""
    batches: list[list[ProducerBatch]] = []
    for prepare_first in (True, False):
        clock = FakeClock()
        acc = make(clock)
        for value in (b"abc", b"de", b"f"):
            acc.append("t", 0, 7, b"k", value)
        clock.now += 5
        state = IdempotenceState(transactional=transactional)
        state.reset(42, 3)
        if prepare_first:
            drained = acc.drain([("t", 0)], 10**6, prepare=state.assign)
        else:
            drained = acc.drain([("t", 0)], 10**6)
            for batch in drained:
                state.assign(batch)
        batches.append(drained)
    (early,), (late,) = batches
    assert early.data == late.data
    header = verify_crc(bytes(early.build()))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 0)
    assert header.is_transactional is transactional
    assert [r.value for r in RecordBatch.from_buffer(bytes(early.build()))] == [b"abc", b"de", b"f"]


def test_a_batch_with_a_field_out_of_range_is_refused_with_an_encode_error() -> None:
    """What the C header writer declines goes to build_reserved, which names the problem."""
    clock = FakeClock()
    acc = make(clock)
    acc.append("t", 0, 7, None, b"v")
    with pytest.raises(EncodeError, match="out of range"):
        acc.drain([("t", 0)], 10**6, prepare=lambda b: setattr(b, "producer_epoch", 2**15))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 20),  # ms after the clock's start the batch was opened
            st.booleans(),  # full
            st.integers(1, 2),  # batches queued for the partition
            st.integers(0, 2),  # attempts
            st.integers(-10, 10),  # retry backoff end, ms from now (<= 0: none left)
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
    st.sampled_from([0, 5, 50]),
    st.booleans(),
)
def test_ready_next_ready_and_drain_apply_one_rule(
    heads: list[tuple[int, bool, int, int, int]],
    flushing: bool,
    linger_ms: int,
    pressing_only: bool,
) -> None:
    """ready_by_cause() has the readiness rule inlined (it scans every partition at every
    pass); next_ready_ms() and drain() call _head_wait_ms. Over any heads of queues, the
    three agree: the partitions ready now, the wait until the next, the batches a drain
    takes, and those it takes when only the batches ready whatever their linger may go."""
    clock = FakeClock()
    acc = make(clock, batch_size=100, linger_ms=linger_ms)
    start = clock.now
    now = start + 20
    for partition, (opened, full, queued, attempts, retry_in) in enumerate(heads):
        clock.now = start + opened
        for _ in range(queued):
            acc.append("t", partition, 1, None, b"v")
            acc._queues[("t", partition)][-1].full = True  # the next append opens another
        head = acc._queues[("t", partition)][0]
        head.full = full  # with a batch behind it, it is ready all the same
        head.attempts = attempts
        head.retry_at_ms = now + retry_in if retry_in > 0 else 0.0
    if flushing:
        acc.begin_flush()
    tps = [("t", p) for p in range(len(heads))]
    pressing, lingered, next_ms = acc.ready_by_cause(now)
    ready = sorted(pressing + lingered)
    assert acc.ready(now) == (pressing + lingered, next_ms)
    if ready:
        assert acc.next_ready_ms(tps, now) == 0.0
    else:
        assert acc.next_ready_ms(tps, now) == next_ms
    taken = acc.drain(tps, 1 << 30, now, pressing_only=pressing_only)
    assert [(b.topic, b.partition) for b in taken] == (pressing if pressing_only else ready)


def test_a_batch_in_flight_is_one_object_for_the_collector_and_keeps_no_bytes_once_settled() -> (
    None
):
    """The records' futures refer to their batch itself (its result): one object the
    garbage collector tracks per batch in flight, not a batch and a result; once settled
    the batch lets go of its bytes, so a future the application keeps holds the outcome
    only."""
    acc = make(FakeClock())
    futures = [acc.append("t", 0, 5, None, b"v%d" % i) for i in range(2)]
    plain = acc.append_plain("t", 0, 6, b"k", b"w") or acc.append("t", 0, 6, b"k", b"w")
    [batch] = acc.drain([("t", 0)], 10**6)
    assert all(f._batch is batch for f in [*futures, plain])
    tracked = [o for o in gc.get_referents(batch) if gc.is_tracked(o) and not isinstance(o, type)]
    assert tracked in ([], [("t", 0)])  # the partition's key, shared by its batches
    assert batch.data is not None
    acc.complete(batch, 70)
    assert batch.data is None and batch.buffer is None
    assert [f.result(0).offset for f in [*futures, plain]] == [70, 71, 72]
    assert plain.result(0) == RecordMetadata("t", 0, 72, 6)


def test_complete_all_settles_each_batch_as_complete_does() -> None:
    """An answer's batches settled together: offsets, append times, callbacks, a split
    batch's parts and its parent, the buffer given back once, a batch failed before left
    as it is."""
    acc = make(FakeClock())
    spaces: list[int] = []
    acc.on_space = lambda: spaces.append(acc.buffer_used)
    seen: list[tuple[object, object]] = []
    callback = acc.append("t", 0, 5, None, b"a", on_delivery=lambda e, m: seen.append((e, m)))
    plain = acc.append("t", 1, 6, None, b"b")
    waited = acc.append("t", 1, 7, None, b"c")
    halves = [acc.append("t", 2, 8 + i, None, b"d%d" % i) for i in range(2)]
    failed = acc.append("t", 3, 9, None, b"e")
    first, second, third, fourth = acc.drain([("t", p) for p in range(4)], 10**6)
    left, right = acc.split(third)
    assert acc.drain([("t", 2)], 10**6) == [left]
    assert acc.drain([("t", 2)], 10**6) == [right]
    error = MessageTooLargeError("t-3")
    acc.fail(fourth, error)
    acc.complete(left, 30)
    assert not halves[1].done() and not third.done
    event_done: list[bool] = []
    thread = threading.Thread(target=lambda: event_done.append(waited.result(5) is not None))
    thread.start()
    while second._event is None:
        thread.join(0.001)
    acc.complete_all([(first, 10, -1), (second, 20, 999), (right, 40, -1), (fourth, 50, -1)])
    thread.join(5)
    assert event_done == [True]
    assert seen == [(None, RecordMetadata("t", 0, 10, 5))]
    assert [f.result(0) for f in (callback, plain, waited)] == [
        RecordMetadata("t", 0, 10, 5),
        RecordMetadata("t", 1, 20, 999),
        RecordMetadata("t", 1, 21, 999),
    ]
    assert [f.result(0).offset for f in halves] == [30, 40]
    assert third.done and halves[1].done()
    assert failed.exception(0) is error and fourth.base_offset == -1
    assert all(b.data is None for b in (first, second, right))
    assert acc.buffer_used == 0 and acc.incomplete == 0
    assert spaces[-1] == 0 and len(spaces) == 3  # fail, complete, complete_all: once
