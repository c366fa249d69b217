"""Retention in steps on a disk log (#30): the segments go at once, the new log
start's snapshot and checkpoint are written in the blocking work it yields."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.disk.checkpoint import read_checkpoint
from tests.backends.helpers import FakeClock, simple_batch
from tests.backends.power_loss import counting_syncs

BATCH = simple_batch(3)
CONFIG = LogConfig(segment_bytes=2 * len(BATCH), retention_bytes=2 * len(BATCH))


def test_retention_steps_sync_only_in_their_work(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    log = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    for _ in range(21):
        log.append(BATCH)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    steps = log.retention_steps()
    with counting_syncs(monkeypatch) as calls:
        work = next(steps)
    assert [c for c in calls if c.startswith("fsync")] == []
    assert log.log_start_offset == 60 and len(log.segments) == 1
    assert work is not None
    with counting_syncs(monkeypatch) as calls:
        work()
    assert f"fsync {path}" in calls
    with pytest.raises(StopIteration) as done:
        next(steps)
    assert done.value.value == 10
    assert read_checkpoint(str(path / "log-start-offset-checkpoint")) == [[60]]
    log.abandon()  # a crash: what the work wrote is what the next open finds
    reopened = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (60, 63)
    reopened.close()


def test_snapshots_are_written_under_the_files_lock(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A roll's snapshot and a retention pass's work (in a worker thread) may write the
    same snapshot file: both write it holding the log's file lock."""
    import kafkette.backends.disk.log as disk_log

    log = DiskLog(str(tmp_path / "t-0"), "t", 0, CONFIG, clock=clock)
    real = disk_log.write_atomically
    held: list[bool] = []

    def write_atomically(path: str, data: bytes, **kwargs: bool) -> None:
        if path.endswith(".snapshot"):
            held.append(log._files_lock._is_owned())  # type: ignore[attr-defined]
        real(path, data, **kwargs)

    monkeypatch.setattr(disk_log, "write_atomically", write_atomically)
    for _ in range(5):
        log.append(BATCH)  # two rolls
    log.update_high_watermark(log.log_end_offset)
    for work in log.retention_steps():
        if work is not None:
            work()
    assert held == [True, True, True]
    log.close()
