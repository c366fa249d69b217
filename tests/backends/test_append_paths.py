"""The append fast path (one whole batch per call) and the general path agree.

``SegmentedLog.append`` takes a buffer holding exactly one valid, non-control
batch on its own short path; anything else (several batches, a control batch,
a bad length, magic or CRC, a compacted or LogAppendTime log) goes through
``split_batches``. These tests pin what the short path stores and returns,
check that every refusal raises what the general path raises, and compare
batch-per-call logs with logs fed the same batches two or three at a time (which
never takes the short path).
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from kafkette.backends.types import BatchInfo, TimestampOffset
from kafkette.errors import (
    CorruptMessageError,
    InvalidRecordError,
    KafkaStorageError,
    RecordListTooLargeError,
)
from kafkette.protocol.records.batch_header import (
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    RECORDS_COUNT_OFFSET,
    batch_crc,
)
from tests.backends.conftest import LogFactory
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import (
    FakeClock,
    control_batch,
    decode,
    make_batch,
    read_all,
    simple_batch,
)


def stored_form(batch: bytes, base_offset: int, leader_epoch: int | None) -> bytes:
    """``batch`` as a log stores it: new base offset (and leader epoch when given)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    if leader_epoch is not None:
        struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def test_one_batch_is_stored_with_its_offset_and_epoch_rewritten(make_log: LogFactory) -> None:
    """The stored batch is the caller's bytes with base offset and leader epoch replaced."""
    log = make_log()
    first = simple_batch(3, timestamp=500)
    second = simple_batch(2, timestamp=600)
    info = log.append(first)
    assert (info.base_offset, info.last_offset, info.log_append_time) == (0, 2, -1)
    assert (info.log_start_offset, info.batches) == (0, ())
    info = log.append(second, leader_epoch=4)
    assert (info.base_offset, info.last_offset, info.batches) == (3, 4, ())
    assert read_all(log) == stored_form(first, 0, None) + stored_form(second, 3, 4)
    assert log.log_end_offset == 5
    assert [(e.epoch, e.start_offset) for e in log.leader_epochs] == [(4, 3)]
    assert [r[:2] for r in decode(read_all(log))] == [
        (0, 500),
        (1, 501),
        (2, 502),
        (3, 600),
        (4, 601),
    ]


def test_timestamp_lookups_report_the_epoch_written(make_log: LogFactory) -> None:
    """The stored leader epoch is the one given to append, even for a batch whose base
    offset needed no rewrite (the memory log once kept the header as received)."""
    log = make_log()
    log.append(simple_batch(2, timestamp=100), leader_epoch=4)
    log.append(make_batch([(300, b"k", b"v")]), leader_epoch=6)
    log.update_high_watermark(log.log_end_offset)
    assert log.offset_for_timestamp(0) == TimestampOffset(100, 0, 4)
    assert log.offset_for_timestamp(200) == TimestampOffset(300, 2, 6)
    assert log.max_timestamp() == TimestampOffset(300, 2, 6)


def test_one_idempotent_batch_reports_and_tracks_its_producer(make_log: LogFactory) -> None:
    """A batch with a producer id comes back in AppendInfo.batches and enters producer state."""
    log = make_log()
    log.append(simple_batch(2))
    batch = make_batch(
        [(700, b"a", b"1"), (705, b"b", b"2")], producer_id=9, producer_epoch=1, base_sequence=4
    )
    info = log.append(batch, leader_epoch=0)
    assert info.batches == (
        BatchInfo(
            base_offset=2,
            last_offset=3,
            producer_id=9,
            producer_epoch=1,
            base_sequence=4,
            last_sequence=5,
            max_timestamp=705,
            is_transactional=False,
            is_control=False,
        ),
    )
    entry = log.producer_state().producers[9]
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset) == (1, 5, 3)


def corrupt(batch: bytes, position: int) -> bytes:
    out = bytearray(batch)
    out[position] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: corrupt(b, len(b) - 1), CorruptMessageError),  # CRC fails
        (lambda b: b + b"\x00" * 5, CorruptMessageError),  # trailing bytes
        (lambda b: b[:-1], CorruptMessageError),  # the length runs past the end
        (lambda b: b[:16] + b"\x01" + b[17:], CorruptMessageError),  # magic 1
        (lambda b: b[:40], CorruptMessageError),  # shorter than a header
        (lambda b: b"", CorruptMessageError),
    ],
)
def test_refused_batches_raise_and_store_nothing(
    make_log: LogFactory, mangle: object, error: type[Exception]
) -> None:
    """What the short path does not take raises the general path's error; nothing is stored."""
    log = make_log()
    log.append(simple_batch(1))
    with pytest.raises(error):
        log.append(mangle(simple_batch(4)))  # type: ignore[operator]
    assert log.log_end_offset == 1
    assert read_all(log) == stored_form(simple_batch(1), 0, None)


