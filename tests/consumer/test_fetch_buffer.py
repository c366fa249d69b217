"""Draining fetched bytes: position skips, partial batches, corruption, read_committed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.consumer.fetch_buffer import CompletedFetch, FetchBuffer, end_offset
from kafkette.consumer.record import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    ConsumerRecord,
)
from kafkette.consumer.subscription import PartitionState
from kafkette.errors import CorruptMessageError
from kafkette.protocol.records import (
    GZIP,
    ControlRecordType,
    LegacyBatchBuilder,
    RecordBatchBuilder,
    _speedups,
    build_control_batch,
    speedups,
)
from kafkette.structs import TopicPartition

TP = TopicPartition("t", 0)
T = TypeVar("T")


def batch(
    base: int,
    count: int,
    *,
    producer_id: int = -1,
    transactional: bool = False,
    compression: int = 0,
    log_append_time: bool = False,
    epoch: int = 3,
) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
        compression=compression,
        log_append_time=log_append_time,
        partition_leader_epoch=epoch,
    )
    for i in range(count):
        builder.append(100 + base + i, None, b"v%d" % (base + i))
    return builder.build()


def control(base: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(
        kind,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=1,
        base_offset=base,
        partition_leader_epoch=3,
    )


def drain(
    data: bytes,
    position: int,
    *,
    limit: int = 1000,
    read_committed: bool = False,
    aborted: tuple[tuple[int, int], ...] = (),
    check_crcs: bool = True,
) -> tuple[list[int], PartitionState]:
    state = PartitionState(position=position)
    end = end_offset(data)
    assert end is not None
    fetch = CompletedFetch(
        TP,
        state,
        position,
        data,
        end,
        aborted=aborted,
        read_committed=read_committed,
        check_crcs=check_crcs,
    )
    got: list[int] = []
    done = False
    while not done:
        records, done = fetch.take(limit, None, None)
        got += [r.offset for r in records]
    return got, state


def test_records_below_the_position_are_skipped() -> None:
    """A fetch may start with a batch that begins before the requested offset."""
    data = batch(0, 5, compression=GZIP) + batch(5, 5)
    got, state = drain(data, 3)
    assert got == [3, 4, 5, 6, 7, 8, 9]
    assert state.position == 10


def test_partial_trailing_batch_is_ignored() -> None:
    data = batch(0, 3) + batch(3, 3)[:-7]
    assert end_offset(data) == 3
    got, state = drain(data, 0)
    assert got == [0, 1, 2]
    assert state.position == 3


def test_only_a_partial_batch_has_no_end() -> None:
    assert end_offset(batch(0, 3)[:40]) is None


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6), limit=st.integers(1, 8))
def test_limits_split_batches_without_loss(sizes: list[int], limit: int) -> None:
    data = b""
    base = 0
    for size in sizes:
        data += batch(base, size)
        base += size
    got, state = drain(data, 0, limit=limit)
    assert got == list(range(base))
    assert state.position == base


def test_record_fields() -> None:
    state = PartitionState(position=0)
    data = batch(0, 2, log_append_time=True, epoch=7)
    fetch = CompletedFetch(TP, state, 0, data, 2)
    records, done = fetch.take(10, None, None)
    assert done
    assert [tuple(r) for r in records] == [
        ("t", 0, 0, 101, None, b"v0", (), LOG_APPEND_TIME, 7),
        ("t", 0, 1, 101, None, b"v1", (), LOG_APPEND_TIME, 7),
    ]
    records, _ = CompletedFetch(TP, PartitionState(position=0), 0, batch(0, 1, epoch=-1), 1).take(
        5, None, None
    )
    assert [(r.timestamp_type, r.leader_epoch) for r in records] == [(CREATE_TIME, None)]


def test_legacy_entries() -> None:
    v0 = LegacyBatchBuilder(magic=0)
    v0.append(-1, b"k", b"a")
    v0.append(-1, None, b"b")
    v1 = LegacyBatchBuilder(magic=1, compression=GZIP, base_offset=2)
    v1.append(50, None, b"c")
    v1.append(51, None, b"d")
    data = v0.build() + v1.build()
    end = end_offset(data)
    assert end is not None
    fetch = CompletedFetch(TP, PartitionState(position=0), 0, data, end)
    records, _ = fetch.take(10, None, None)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in records] == [
        (0, -1, NO_TIMESTAMP_TYPE, b"k", b"a"),
        (1, -1, NO_TIMESTAMP_TYPE, None, b"b"),
        (2, 50, CREATE_TIME, None, b"c"),
        (3, 51, CREATE_TIME, None, b"d"),
    ]
    assert end == 4
    fetch = CompletedFetch(TP, PartitionState(position=3), 3, data, end)
    assert [r.value for r in fetch.take(10, None, None)[0]] == [b"d"]


def test_corrupt_batch_raises_unless_crcs_are_not_checked() -> None:
    data = bytearray(batch(0, 2) + batch(2, 2))
    data[-2] ^= 0x01  # the last value byte of the second batch: its CRC no longer matches
    state = PartitionState(position=0)
    fetch = CompletedFetch(TP, state, 0, bytes(data), 4)
    records, done = fetch.take(2, None, None)
    assert [r.offset for r in records] == [0, 1] and not done
    with pytest.raises(CorruptMessageError):
        fetch.take(2, None, None)
    assert state.position == 2
    got, _ = drain(bytes(data), 0, check_crcs=False)
    assert got == [0, 1, 2, 3]


def test_records_before_a_corrupt_batch_are_not_lost() -> None:
    """A take that reaches a damaged batch returns what it has; the next take raises."""
    data = bytearray(batch(0, 2) + batch(2, 2))
    data[-2] ^= 0x01
    state = PartitionState(position=0)
    fetch = CompletedFetch(TP, state, 0, bytes(data), 4)
    records, done = fetch.take(10, None, None)
    assert [r.offset for r in records] == [0, 1] and not done
    assert state.position == 2
    with pytest.raises(CorruptMessageError):
        fetch.take(10, None, None)
    assert state.position == 2


def test_control_batches_are_never_returned() -> None:
    data = (
        batch(0, 2, producer_id=7, transactional=True)
        + control(2, 7, ControlRecordType.COMMIT)
        + batch(3, 1)
    )
    for read_committed in (False, True):
        got, state = drain(data, 0, read_committed=read_committed)
        assert got == [0, 1, 3]
        assert state.position == 4


def test_read_committed_drops_aborted_transactions() -> None:
    """Kafka's filter: aborted_transactions + ABORT markers, per producer id."""
    data = (
        batch(0, 2, producer_id=1, transactional=True)  # aborted below
        + batch(2, 2, producer_id=2, transactional=True)  # committed
        + control(4, 1, ControlRecordType.ABORT)
        + control(5, 2, ControlRecordType.COMMIT)
        + batch(6, 2, producer_id=1, transactional=True)  # a later transaction of 1: kept
        + batch(8, 1, producer_id=3, transactional=True)  # aborted, starts at 8
        + control(9, 3, ControlRecordType.ABORT)
        + batch(10, 1)  # not transactional
    )
    aborted = ((8, 3), (0, 1))
    got, state = drain(data, 0, read_committed=True, aborted=aborted)
    assert got == [2, 3, 6, 7, 10]
    assert state.position == 11
    got, _ = drain(data, 0, read_committed=False, aborted=aborted)
    assert got == [0, 1, 2, 3, 6, 7, 8, 10]


