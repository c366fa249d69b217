"""The Log contract, run against MemoryLog and DiskLog alike."""

from __future__ import annotations

import struct

import pytest

from kafkette.backends.types import AbortedTxn, TimestampOffset
from kafkette.errors import (
    CorruptMessageError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kafkette.protocol.records.batch_header import BatchHeader, verify_crc
from tests.backends.conftest import LogFactory
from tests.backends.helpers import (
    FakeClock,
    control_batch,
    decode,
    decode_headers,
    decode_with_peer,
    make_batch,
    read_all,
    simple_batch,
)


def test_append_assigns_contiguous_offsets_and_rewrites_base_offset(make_log: LogFactory) -> None:
    """Each batch gets the log end offset as its base; the rest of its bytes are unchanged."""
    log = make_log()
    first, second = simple_batch(3), simple_batch(2, timestamp=2000)
    assert log.append(first).base_offset == 0
    info = log.append(second)
    assert (info.base_offset, info.last_offset, info.log_append_time) == (3, 4, -1)
    assert log.log_end_offset == 5
    stored = read_all(log)
    assert stored == first + struct.pack(">q", 3) + second[8:]
    assert decode_with_peer(stored) == [
        (0, 1000, b"k0", b"\x00" * 8),
        (1, 1001, b"k1", b"\x01" * 8),
        (2, 1002, b"k2", b"\x02" * 8),
        (3, 2000, b"k0", b"\x00" * 8),
        (4, 2001, b"k1", b"\x01" * 8),
    ]


def test_append_of_several_batches_in_one_buffer(make_log: LogFactory) -> None:
    """A buffer of several batches is appended as consecutive batches."""
    log = make_log()
    log.append(simple_batch(1))
    info = log.append(simple_batch(2) + simple_batch(3))
    assert (info.base_offset, info.last_offset) == (1, 5)
    assert info.batches == ()
    producer = make_batch([(1, b"a", b"1")], producer_id=8, producer_epoch=0, base_sequence=0)
    info = log.append(simple_batch(1) + producer)
    assert [(b.base_offset, b.producer_id) for b in info.batches] == [(7, 8)]
    assert decode_headers(read_all(log)) == [(0, 0), (1, 2), (3, 5), (6, 6), (7, 7)]


def test_append_rejects_corrupt_batches_without_appending(make_log: LogFactory) -> None:
    """A bad CRC, a truncated batch or a legacy magic fails the whole append."""
    log = make_log()
    good = simple_batch(2)
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        log.append(good + bytes(flipped))
    with pytest.raises(CorruptMessageError):
        log.append(good[:-3])
    legacy = bytearray(good)
    legacy[16] = 1
    with pytest.raises(CorruptMessageError):
        log.append(bytes(legacy))
    with pytest.raises(CorruptMessageError):
        log.append(b"")
    assert log.log_end_offset == 0
    assert log.read(0, 1000).size == 0


def test_append_rejects_batches_over_max_message_bytes(make_log: LogFactory) -> None:
    log = make_log(max_message_bytes=200)
    with pytest.raises(RecordListTooLargeError):
        log.append(simple_batch(10, size=100))
    assert log.log_end_offset == 0


def test_log_append_time_stamps_the_clock(make_log: LogFactory, clock: FakeClock) -> None:
    """LogAppendTime sets the timestamp type and max timestamp, with a valid CRC."""
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append(simple_batch(2, timestamp=5))
    assert info.log_append_time == clock.now
    stored = read_all(log)
    header = verify_crc(stored)
    assert header.is_log_append_time and header.max_timestamp == clock.now
    assert [r[1] for r in decode(stored)] == [clock.now, clock.now]


def test_leader_epoch_is_stamped_and_recorded(make_log: LogFactory) -> None:
    log = make_log()
    log.append(simple_batch(2), leader_epoch=3)
    log.append(simple_batch(1), leader_epoch=5)
    stored = read_all(log)
    assert BatchHeader.parse(stored).partition_leader_epoch == 3
    assert [(e.epoch, e.start_offset) for e in log.leader_epochs] == [(3, 0), (5, 2)]
    assert log.end_offset_for_epoch(3) == (3, 2)
    assert log.end_offset_for_epoch(5) == (5, 3)
    assert log.end_offset_for_epoch(1) == (-1, -1)


def test_read_returns_whole_batches_from_the_one_holding_the_offset(make_log: LogFactory) -> None:
    log = make_log()
    for _ in range(5):
        log.append(simple_batch(4))
    batch_size = len(simple_batch(4))
    # Offset 6 is inside the second batch (4..7).
    result = log.read(6, 2 * batch_size)
    assert decode_headers(result.to_bytes()) == [(4, 7), (8, 11)]
    # One byte of budget still returns one whole batch.
    assert decode_headers(log.read(6, 1).to_bytes()) == [(4, 7)]
    # Slightly less than three batches gives two.
    assert decode_headers(log.read(0, 3 * batch_size - 1).to_bytes()) == [(0, 3), (4, 7)]
    assert log.read(20, 100).size == 0


def test_read_respects_the_upper_bound(make_log: LogFactory) -> None:
    log = make_log()
    for _ in range(3):
        log.append(simple_batch(2))
    assert decode_headers(log.read(0, 10_000, upper_bound=4).to_bytes()) == [(0, 1), (2, 3)]
    assert log.read(4, 10_000, upper_bound=4).size == 0
    # A batch reaching past the bound is not returned, even as the first one.
    assert log.read(2, 10_000, upper_bound=3).size == 0


def test_read_out_of_range(make_log: LogFactory) -> None:
    log = make_log()
    log.append(simple_batch(2))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_read_slice_forms(make_log: LogFactory, backend: str) -> None:
    """Memory slices are memoryviews; disk slices are sendable file regions."""
    log = make_log()
    data = simple_batch(3)
    log.append(data)
    result = log.read(0, 1000)
    assert result.size == len(data) == len(result)
    if backend == "memory":
        assert result.file is None and all(isinstance(v, memoryview) for v in result.buffers)
    else:
        assert result.file is not None and not result.buffers
        assert result.position == 0
    assert b"".join(bytes(v) for v in result.views()) == data


def test_read_slice_sendfile(make_log: LogFactory, tmp_path: object) -> None:
    import os
    import tempfile

    log = make_log()
    log.append(simple_batch(3))
    log.append(simple_batch(5))
    result = log.read(3, 1 << 20)
    with tempfile.TemporaryFile() as out:
        assert result.sendfile(out.fileno()) == result.size
        out.seek(0)
        assert out.read() == result.to_bytes()
        assert os.fstat(out.fileno()).st_size == result.size


def test_reads_across_segments(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=3 * len(batch))
    for _ in range(10):
        log.append(batch)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    collected = []
    offset = 0
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).to_bytes()
        headers = decode_headers(chunk)
        collected.extend(headers)
        offset = headers[-1][1] + 1
    assert collected == [(i, i + 1) for i in range(0, 20, 2)]


