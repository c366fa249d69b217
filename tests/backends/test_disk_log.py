"""DiskLog specifics: layout, reopening, index files, checkpoints, storage."""

from __future__ import annotations

import os
from pathlib import Path

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog, DiskStorage
from kafkette.backends.disk.segment import FileSegment
from kafkette.backends.types import AbortedTxn
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot, segment_files
from tests.backends.helpers import (
    FakeClock,
    control_batch,
    decode_headers,
    make_batch,
    read_all,
    simple_batch,
)

BATCH = simple_batch(3)


def open_log(path: Path, clock: FakeClock, **settings: object) -> DiskLog:
    return DiskLog(str(path), "t", 0, LogConfig(**settings), clock=clock)  # type: ignore[arg-type]


def test_directory_layout(tmp_path: Path, clock: FakeClock) -> None:
    """Segments are named by 20-digit base offsets, with Kafka's companion files."""
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=2 * len(BATCH), index_interval_bytes=0)
    for _ in range(5):
        log.append(BATCH, leader_epoch=1)
    log.flush()
    files = segment_files(str(path))
    for base in (0, 6, 12):
        assert f"{base:020d}.log" in files
    for base in (0, 6):
        assert f"{base:020d}.index" in files
        assert f"{base:020d}.timeindex" in files
    # The active segment holds one batch, so no index entry yet: its files come with it.
    assert not {"00000000000000000012.index", "00000000000000000012.timeindex"} & set(files)
    assert "00000000000000000006.snapshot" in files
    assert "00000000000000000012.snapshot" in files
    assert "leader-epoch-checkpoint" in files
    assert (path / "recovery-point-offset-checkpoint").read_text() == "0\n1\n15\n"
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    assert "clean-shutdown" not in files
    log.close()
    assert "clean-shutdown" in segment_files(str(path))
    assert (path / "00000000000000000000.log").stat().st_size == 2 * len(BATCH)


def test_offset_index_entries_follow_index_interval(tmp_path: Path, clock: FakeClock) -> None:
    """One entry for the first batch after more than index.interval.bytes."""
    log = open_log(tmp_path / "t-0", clock, index_interval_bytes=2 * len(BATCH))
    for _ in range(8):
        log.append(BATCH)
    segment = log.segments[0]
    assert isinstance(segment, FileSegment)
    size = len(BATCH)
    assert segment.index.entries() == [(9, 3 * size), (18, 6 * size)]
    assert index_snapshot(log) == rebuilt_index_snapshot(log)
    # Every offset is found through the index.
    for offset in range(24):
        found = segment.locate(offset)
        assert found is not None and found[0] == (offset // 3) * size
    log.close()


def test_clean_reopen_restores_everything(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    settings = {"segment_bytes": 3 * len(BATCH), "index_interval_bytes": 10}
    log = open_log(path, clock, **settings)
    for i in range(7):
        log.append(simple_batch(3, timestamp=1000 * i), leader_epoch=i // 3)
    log.append(
        make_batch(
            [(1, b"a", b"1")], producer_id=5, producer_epoch=1, base_sequence=0, transactional=True
        )
    )
    log.append(control_batch(5, 1, commit=False, timestamp=9000))
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(4)
    before = read_all(log)
    indexes = index_snapshot(log)
    log.close()

    reopened = open_log(path, clock, **settings)
    assert reopened.rebuilt_indexes == 0
    assert reopened.recovered_bytes_truncated == 0
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.high_watermark) == (
        4,
        23,
        23,
    )
    assert read_all(reopened) == before
    assert index_snapshot(reopened) == indexes
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epochs] == [(0, 4), (1, 9), (2, 18)]
    assert reopened.aborted_transactions(0, 100) == [AbortedTxn(5, 21, 22, 23)]
    entry = reopened.producer_state().producers[5]
    assert (entry.producer_epoch, entry.last_sequence, entry.txn_first_offset) == (1, 0, -1)
    assert reopened.offset_for_timestamp(4500) is not None
    assert reopened.append(BATCH).base_offset == 23
    assert index_snapshot(reopened) == rebuilt_index_snapshot(reopened)
    reopened.close()


def test_unclean_reopen_recovers_unflushed_tail(tmp_path: Path, clock: FakeClock) -> None:
    """Without the clean-shutdown marker, segments from the recovery point are re-validated."""
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=3 * len(BATCH), index_interval_bytes=10)
    for _ in range(4):
        log.append(BATCH)
    log.flush()
    for _ in range(4):
        log.append(BATCH)
    before = read_all(log)
    log.abandon()
    reopened = open_log(path, clock, segment_bytes=3 * len(BATCH), index_interval_bytes=10)
    assert reopened.rebuilt_indexes == 2  # the segments holding and following the recovery point
    assert reopened.recovered_bytes_truncated == 0
    assert read_all(reopened) == before
    assert index_snapshot(reopened) == rebuilt_index_snapshot(reopened)
    assert reopened.recovery_point == 24
    reopened.close()