def test_a_damaged_control_batch_under_read_committed_is_a_corrupt_message() -> None:
    """With check_crcs off, read_committed reads a control batch's markers: records it
    cannot parse are the consumer's CorruptMessageError (seek past it), not an internal
    parse error, and the records before it come first."""
    marker = bytearray(control(2, 7, ControlRecordType.COMMIT))
    marker[57:61] = (5).to_bytes(4, "big")  # declares 5 records, holds 1
    data = batch(0, 2, producer_id=7, transactional=True) + bytes(marker)
    state = PartitionState(position=0)
    fetch = CompletedFetch(TP, state, 0, data, 3, read_committed=True, check_crcs=False)
    records, done = fetch.take(10, None, None)
    assert [r.offset for r in records] == [0, 1] and not done
    with pytest.raises(CorruptMessageError, match="t-0 batch at offset 2: batch declares 5"):
        fetch.take(10, None, None)
    assert state.position == 2


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    start=st.integers(0, 6),
    limit=st.integers(1, 7),
    log_append_time=st.booleans(),
    epoch=st.sampled_from([-1, 0, 9]),
    compression=st.sampled_from([0, GZIP]),
)
def test_extension_and_python_make_the_same_records(
    sizes: list[int],
    start: int,
    limit: int,
    log_append_time: bool,
    epoch: int,
    compression: int,
) -> None:
    """The C extension makes the consumer's records whole (topic and partition, the
    record, timestamp type and leader epoch): the same records, of the same type, as
    the Python path, also from a position inside a batch and in takes of any size."""
    data = b""
    base = 0
    for size in sizes:
        builder = RecordBatchBuilder(
            base_offset=base,
            compression=compression,
            log_append_time=log_append_time,
            partition_leader_epoch=epoch,
        )
        for i in range(size):
            headers = [("h", b"%d" % i), ("n", None)] if i % 2 else []
            builder.append(100 + base + i, b"k%d" % i if i % 3 else None, b"v%d" % i, headers)
        data += builder.build()
        base += size
    start = min(start, base - 1)

    def take_all() -> list[tuple[type, tuple[object, ...]]]:
        fetch = CompletedFetch(TP, PartitionState(position=start), start, data, base)
        got: list[ConsumerRecord] = []
        done = False
        while not done:
            records, done = fetch.take(limit, None, None)
            got += records
        return [(type(r), tuple(r)) for r in got]

    with_extension = with_speedups(True, take_all)
    without = with_speedups(False, take_all)
    assert with_extension == without
    assert [fields[2] for _, fields in without] == list(range(start, base))
    assert {kind for kind, _ in without} == {ConsumerRecord}


