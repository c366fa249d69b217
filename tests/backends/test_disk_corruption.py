"""Damaged segment and index files, modelled on Kafka's LogSegmentTest."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.disk.segment import FileSegment
from kafkette.errors import CorruptMessageError
from kafkette.protocol.errors import CorruptRecordError
from kafkette.protocol.records.batch_header import verify_crc
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import (
    FakeClock,
    decode,
    decode_headers,
    make_batch,
    read_all,
    simple_batch,
)

CONFIG = LogConfig(index_interval_bytes=64, segment_bytes=4096)


def batches(count: int) -> list[bytes]:
    return [
        make_batch([(1000 + i, b"key%d" % i, b"value-%d-" % i + b"x" * (i % 40))])
        for i in range(count)
    ]


def fill(path: str, count: int, clock: FakeClock) -> tuple[DiskLog, list[int]]:
    """A log of ``count`` one-record batches; returns it and each batch's file position."""
    log = DiskLog(path, "t", 0, CONFIG, clock=clock)
    positions = []
    for data in batches(count):
        segment = log.segments[-1]
        positions.append(segment.size if segment.size + len(data) <= CONFIG.segment_bytes else 0)
        log.append(data)
    return log, positions


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_garbage_from_a_random_byte_of_a_random_batch(data: st.DataObject) -> None:
    """The segment is truncated to the batches before the damaged one (LogSegmentTest's
    testRecoveryWithCorruptMessage)."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t-0")
        log, _ = fill(path, 30, clock)
        assert len(log.segments) == 1
        stored = read_all(log)
        log.abandon()
        bounds = [0]
        for base, _last in decode_headers(stored):
            del base
        for pos, size in _entries(stored):
            bounds.append(pos + size)
        victim = data.draw(st.integers(0, 29), label="batch")
        start = bounds[victim] + data.draw(st.integers(0, bounds[victim + 1] - bounds[victim] - 1))
        rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
        garbage = bytes(rng.getrandbits(8) for _ in range(len(stored) - start + rng.randrange(50)))
        with open(os.path.join(path, "00000000000000000000.log"), "r+b") as f:
            f.seek(start)
            f.write(garbage)
        reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
        assert reopened.log_end_offset == victim
        assert read_all(reopened) == stored[: bounds[victim]]
        assert index_snapshot(reopened) == rebuilt_index_snapshot(reopened)
        assert reopened.append(simple_batch(1)).base_offset == victim
        reopened.close()


def _entries(buf: bytes) -> list[tuple[int, int]]:
    from kafkette.protocol.records.batch_header import iter_entries

    return list(iter_entries(buf))


def test_partial_trailing_batch_is_truncated(tmp_path: Path, clock: FakeClock) -> None:
    """A write cut short by a crash leaves a partial batch that recovery drops."""
    path = str(tmp_path / "t-0")
    log, _ = fill(path, 5, clock)
    stored = read_all(log)
    log.abandon()
    with open(os.path.join(path, "00000000000000000000.log"), "ab") as f:
        f.write(simple_batch(2)[:40])
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert reopened.recovered_bytes_truncated == 40
    assert read_all(reopened) == stored
    reopened.close()


def test_offsets_going_backwards_are_invalid(tmp_path: Path, clock: FakeClock) -> None:
    """A batch whose base offset is below the previous batch's end ends the valid log."""
    path = str(tmp_path / "t-0")
    log, _ = fill(path, 4, clock)
    stored = read_all(log)
    log.abandon()
    with open(os.path.join(path, "00000000000000000000.log"), "ab") as f:
        f.write(make_batch([(1, b"a", b"b")]))  # base offset 0 again, CRC valid
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert read_all(reopened) == stored
    reopened.close()


def test_corruption_deletes_later_unflushed_segments(tmp_path: Path, clock: FakeClock) -> None:
    """Garbage in a recovered segment truncates it there and drops every later segment."""
    path = str(tmp_path / "t-0")
    log, positions = fill(path, 120, clock)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    log.abandon()
    victim = bases[1] + 2
    seg = os.path.join(path, f"{bases[1]:020d}.log")
    with open(seg, "r+b") as f:
        f.seek(positions[victim] + 30)
        f.write(b"\xff\xfe\xfd")
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert [s.base_offset for s in reopened.segments] == bases[:2]
    assert reopened.log_end_offset == victim
    assert [r[0] for r in decode(read_all(reopened))] == list(range(victim))
    assert not os.path.exists(os.path.join(path, f"{bases[2]:020d}.log"))
    reopened.close()