def test_too_large_batch_is_refused(make_log: LogFactory) -> None:
    """max.message.bytes holds on the short path."""
    batch = simple_batch(10, size=100)
    log = make_log(max_message_bytes=len(batch) - 1)
    with pytest.raises(RecordListTooLargeError):
        log.append(batch)
    assert log.log_end_offset == 0
    log.update_config(LogConfig(max_message_bytes=len(batch)))
    assert log.append(batch).last_offset == 9


def with_field(batch: bytes, position: int, value: int) -> bytes:
    """``batch`` with the int32 at ``position`` set to ``value`` and its CRC recomputed."""
    out = bytearray(batch)
    struct.pack_into(">i", out, position, value)
    struct.pack_into(">I", out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)


@pytest.mark.parametrize("position", [LAST_OFFSET_DELTA_OFFSET, RECORDS_COUNT_OFFSET])
def test_negative_counts_are_refused(make_log: LogFactory, position: int) -> None:
    """A valid CRC over a negative last offset delta or record count is still corrupt."""
    log = make_log()
    with pytest.raises(CorruptMessageError):
        log.append(with_field(simple_batch(2), position, -1))
    assert log.log_end_offset == 0


def test_relative_offsets_past_int32_roll_the_segment(make_log: LogFactory) -> None:
    """A batch whose last offset would sit 2**31 or more past the segment base rolls first."""
    log = make_log()
    log.append(simple_batch(1))
    log.append(with_field(simple_batch(1), LAST_OFFSET_DELTA_OFFSET, 2**31 - 1))
    log.append(simple_batch(1))
    assert [s.base_offset for s in log.segments] == [0, 1, 2**31 + 1]
    assert log.log_end_offset == 2**31 + 2


@pytest.mark.parametrize(
    "mangle",
    [lambda b: b + b"\x00" * 5, lambda b: b[:-1], lambda b: b + simple_batch(1)[:30]],
)
def test_length_is_checked_without_the_crc(make_log: LogFactory, mangle: object) -> None:
    """Without the CRC check a buffer that is not whole batches is still refused."""
    log = make_log()
    with pytest.raises(CorruptMessageError):
        log.append(mangle(simple_batch(4)), check_crc=False)  # type: ignore[operator]
    assert log.log_end_offset == 0
    assert read_all(log) == b""


def test_bad_crc_is_stored_as_given_without_the_check(make_log: LogFactory) -> None:
    """check_crc=False (the broker validated the request) skips the CRC, as the general path."""
    log = make_log()
    batch = corrupt(simple_batch(2), 70)
    assert log.append(batch, check_crc=False).last_offset == 1
    assert read_all(log) == stored_form(batch, 0, None)


def test_control_batch_ends_the_transaction(make_log: LogFactory) -> None:
    """A single control batch takes the general path: the marker is read and tracked."""
    log = make_log()
    log.append(make_batch([(100, b"k", b"v")], producer_id=3, producer_epoch=0, transactional=True))
    assert log.last_stable_offset == 0
    info = log.append(control_batch(3, 0, commit=False, timestamp=200))
    assert [(b.is_control, b.control_type) for b in info.batches] == [(True, 0)]
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    assert [
        (t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, 2)
    ] == [(3, 0, 1)]


def test_compacted_log_still_refuses_keyless_records(make_log: LogFactory) -> None:
    """A compacted log checks keys (the general path) even for one batch."""
    log = make_log(cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([(1, None, b"v")]))
    assert log.append(make_batch([(1, b"k", b"v")])).last_offset == 0


def test_log_append_time_stamps_a_single_batch(make_log: LogFactory, clock: FakeClock) -> None:
    """LogAppendTime logs rewrite the timestamp (and CRC) of a single batch too."""
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append(simple_batch(2, timestamp=5))
    assert info.log_append_time == clock.now
    assert [r[1] for r in decode(read_all(log))] == [clock.now, clock.now]


