"""The first writes to a new partition cost what later ones do (#30).

Creating a DiskLog makes its directory and one segment file and syncs nothing;
a new leader epoch is kept in memory, and its checkpoint written (durably) at
the next flush, before the recovery point passes it, or at close. A crash
before then loses the checkpoint, not the epoch: recovery re-derives it from
the batches after the recovery point, which carry it. Tested here against a
SIGKILL (the page cache survives: :meth:`DiskLog.abandon`) and a power loss
(what was not fsynced may go: :mod:`tests.backends.power_loss`).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog, DiskStorage
from kafkette.backends.disk.checkpoint import read_checkpoint
from kafkette.backends.memory import MemoryLog
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import FakeClock, decode, make_batch, read_all, simple_batch
from tests.backends.power_loss import PowerLoss, counting_syncs

BATCH = simple_batch(3)
SEGMENT = "00000000000000000000"


def open_log(path: Path | str, clock: FakeClock, **settings: object) -> DiskLog:
    return DiskLog(str(path), "t", 0, LogConfig(**settings), clock=clock)  # type: ignore[arg-type]


def epochs(log: DiskLog | MemoryLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epochs]


def test_a_new_log_and_its_first_appends_sync_nothing(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening makes the directory and the segment file, nothing else; the appends
    (a new epoch twice) only write the segment."""
    path = tmp_path / "t-0"
    with counting_syncs(monkeypatch) as calls:
        log = open_log(path, clock)
    assert calls == [f"mkdir {path}", f"create {path}/{SEGMENT}.log"]
    with counting_syncs(monkeypatch) as calls:
        log.append(BATCH, leader_epoch=0)
        log.append(BATCH, leader_epoch=0)
        log.append(BATCH, leader_epoch=3)
    assert calls == []
    assert epochs(log) == [(0, 0), (3, 6)]
    assert sorted(os.listdir(path)) == [f"{SEGMENT}.log"]
    log.close()
    reopened = open_log(path, clock)
    assert epochs(reopened) == [(0, 0), (3, 6)]
    assert reopened.rebuilt_indexes == 0
    reopened.close()


def test_a_flush_writes_the_epochs_before_the_recovery_point(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock)
    log.append(BATCH, leader_epoch=0)
    log.append(BATCH, leader_epoch=2)
    with counting_syncs(monkeypatch) as calls:
        log.flush()
    epochs_file = f"{path}/leader-epoch-checkpoint"
    point_file = f"{path}/recovery-point-offset-checkpoint"
    renamed = calls.index(f"rename {epochs_file}.tmp -> {epochs_file}")
    synced = calls.index(f"fsync {path}", renamed)
    assert synced < calls.index(f"rename {point_file}.tmp -> {point_file}")
    assert read_checkpoint(epochs_file) == [[0, 0], [2, 3]]
    # Unchanged checkpoints are not written again.
    log.append(BATCH, leader_epoch=2)
    with counting_syncs(monkeypatch) as calls:
        log.flush()
    assert not [c for c in calls if "leader-epoch" in c or "log-start" in c or "cleaner" in c]
    log.close()


def test_new_partitions_share_one_sync_of_their_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating 20 logs syncs nothing; their first flushes sync the storage root once."""
    root = tmp_path / "logs"
    storage = DiskStorage(str(root))
    with counting_syncs(monkeypatch) as calls:
        logs = [storage.open_log("t", i) for i in range(20)]
        for log in logs:
            log.append(BATCH, leader_epoch=0)
    assert not [c for c in calls if not c.startswith(("mkdir", "create"))]
    with counting_syncs(monkeypatch) as calls:
        for log in logs:
            log.flush()
    assert calls.count(f"fsync {root}") == 1
    assert all(calls.count(f"fsync {root}/t-{i}") == 1 for i in range(20))
    later = storage.open_log("t", 20)
    later.append(BATCH, leader_epoch=0)
    with counting_syncs(monkeypatch) as calls:
        later.flush()
        logs[0].append(BATCH, leader_epoch=0)
        logs[0].flush()
    assert calls.count(f"fsync {root}") == 1
    storage.close()


def test_epochs_never_written_come_back_after_a_kill(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=3 * len(BATCH))
    for epoch in (0, 0, 1, 1, 1, 4):
        log.append(BATCH, leader_epoch=epoch)
    assert epochs(log) == [(0, 0), (1, 6), (4, 15)]
    log.abandon()
    assert not (path / "leader-epoch-checkpoint").exists()
    reopened = open_log(path, clock, segment_bytes=3 * len(BATCH))
    assert epochs(reopened) == [(0, 0), (1, 6), (4, 15)]
    assert reopened.end_offset_for_epoch(1) == (1, 15)
    assert read_checkpoint(str(path / "leader-epoch-checkpoint")) == [[0, 0], [1, 6], [4, 15]]
    reopened.close()


def test_epochs_after_the_recovery_point_come_back_after_a_kill(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The checkpoint lags (written at the flush); the batches after the flush carry
    the rest."""
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=3 * len(BATCH))
    for epoch in (0, 1, 1):
        log.append(BATCH, leader_epoch=epoch)
    log.flush()
    for epoch in (1, 2, 2, 5):
        log.append(BATCH, leader_epoch=epoch)
    log.abandon()
    assert read_checkpoint(str(path / "leader-epoch-checkpoint")) == [[0, 0], [1, 3]]
    reopened = open_log(path, clock, segment_bytes=3 * len(BATCH))
    assert epochs(reopened) == [(0, 0), (1, 3), (2, 12), (5, 18)]
    reopened.close()