def with_speedups(enabled: bool, run: Callable[[], T], *, records_in_c: bool = False) -> T:
    """``run()`` with the C extension's record functions, or with the Python path alone
    (also under KAFKETTE_NO_EXTENSIONS=1: the extension is imported directly); with
    ``records_in_c``, the Python walk with the C extension's record parser."""
    names = ("parse_records", "take_records", "fetch_end_offset")
    with pytest.MonkeyPatch.context() as patch:
        for name in names:
            used = enabled or (records_in_c and name == "parse_records")
            patch.setattr(speedups, name, getattr(_speedups, name) if used else None)
        return run()


def legacy_entry(base: int) -> bytes:
    builder = LegacyBatchBuilder(magic=1, base_offset=base)
    builder.append(70, b"k", b"legacy")
    return builder.build()


BATCH_KINDS = st.sampled_from(
    ["plain", "plain", "gzip", "log_append", "no_epoch", "txn", "commit", "abort", "legacy"]
)


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.tuples(BATCH_KINDS, st.integers(1, 4), st.integers(1, 3)), max_size=8),
    start=st.integers(0, 12),
    limits=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    read_committed=st.booleans(),
    aborted_at=st.lists(st.integers(0, 20), max_size=2),
    damage=st.one_of(st.none(), st.integers(0, 10_000)),
    cut=st.integers(0, 40),
    check_crcs=st.booleans(),
)
def test_the_c_walk_takes_what_the_python_walk_takes(
    kinds: list[tuple[str, int, int]],
    start: int,
    limits: list[int],
    read_committed: bool,
    aborted_at: list[int],
    damage: int | None,
    cut: int,
    check_crcs: bool,
) -> None:
    """The C walk over whole batches (take_records) and the Python walk give the same
    records, positions, ends and errors, whatever the fetch mixes: compressed, legacy,
    control and transactional batches, aborted transactions under read_committed, a
    damaged byte, a cut-off tail, takes of any size from a position inside a batch."""
    data = b""
    base = 0
    for kind, count, producer_id in kinds:
        if kind == "legacy":
            data += legacy_entry(base)
            base += 1
            continue
        if kind in ("commit", "abort"):
            marker = ControlRecordType.COMMIT if kind == "commit" else ControlRecordType.ABORT
            data += control(base, producer_id, marker)
            base += 1
            continue
        data += batch(
            base,
            count,
            producer_id=producer_id if kind == "txn" else -1,
            transactional=kind == "txn",
            compression=GZIP if kind == "gzip" else 0,
            log_append_time=kind == "log_append",
            epoch=-1 if kind == "no_epoch" else 3,
        )
        base += count
    raw = bytearray(data[: max(len(data) - cut, 0)])
    if damage is not None and raw:
        raw[damage % len(raw)] ^= 0x40
    fetched = bytes(raw)
    aborted = tuple((offset, 1 + i) for i, offset in enumerate(aborted_at))

    def walk() -> list[object]:
        end = end_offset(fetched)
        events: list[object] = [end]
        if end is None:
            return events
        state = PartitionState(position=start)
        fetch = CompletedFetch(
            TP,
            state,
            start,
            fetched,
            end,
            aborted=aborted,
            read_committed=read_committed,
            check_crcs=check_crcs,
        )
        for take in range(12):
            try:
                records, done = fetch.take(limits[take % len(limits)], None, None)
            except CorruptMessageError as exc:
                events.append(("raised", str(exc), state.position))
                break
            events.append(([tuple(r) for r in records], done, state.position, fetch.position))
            if done:
                break
        return events

    in_c = with_speedups(True, walk)
    assert in_c == with_speedups(False, walk, records_in_c=True)
    if damage is None or check_crcs:
        # The pure-Python parse hands a batch's records out as they are made, so the
        # position inside a batch whose header's last offset disagrees with its records
        # (damage no CRC check caught) may differ along the way; elsewhere all agree.
        assert in_c == with_speedups(False, walk)