def test_segment_ms_rolls_by_record_timestamps(make_log: LogFactory) -> None:
    log = make_log(segment_ms=1000)
    log.append(simple_batch(1, timestamp=10_000))
    log.append(simple_batch(1, timestamp=10_900))
    log.append(simple_batch(1, timestamp=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_and_empty_roll(make_log: LogFactory) -> None:
    log = make_log()
    log.roll()
    assert len(log.segments) == 1
    log.append(simple_batch(2))
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_offset_for_timestamp_is_exact_within_a_batch(make_log: LogFactory) -> None:
    """The first record with timestamp >= t, in offset order, not the batch base."""
    log = make_log(segment_bytes=150)
    log.append(make_batch([(100, b"a", b"1"), (300, b"b", b"2"), (200, b"c", b"3")]))
    log.append(make_batch([(150, b"d", b"4"), (500, b"e", b"5")]))
    log.append(make_batch([(400, b"f", b"6")]))
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == TimestampOffset(100, 0)
    assert log.offset_for_timestamp(100) == TimestampOffset(100, 0)
    assert log.offset_for_timestamp(101) == TimestampOffset(300, 1)
    assert log.offset_for_timestamp(300) == TimestampOffset(300, 1)
    assert log.offset_for_timestamp(301) == TimestampOffset(500, 4)
    assert log.offset_for_timestamp(450) == TimestampOffset(500, 4)
    assert log.offset_for_timestamp(501) is None
    assert log.max_timestamp() == TimestampOffset(500, 4)


def test_offset_for_timestamp_skips_records_below_log_start(make_log: LogFactory) -> None:
    log = make_log()
    log.append(make_batch([(100, b"a", b"1"), (200, b"b", b"2"), (300, b"c", b"3")]))
    log.update_high_watermark(3)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == TimestampOffset(300, 2)


def test_offset_for_timestamp_log_append_time(make_log: LogFactory, clock: FakeClock) -> None:
    log = make_log(message_timestamp_type="LogAppendTime")
    log.append(simple_batch(2, timestamp=1))
    clock.advance(10)
    log.append(simple_batch(2, timestamp=1))
    assert log.offset_for_timestamp(clock.now - 5) == TimestampOffset(clock.now, 2)


def test_truncate_to(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=2 * len(batch))
    for _ in range(6):
        log.append(batch)
    log.update_high_watermark(12)
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    assert decode_headers(read_all(log)) == [(0, 1), (2, 3), (4, 5)]
    assert log.append(batch).base_offset == 6
    log.truncate_to(20)
    assert log.log_end_offset == 8
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 100).size == 0


def test_high_watermark_is_clamped(make_log: LogFactory) -> None:
    log = make_log()
    log.append(simple_batch(3))
    assert log.update_high_watermark(10) == 3
    assert log.update_high_watermark(-5) == 0


def test_delete_records_moves_log_start(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=2 * len(batch))
    for _ in range(6):
        log.append(batch)
    log.update_high_watermark(12)
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    # The batch holding offset 5 is returned whole.
    assert decode_headers(log.read(5, 1).to_bytes()) == [(4, 5)]
    assert [s.base_offset for s in log.segments] == [4, 8]
    assert log.delete_records_before(3) == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(13)
    log.update_high_watermark(8)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(9)
    assert log.delete_records_before(-1) == 8


def test_retention_bytes_deletes_old_segments_never_the_active_one(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=2 * len(batch), retention_bytes=3 * len(batch), retention_ms=-1)
    for _ in range(7):
        log.append(batch)
    log.update_high_watermark(log.log_end_offset)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12]
    assert log.enforce_retention() == 2
    assert [s.base_offset for s in log.segments] == [8, 12]
    assert log.log_start_offset == 8
    log2 = make_log(segment_bytes=2 * len(batch), retention_bytes=0, retention_ms=-1)
    for _ in range(3):
        log2.append(batch)
    log2.update_high_watermark(log2.log_end_offset)
    log2.enforce_retention()
    assert [s.base_offset for s in log2.segments] == [4]
    assert log2.log_start_offset == 4