class Killed(Exception):
    """Raised where a test stops a log as a SIGKILL would."""


def test_epochs_are_written_before_compaction_removes_their_first_batch(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Epoch 1 starts with a record compaction removes: re-derived after a kill between
    the rewrite and the end of the pass, it would start at the next batch; the checkpoint
    is written before the rewrite instead."""
    path = tmp_path / "t-0"
    settings = {"cleanup_policy": ("compact",), "retention_ms": -1}
    log = open_log(path, clock, **settings)
    log.append(make_batch([(1, b"a", b"1")]), leader_epoch=0)
    log.append(make_batch([(2, b"b", b"1")]), leader_epoch=1)
    log.append(make_batch([(3, b"b", b"2")]), leader_epoch=1)
    log.roll()
    log.append(make_batch([(4, b"c", b"1")]), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)

    def killed(offset: int) -> None:
        raise Killed

    monkeypatch.setattr(log, "_set_first_dirty_offset", killed)
    with pytest.raises(Killed):
        log.compact(force=True)
    assert [o for o, *_ in decode(read_all(log))] == [0, 2, 3]
    log.abandon()
    reopened = open_log(path, clock, **settings)
    assert epochs(reopened) == [(0, 0), (1, 1)]
    reopened.close()


@contextlib.contextmanager
def scratch_directory() -> Iterator[str]:
    """On tmpfs when there is one (as the kill -9 tests): fsyncs there cost nothing, and
    what a crash leaves is modelled, not left to the device."""
    shm = "/dev/shm"
    with tempfile.TemporaryDirectory(
        dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    ) as scratch:
        yield scratch


CONFIG = LogConfig(segment_bytes=4 * len(BATCH), index_interval_bytes=100, retention_ms=-1)
operation = st.one_of(
    st.tuples(st.just("append"), st.sampled_from([0, 0, 0, 1, 3]), st.integers(1, 3)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("crash"), st.sampled_from(["kill", "power loss"])),
    st.tuples(st.just("reopen")),
)


@settings(max_examples=int(os.environ.get("KK_EXAMPLES", "60")), deadline=None)
@given(operations=st.lists(operation, max_size=40), seed=st.integers(0, 2**32))
def test_epochs_survive_crashes_anywhere(operations: list[tuple[object, ...]], seed: int) -> None:
    """Appends in rising leader epochs, flushes, rolls, truncations, clean reopens and
    crashes: a SIGKILL keeps every epoch; a power loss keeps the flushed records and every
    epoch of what survives. After each operation, the checkpoint on disk holds every
    epoch starting below the recovery point on disk (what recovery trusts it for).
    The MemoryLog doing the same (cut back to what survived a crash) is the reference."""
    rng = random.Random(seed)
    clock = FakeClock()
    with scratch_directory() as scratch, pytest.MonkeyPatch.context() as monkeypatch:
        path = os.path.join(scratch, "t-0")
        power = PowerLoss(monkeypatch)
        disk = DiskLog(path, "t", 0, CONFIG, clock=clock)
        memory = MemoryLog("t", 0, CONFIG, clock=clock)
        epoch = 0
        flushed = 0
        for op in operations:
            kind = op[0]
            if kind == "append":
                epoch += int(op[1])  # type: ignore[call-overload]
                batch = simple_batch(int(op[2]))  # type: ignore[call-overload]
                for log in (disk, memory):
                    log.append(batch, leader_epoch=epoch)
            elif kind == "flush":
                disk.flush()
                flushed = disk.log_end_offset
            elif kind == "roll":
                for log in (disk, memory):
                    log.roll()
            elif kind == "truncate":
                target = int(float(op[1]) * disk.log_end_offset)  # type: ignore[arg-type]
                for log in (disk, memory):
                    log.truncate_to(target)
                flushed = min(flushed, target)
            elif kind == "reopen":
                disk.close()
                disk = DiskLog(path, "t", 0, CONFIG, clock=clock)
                flushed = disk.log_end_offset
            else:
                live = epochs(disk)
                end = disk.log_end_offset
                disk.abandon()
                if op[1] == "power loss":
                    power.strike(path, rng)
                disk = DiskLog(path, "t", 0, CONFIG, clock=clock)
                assert flushed <= disk.log_end_offset <= end
                if op[1] == "kill":
                    assert disk.log_end_offset == end
                    assert epochs(disk) == live
                else:
                    assert epochs(disk) == [e for e in live if e[1] < disk.log_end_offset]
                if disk.log_end_offset < memory.log_end_offset:
                    memory.truncate_to(disk.log_end_offset)
                flushed = disk.log_end_offset
            assert read_all(disk) == read_all(memory), f"after {op}"
            assert epochs(disk) == epochs(memory), f"after {op}"
            assert index_snapshot(disk) == rebuilt_index_snapshot(disk), f"after {op}"
            point = read_checkpoint(os.path.join(path, "recovery-point-offset-checkpoint"))
            stored = read_checkpoint(os.path.join(path, "leader-epoch-checkpoint")) or []
            below = [list(e) for e in epochs(disk) if point and e[1] < point[0][0]]
            assert stored[: len(below)] == below, f"after {op}"
        disk.close()