@pytest.mark.anyio
async def test_buffer_chains_at_most_two_fetches_per_partition() -> None:
    """The next fetch starts where buffered data ends; a seek (drop) restarts at the position."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    assert buffer.next_offset(TP, state) == 0
    first = CompletedFetch(TP, state, 0, batch(0, 3), 3)
    buffer.add(first)
    assert buffer.next_offset(TP, state) == 3
    buffer.add(CompletedFetch(TP, state, 3, batch(3, 3), 6))
    assert buffer.next_offset(TP, state) is None
    buffer.remove(first)
    assert buffer.next_offset(TP, state) == 6
    buffer.drop(TP)
    assert buffer.next_offset(TP, state) == 0
    assert len(buffer) == 0


@pytest.mark.anyio
async def test_a_used_up_fetch_wakes_the_fetcher_unless_its_partition_is_being_fetched() -> None:
    """remove() says whether the fetcher must be woken to fetch in the removed entry's
    place: not while a fetch for its partition is in flight (the fetcher plans again
    when that ends), and again once it has ended."""
    state = PartitionState(position=0)
    other = TopicPartition("t", 1)
    buffer = FetchBuffer()
    entries = [CompletedFetch(TP, state, 3 * i, batch(3 * i, 3), 3 * i + 3) for i in range(3)]
    for entry in entries[:2]:
        buffer.add(entry)
    buffer.fetching([TP, other])
    assert buffer.remove(entries[0]) is False
    buffer.fetched([other])
    assert buffer.remove(entries[1]) is False
    buffer.fetched([TP])
    buffer.add(entries[2])
    assert buffer.remove(entries[2]) is True
    assert buffer.remove(entries[2]) is True  # not there (dropped meanwhile): wake anyway
    assert len(buffer) == 0


def test_an_add_wakes_a_sync_waiter_at_once() -> None:
    """``add`` queues the entry and wakes a thread blocked in ``wait_sync`` before it
    returns (the generation bumped once per add): the sync consumer's poll thread parses
    these records while the fetcher writes its next request."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    seen = buffer.generation
    woke = threading.Event()
    waiting = threading.Event()

    def waiter() -> None:
        waiting.set()
        buffer.wait_sync(seen, 30.0)
        woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(10.0)
    assert not woke.wait(0.2)
    first = CompletedFetch(TP, state, 0, batch(0, 3), 3)
    buffer.add(first)
    assert buffer.generation == seen + 1
    assert woke.wait(10.0)
    thread.join()
    assert buffer.first_ready(lambda entry: False) is first
    buffer.add(CompletedFetch(TP, state, 3, batch(3, 3), 6))
    assert buffer.generation == seen + 2
    assert buffer.next_offset(TP, state) is None  # two buffered: no third fetch


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10.0
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_yield_to_woken_waits_until_the_told_sync_waiter_is_back() -> None:
    """After an add wakes a thread blocked in ``wait_sync``, ``yield_to_woken`` returns
    (True) once that thread has left ``wait_sync``, not at its timeout; the next call, with
    nobody told since, returns False at once."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    seen = buffer.generation
    release = threading.Event()
    back_at: list[int] = []

    def waiter() -> None:
        buffer.wait_sync(seen, 30.0)
        back_at.append(buffer.generation)
        release.wait(30.0)  # still running: what counts is being out of wait_sync

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        _until(lambda: buffer.sync_waiting == 1)
        buffer.add(CompletedFetch(TP, state, 0, batch(0, 3), 3))
        started = time.monotonic()
        assert buffer.yield_to_woken(30.0) is True
        assert time.monotonic() - started < 20.0
        assert buffer.sync_waiting == 0
        assert buffer.yield_to_woken(30.0) is False
    finally:
        release.set()
        thread.join()
    assert back_at == [seen + 1]


def test_yield_to_woken_gives_up_at_its_timeout_and_waits_afresh_next_time() -> None:
    """A told thread not back within the timeout: ``yield_to_woken`` returns True at the
    timeout and forgets it; the next add's ``yield_to_woken`` waits for the thread that
    add woke, not a stale wake-up."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    buffer.sync_waiting = 1  # a poll thread that was told but never gets to run
    buffer.add(CompletedFetch(TP, state, 0, batch(0, 3), 3))
    started = time.monotonic()
    assert buffer.yield_to_woken(0.01) is True
    assert time.monotonic() - started >= 0.01
    assert buffer.yield_to_woken(30.0) is False
    buffer.sync_waiting = 0
    seen = buffer.generation
    release = threading.Event()

    def waiter() -> None:
        buffer.wait_sync(seen, 30.0)
        release.wait(30.0)

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        _until(lambda: buffer.sync_waiting == 1)
        buffer.add(CompletedFetch(TP, state, 3, batch(3, 3), 6))
        assert buffer.yield_to_woken(30.0) is True
        assert buffer.sync_waiting == 0  # it waited for this waiter
    finally:
        release.set()
        thread.join()