def test_missing_index_files_are_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=4 * len(BATCH), index_interval_bytes=0)
    for _ in range(10):
        log.append(BATCH)
    indexes = index_snapshot(log)
    before = read_all(log)
    log.close()
    for name in os.listdir(path):
        if name.endswith((".index", ".timeindex")):
            os.unlink(path / name)
    reopened = open_log(path, clock, segment_bytes=4 * len(BATCH), index_interval_bytes=0)
    assert reopened.rebuilt_indexes == 3
    assert index_snapshot(reopened) == indexes
    assert read_all(reopened) == before
    reopened.close()


def test_interrupted_compaction_swap_is_completed(tmp_path: Path, clock: FakeClock) -> None:
    """A ``.swap`` log replaces its segment on open; ``.cleaned`` leftovers are dropped."""
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=2 * len(BATCH))
    for _ in range(4):
        log.append(BATCH)
    log.close()
    replacement = simple_batch(1)
    (path / "00000000000000000000.log.swap").write_bytes(replacement)
    (path / "00000000000000000006.log.cleaned").write_bytes(b"junk")
    reopened = open_log(path, clock, segment_bytes=2 * len(BATCH))
    assert decode_headers(read_all(reopened)) == [(0, 0), (6, 8), (9, 11)]
    names = segment_files(str(path))
    assert not any(n.endswith((".swap", ".cleaned")) for n in names)
    reopened.close()


def test_storage_lists_opens_and_deletes(tmp_path: Path, clock: FakeClock) -> None:
    storage = DiskStorage(str(tmp_path), clock=clock)
    a = storage.open_log("orders-v1", 0)
    storage.open_log("orders-v1", 3)
    storage.open_log("b", 1)
    a.append(BATCH)
    assert storage.list_partitions() == [("b", 1), ("orders-v1", 0), ("orders-v1", 3)]
    storage.delete_log("orders-v1", 3)
    assert storage.list_partitions() == [("b", 1), ("orders-v1", 0)]
    storage.close()
    again = DiskStorage(str(tmp_path), clock=clock)
    logs = again.open_logs()
    assert sorted(logs) == [("b", 1), ("orders-v1", 0)]
    assert logs[("orders-v1", 0)].log_end_offset == 3
    again.close()


def test_memory_storage_keeps_logs_across_reopen() -> None:
    from kafkette.backends.memory import MemoryStorage

    storage = MemoryStorage()
    log = storage.open_log("t", 0)
    log.append(BATCH)
    log.close()
    assert storage.open_log("t", 0).log_end_offset == 3
    assert storage.list_partitions() == [("t", 0)]
    storage.delete_log("t", 0)
    assert storage.list_partitions() == []
    assert storage.open_log("t", 0).log_end_offset == 0


def test_write_buffer_gathers_appends(tmp_path: Path, clock: FakeClock) -> None:
    """Buffered appends reach the file when the next one would not fit, when read, on
    tick, flush and close; a crash (abandon) loses what was still buffered."""
    path = tmp_path / "t-0"
    log = DiskLog(str(path), "t", 0, LogConfig(), clock=clock, write_buffer_bytes=3 * len(BATCH))
    segment_file = path / "00000000000000000000.log"
    log.append(BATCH)
    log.append(BATCH)
    log.append(BATCH)
    assert segment_file.stat().st_size == 0
    log.append(BATCH)
    assert segment_file.stat().st_size == 3 * len(BATCH)
    assert decode_headers(log.read(9, 1000).to_bytes()) == [(9, 11)]
    assert segment_file.stat().st_size == 4 * len(BATCH)
    log.append(BATCH)
    log.tick()
    assert segment_file.stat().st_size == 5 * len(BATCH)
    log.append(BATCH)
    log.abandon()
    reopened = DiskLog(str(path), "t", 0, LogConfig(), clock=clock, write_buffer_bytes=100)
    assert reopened.log_end_offset == 15
    reopened.append(BATCH)
    reopened.close()
    assert segment_file.stat().st_size == 6 * len(BATCH)


def test_truncation_survives_reopening(tmp_path: Path, clock: FakeClock) -> None:
    """After truncate_to, clean and crashed reopenings agree with the truncated log."""
    path = tmp_path / "t-0"
    settings = {"segment_bytes": 2 * len(BATCH), "index_interval_bytes": 0}
    log = open_log(path, clock, **settings)
    for _ in range(7):
        log.append(BATCH)
    log.flush()
    log.truncate_to(9)
    assert log.recovery_point == 9
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert index_snapshot(log) == rebuilt_index_snapshot(log)
    before = read_all(log)
    log.abandon()
    crashed = open_log(path, clock, **settings)
    assert read_all(crashed) == before
    assert crashed.append(BATCH).base_offset == 9
    crashed.truncate_to(3)
    crashed.close()
    clean = open_log(path, clock, **settings)
    assert decode_headers(read_all(clean)) == [(0, 2)]
    assert index_snapshot(clean) == rebuilt_index_snapshot(clean)
    clean.close()


def test_sealed_segments_keep_only_their_log_file_open(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=len(BATCH), index_interval_bytes=0)
    for _ in range(20):
        log.append(BATCH)
    open_files = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            open_files.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    mine = [name for name in open_files if name.startswith(str(path))]
    assert sorted(mine) == sorted(str(path / f"{3 * i:020d}.log") for i in range(20))
    log.close()