@pytest.mark.parametrize("together", [False, True])
def test_full_offset_index_rolls_the_segment(tmp_path: Path, together: bool) -> None:
    """A segment whose offset index is full (segment.index.bytes) takes no more batches."""
    config = LogConfig(index_interval_bytes=1, segment_index_bytes=48)  # 4 entries
    log = DiskLog(str(tmp_path), "t", 0, config)
    batches = [simple_batch(1, timestamp=10 * i) for i in range(10)]
    if together:
        log.append(b"".join(batches))
    else:
        for batch in batches:
            log.append(batch)
    # Every batch after a segment's first gets an entry; the 3rd entry fills the index
    # (the time index may need one more at the roll).
    size = len(batches[0])
    assert [(base, entries) for base, entries, _ in index_snapshot(log)] == [
        (0, [(1, size), (2, 2 * size), (3, 3 * size)]),
        (4, [(1, size), (2, 2 * size), (3, 3 * size)]),
        (8, [(1, size)]),
    ]
    log.close()


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    """An append after close raises KafkaStorageError, not a write to a stale descriptor."""
    log = DiskLog(str(tmp_path), "t", 0)
    log.close()
    with pytest.raises(KafkaStorageError):
        log.append(simple_batch(1))


# -- one batch per call against several per call -----------------------------------------

CONFIG = LogConfig(
    segment_bytes=700, segment_ms=400, index_interval_bytes=100, segment_index_bytes=48
)

batch_spec = st.tuples(
    st.integers(1, 4),  # records
    st.integers(0, 150),  # timestamp step
    st.sampled_from(["plain", "idempotent", "txn", "commit", "abort"]),
)
groups = st.lists(
    st.tuples(st.lists(batch_spec, min_size=2, max_size=3), st.sampled_from([-1, 0, 1, 2])),
    min_size=1,
    max_size=8,
)


def build(specs: list[tuple[int, int, str]], state: dict[str, int]) -> list[bytes]:
    """Batches for ``specs``; ``state`` carries the clock and sequences across calls."""
    out = []
    for count, step, kind in specs:
        state["time"] += step
        now = state["time"]
        if kind in ("commit", "abort"):
            out.append(control_batch(7, 0, commit=kind == "commit", timestamp=now))
            continue
        pid = {"plain": -1, "idempotent": 5, "txn": 7}[kind]
        sequence = state.setdefault(f"seq{pid}", 0) if pid >= 0 else -1
        out.append(
            make_batch(
                [(now + i, b"k%d" % i, b"v" * 20) for i in range(count)],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=sequence,
                transactional=kind == "txn",
            )
        )
        if pid >= 0:
            state[f"seq{pid}"] = sequence + count
    return out


def open_log(backend: str, directory: str) -> SegmentedLog:
    if backend == "memory":
        return MemoryLog("t", 0, CONFIG, clock=FakeClock())
    buffer = 1000 if backend == "disk-buffered" else 0
    return DiskLog(directory, "t", 0, CONFIG, clock=FakeClock(), write_buffer_bytes=buffer)


def observe(log: SegmentedLog) -> dict[str, object]:
    log.update_high_watermark(log.log_end_offset)
    seen: dict[str, object] = {
        "bytes": read_all(log),
        "end": log.log_end_offset,
        "segments": [(s.base_offset, s.size, s.first_timestamp) for s in log.segments],
        "max timestamps": [(s.max_timestamp, s.offset_of_max_timestamp) for s in log.segments],
        "producers": log.producer_state().producers,
        "aborted": log.aborted_transactions(0, log.log_end_offset),
        "lso": log.last_stable_offset,
        "epochs": log.leader_epochs,
    }
    if isinstance(log, DiskLog):
        seen["indexes"] = index_snapshot(log)
        assert seen["indexes"] == rebuilt_index_snapshot(log)
    return seen


@pytest.fixture(scope="module")
def scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield directory


@pytest.mark.parametrize("backend", ["memory", "disk", "disk-buffered"])
@settings(max_examples=25, deadline=None)
@given(plan=groups)
def test_batch_per_call_equals_batches_together(
    scratch: str, backend: str, plan: list[tuple[list[tuple[int, int, str]], int]]
) -> None:
    """Appending batches one per call (the short path where it applies) leaves the same
    bytes, segments, indexes, producer state and leader epochs as appending them
    together, and reports the same offsets and batches."""
    single_dir = tempfile.mkdtemp(dir=scratch)
    grouped_dir = tempfile.mkdtemp(dir=scratch)
    single, grouped = open_log(backend, single_dir), open_log(backend, grouped_dir)
    state = {"time": 1_000}
    try:
        for specs, epoch in plan:
            batches = build(specs, state)
            infos = [single.append(b, leader_epoch=epoch) for b in batches]
            together = grouped.append(b"".join(batches), leader_epoch=epoch)
            assert (together.base_offset, together.last_offset) == (
                infos[0].base_offset,
                infos[-1].last_offset,
            )
            assert together.batches == tuple(b for info in infos for b in info.batches)
            assert {i.log_start_offset for i in infos} == {together.log_start_offset}
        assert observe(single) == observe(grouped)
    finally:
        single.close()
        grouped.close()