def test_retention_ms_with_injected_clock(make_log: LogFactory, clock: FakeClock) -> None:
    log = make_log(segment_bytes=200, retention_ms=1000)
    now = clock.now
    log.append(simple_batch(3, timestamp=now - 5000))
    log.append(simple_batch(3, timestamp=now - 500))
    log.append(simple_batch(3, timestamp=now - 5000))
    log.update_high_watermark(log.log_end_offset)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    # The second segment is young, so deletion stops there (a prefix only).
    assert log.enforce_retention() == 1
    assert log.log_start_offset == 3
    clock.advance(600)
    assert log.enforce_retention() == 1
    assert [s.base_offset for s in log.segments] == [6]


def test_retention_waits_for_the_high_watermark(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=len(batch), retention_bytes=0, retention_ms=-1)
    for _ in range(3):
        log.append(batch)
    log.update_high_watermark(2)
    assert log.enforce_retention() == 1
    assert log.log_start_offset == 2


def test_retention_does_nothing_on_compact_only_logs(make_log: LogFactory) -> None:
    batch = simple_batch(2)
    log = make_log(segment_bytes=len(batch), retention_bytes=0, cleanup_policy=("compact",))
    for _ in range(3):
        log.append(batch)
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention() == 0


def test_keyless_records_rejected_on_compacted_logs(make_log: LogFactory) -> None:
    log = make_log(cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([(1, b"k", b"v"), (2, None, b"v")]))
    assert log.log_end_offset == 0
    log.append(control_batch(7, 0, commit=True, timestamp=1))
    assert log.log_end_offset == 1