def test_yield_to_woken_without_a_sync_waiter_returns_at_once() -> None:
    """With no thread in ``wait_sync`` when the add came (an async consumer, or a sync
    ``poll`` thread busy with earlier records), ``yield_to_woken`` does not wait."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    buffer.add(CompletedFetch(TP, state, 0, batch(0, 3), 3))
    started = time.monotonic()
    assert buffer.yield_to_woken(30.0) is False
    assert time.monotonic() - started < 20.0
    assert buffer.sync_waiting == 0


@pytest.mark.anyio
async def test_the_fetch_poll_is_reading_does_not_count_as_waiting() -> None:
    """Once ``poll`` has begun to read the oldest of two buffered fetches, a third is
    fetched (chained on the second's end), so one is in flight while ``poll`` reads;
    three buffered, or two that ``poll`` has not begun, stop the chain."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    first = CompletedFetch(TP, state, 0, batch(0, 3), 3)
    buffer.add(first)
    buffer.add(CompletedFetch(TP, state, 3, batch(3, 3), 6))
    assert buffer.next_offset(TP, state) is None
    records, done = first.take(1, None, None)
    assert [r.offset for r in records] == [0] and not done
    assert buffer.next_offset(TP, state) == 6
    buffer.add(CompletedFetch(TP, state, 6, batch(6, 3), 9))
    assert buffer.next_offset(TP, state) is None
    buffer.remove(first)
    assert buffer.next_offset(TP, state) is None  # two waiting, neither begun
    assert state.position == 1


@pytest.mark.anyio
async def test_a_used_up_fetch_wakes_no_fetcher_while_two_more_wait() -> None:
    """remove() asks for no wake-up when two fetches of the partition still wait (the
    fetcher would plan none), and asks again once fewer wait."""
    state = PartitionState(position=0)
    buffer = FetchBuffer()
    entries = [CompletedFetch(TP, state, 3 * i, batch(3 * i, 3), 3 * i + 3) for i in range(3)]
    for entry in entries:
        buffer.add(entry)
    assert entries[0].take(3, None, None)[1] is True
    assert buffer.remove(entries[0]) is False
    assert entries[1].take(3, None, None)[1] is True
    assert buffer.remove(entries[1]) is True
    assert buffer.next_offset(TP, state) == 9