def test_flipped_byte_in_an_older_flushed_segment(tmp_path: Path, clock: FakeClock) -> None:
    """Below the recovery point nothing is re-validated on open (as in Kafka): the
    damaged batch is served as stored and fails the reader's CRC check; the batches
    around it, later appends and reads stay correct. Only a recovery from before
    that segment (recovery point checkpoint lost) truncates the log at it."""
    path = str(tmp_path / "t-0")
    log, positions = fill(path, 120, clock)
    log.flush()
    log.append(simple_batch(1))
    end = log.log_end_offset
    log.abandon()
    victim = 3  # in the first segment, well below the recovery point
    with open(os.path.join(path, "00000000000000000000.log"), "r+b") as f:
        f.seek(positions[victim] + 70)  # inside the record, after the header
        byte = f.read(1)
        f.seek(positions[victim] + 70)
        f.write(bytes([byte[0] ^ 0x01]))

    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert reopened.log_end_offset == end
    damaged = reopened.read(victim, 1).to_bytes()
    with pytest.raises(CorruptRecordError):
        verify_crc(damaged)
    verify_crc(reopened.read(victim - 1, 1).to_bytes())
    verify_crc(reopened.read(victim + 1, 1).to_bytes())
    assert reopened.append(simple_batch(1)).base_offset == end
    reopened.abandon()

    os.unlink(os.path.join(path, "recovery-point-offset-checkpoint"))
    recovered = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert recovered.log_end_offset == victim
    recovered.close()


@pytest.mark.parametrize("kind", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "empty"])
def test_damaged_index_files_are_rebuilt(
    tmp_path: Path, clock: FakeClock, kind: str, damage: str
) -> None:
    path = str(tmp_path / "t-0")
    log, _ = fill(path, 120, clock)
    before = read_all(log)
    indexes = index_snapshot(log)
    log.close()
    target = os.path.join(path, "00000000000000000000" + kind)
    size = os.path.getsize(target)
    assert size > 24
    if damage == "garbage":
        rng = random.Random(7)
        with open(target, "r+b") as f:
            f.seek(size // 3)
            f.write(bytes(rng.getrandbits(8) for _ in range(size // 3)))
    elif damage == "truncated":
        os.truncate(target, size - 5)
    elif damage == "missing":
        os.unlink(target)
    else:
        os.truncate(target, 0)
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert reopened.rebuilt_indexes >= 1
    assert read_all(reopened) == before
    for offset in range(reopened.log_end_offset):
        assert decode(reopened.read(offset, 1).to_bytes())[0][0] == offset
    assert reopened.offset_for_timestamp(1050) is not None
    assert index_snapshot(reopened) == indexes
    reopened.close()


def test_index_entry_pointing_to_the_wrong_batch_is_detected(
    tmp_path: Path, clock: FakeClock
) -> None:
    """An entry that passes the sanity checks but lies is caught at lookup and rebuilt."""
    path = str(tmp_path / "t-0")
    log, positions = fill(path, 40, clock)
    indexes = index_snapshot(log)
    log.close()
    entries = indexes[0][1]
    index_path = os.path.join(path, "00000000000000000000.index")
    import struct

    # Move the middle entry's position by one byte: still increasing, but wrong.
    middle = len(entries) // 2
    rel, pos = entries[middle]
    assert pos == positions[rel]
    wrong = pos + 1
    with open(index_path, "r+b") as f:
        f.seek(middle * 8)
        f.write(struct.pack(">ii", rel, wrong))
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    for offset in range(40):
        assert decode(reopened.read(offset, 1).to_bytes())[0][0] == offset
    assert index_snapshot(reopened) == indexes
    reopened.close()


def test_corrupt_snapshot_and_txn_index_are_rebuilt_from_the_log(
    tmp_path: Path, clock: FakeClock
) -> None:
    from tests.backends.helpers import control_batch

    path = str(tmp_path / "t-0")
    log = DiskLog(path, "t", 0, CONFIG, clock=clock)
    log.append(
        make_batch(
            [(1, b"a", b"1")], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    log.append(control_batch(3, 0, commit=False, timestamp=2))
    log.append(make_batch([(1, b"a", b"1")], producer_id=3, producer_epoch=0, base_sequence=1))
    aborted = log.aborted_transactions(0, 10)
    log.close()
    snapshot = os.path.join(path, "00000000000000000003.snapshot")
    assert os.path.exists(snapshot)
    with open(snapshot, "r+b") as f:
        f.seek(12)
        f.write(b"\x00\x01\x02")
    reopened = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert reopened.aborted_transactions(0, 10) == aborted
    assert reopened.producer_state().producers[3].last_sequence == 1
    assert not os.path.exists(snapshot)
    reopened.close()

    with open(os.path.join(path, "00000000000000000000.txnindex"), "ab") as f:
        f.write(b"\x01")
    again = DiskLog(path, "t", 0, CONFIG, clock=clock)
    assert again.aborted_transactions(0, 10) == aborted
    assert again.producer_state().producers[3].last_sequence == 1
    again.close()
    assert os.path.getsize(os.path.join(path, "00000000000000000000.txnindex")) == 34


def test_corrupt_append_input_is_not_written(tmp_path: Path, clock: FakeClock) -> None:
    path = str(tmp_path / "t-0")
    log = DiskLog(path, "t", 0, CONFIG, clock=clock)
    bad = bytearray(simple_batch(2))
    bad[70] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        log.append(bytes(bad))
    assert log.segments[0].size == 0
    segment = log.segments[0]
    assert isinstance(segment, FileSegment)
    log.close()