def test_producer_fields_are_recoverable_from_the_log(make_log: LogFactory) -> None:
    log = make_log()
    log.append(
        make_batch(
            [(1, b"a", b"1"), (2, b"b", b"2")], producer_id=9, producer_epoch=2, base_sequence=10
        )
    )
    log.append(simple_batch(1))
    log.append(
        make_batch(
            [(3, b"c", b"3")], producer_id=9, producer_epoch=2, base_sequence=12, transactional=True
        )
    )
    log.append(control_batch(9, 2, commit=True, timestamp=4, coordinator_epoch=7))
    infos = list(log.iter_batch_infos())
    assert [(i.producer_id, i.producer_epoch, i.base_sequence, i.last_sequence) for i in infos] == [
        (9, 2, 10, 11),
        (-1, -1, -1, -1),
        (9, 2, 12, 12),
        (9, 2, -1, -1),
    ]
    assert [(i.base_offset, i.last_offset, i.is_transactional, i.is_control) for i in infos] == [
        (0, 1, False, False),
        (2, 2, False, False),
        (3, 3, True, False),
        (4, 4, True, True),
    ]
    assert (infos[3].control_type, infos[3].coordinator_epoch) == (1, 7)
    entry = log.producer_state().producers[9]
    assert (
        entry.producer_epoch,
        entry.last_sequence,
        entry.last_offset,
        entry.coordinator_epoch,
    ) == (
        2,
        12,
        3,
        7,
    )
    assert [i.base_offset for i in log.iter_batch_infos(3)] == [3, 4]


def test_transactions_drive_lso_and_aborted_index(make_log: LogFactory) -> None:
    log = make_log()
    log.append(simple_batch(2))
    log.append(
        make_batch(
            [(1, b"a", b"1")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    log.append(
        make_batch(
            [(1, b"b", b"1")], producer_id=2, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    log.append(control_batch(1, 0, commit=False, timestamp=2))
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    log.append(control_batch(2, 0, commit=True, timestamp=2))
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 10) == [AbortedTxn(1, 2, 4, 3)]
    assert log.aborted_transactions(5, 10) == []
    assert log.aborted_transactions(0, 2) == []


def test_truncation_rewinds_producer_state(make_log: LogFactory) -> None:
    log = make_log()
    log.append(make_batch([(1, b"a", b"1")], producer_id=4, producer_epoch=0, base_sequence=0))
    log.append(
        make_batch(
            [(1, b"a", b"1")], producer_id=4, producer_epoch=0, base_sequence=1, transactional=True
        )
    )
    log.append(control_batch(4, 0, commit=False, timestamp=2))
    assert len(log.aborted_transactions(0, 10)) == 1
    log.truncate_to(2)
    assert log.producer_state().producers[4].last_sequence == 1
    assert log.producer_state().first_unstable_offset() == 1
    assert log.aborted_transactions(0, 10) == []
    log.truncate_to(1)
    assert log.producer_state().producers[4].last_sequence == 0
    assert log.producer_state().first_unstable_offset() is None


def test_flush_messages_and_tick(make_log: LogFactory, clock: FakeClock, backend: str) -> None:
    log = make_log(flush_messages=3, flush_ms=100)
    log.append(simple_batch(2))
    if backend != "memory":
        assert log.recovery_point == 0  # type: ignore[attr-defined]
    log.append(simple_batch(1))
    if backend != "memory":
        assert log.recovery_point == 3  # type: ignore[attr-defined]
    log.append(simple_batch(1))
    log.tick()
    if backend != "memory":
        assert log.recovery_point == 3  # type: ignore[attr-defined]
    clock.advance(100)
    log.tick()
    if backend != "memory":
        assert log.recovery_point == 4  # type: ignore[attr-defined]
