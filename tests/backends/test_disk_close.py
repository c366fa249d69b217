"""Closing and reopening many disk logs (#30): several at a time, each one's
clean-shutdown marker written after its flush and durably removed when it opens;
where syncfs exists, with one sync of the file system per step for all of them."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog, DiskStorage, filesystem_sync
from kafkette.errors import KafkaStorageError
from tests.backends.helpers import FakeClock, decode, make_batch, read_all, simple_batch
from tests.backends.power_loss import PowerLoss, counting_syncs

BATCH = simple_batch(3)
SMALL_SEGMENTS = LogConfig(segment_bytes=2 * len(make_batch([(1000, b"k0", b"v")] * 3)))
MARKER = "clean-shutdown"


def test_a_clean_open_syncs_the_markers_removal(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker a crash brought back would let the next open skip the recovery of what
    was appended after this one."""
    path = tmp_path / "t-0"
    log = DiskLog(str(path), "t", 0, clock=clock)
    log.append(BATCH)
    log.close()
    assert (path / MARKER).exists()
    with counting_syncs(monkeypatch) as calls:
        reopened = DiskLog(str(path), "t", 0, clock=clock)
    assert not (path / MARKER).exists()
    assert f"fsync {path}" in calls
    assert reopened.log_end_offset == 3
    reopened.close()


@pytest.fixture(params=["together", "one by one"])
def closing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a storage closes many logs: with one sync of the file system per step
    (where syncfs exists, as here), or each log with its own fsyncs (elsewhere)."""
    assert filesystem_sync.available()
    if request.param == "one by one":
        monkeypatch.setattr(filesystem_sync, "_syncfs", None)
    return str(request.param)


def test_storage_closes_and_opens_many_logs_each_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closing: str
) -> None:
    """Every log gets its flush and marker, also when another fails to close (its error
    raised after); open_many gives the logs in the order asked."""
    storage = DiskStorage(str(tmp_path))
    logs = [storage.open_log("t", i) for i in range(40)]
    for i, log in enumerate(logs):
        for _ in range(i % 3 + 1):
            log.append(BATCH)

    def broken() -> None:
        raise OSError("disk gone")

    def broken_steps() -> Iterator[None]:
        yield from ()
        broken()

    if closing == "together":
        monkeypatch.setattr(logs[7], "close_in_steps", broken_steps)
    else:
        monkeypatch.setattr(logs[7], "close", broken)
    with pytest.raises(OSError, match="disk gone"):
        storage.close()
    marked = sorted(
        int(n.split("-")[1]) for n in os.listdir(tmp_path) if (tmp_path / n / MARKER).exists()
    )
    assert marked == [i for i in range(40) if i != 7]
    again = DiskStorage(str(tmp_path))
    opened = again.open_many([("t", i, None) for i in reversed(range(40))])
    assert [(log.partition, log.log_end_offset) for log in opened] == [
        (i, 3 * (i % 3 + 1)) for i in reversed(range(40))
    ]
    again.close()


def _fill(storage: DiskStorage, partitions: int) -> list[DiskLog]:
    """Logs of three segments, with idempotent batches of two leader epochs, a log
    start moved by DeleteRecords on every other one, flushed half-way."""
    logs = []
    for p in range(partitions):
        log = storage.open_log("t", p, SMALL_SEGMENTS)
        assert isinstance(log, DiskLog)
        for n in range(6):
            records = [(1000 + i, b"k%d" % i, b"v") for i in range(3)]
            batch = make_batch(records, producer_id=50 + p, producer_epoch=0, base_sequence=3 * n)
            log.append(batch, leader_epoch=0 if n < 3 else 4)
            if n == 2:
                log.flush()
        log.update_high_watermark(log.log_end_offset)
        if p % 2:
            log.delete_records_before(5)
        logs.append(log)
    return logs


def _state(log: DiskLog) -> tuple[Any, ...]:
    producers = log.producer_state().producers
    return (
        log.log_start_offset,
        log.log_end_offset,
        [(e.epoch, e.start_offset) for e in log.leader_epochs],
        {pid: producers[pid].last_sequence for pid in producers},
        read_all(log),
    )


def test_closing_together_syncs_the_file_system_three_times_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5,000 logs' fsyncs took 8-16 s to close; together they take three syncs of the
    file system, and every log opens again as it was, without recovery."""
    storage = DiskStorage(str(tmp_path))
    logs = _fill(storage, 6)
    before = [_state(log) for log in logs]
    syncs: list[str] = []
    real = filesystem_sync.sync_filesystem

    def sync_filesystem(path: str) -> None:
        syncs.append(path)
        real(path)

    monkeypatch.setattr(filesystem_sync, "sync_filesystem", sync_filesystem)
    with counting_syncs(monkeypatch) as calls:
        storage.close()
    assert [c for c in calls if c.startswith("fsync")] == []
    assert syncs == [str(tmp_path)] * 3
    again = DiskStorage(str(tmp_path))
    opened = again.open_many([("t", p, None) for p in range(6)])
    assert syncs == [str(tmp_path)] * 4  # the markers' removal, once for all
    for log, state in zip(opened, before, strict=True):
        assert isinstance(log, DiskLog)
        assert len(log.segments) == 3
        assert log.recovered_bytes_truncated == 0
        assert log.rebuilt_indexes == 0
        assert _state(log) == state
    with counting_syncs(monkeypatch) as calls:
        again.close()
    # Nothing changed since the open: only the markers are written.
    assert sorted(c for c in calls if not c.startswith("fsync")) == sorted(
        f"create {tmp_path / f't-{p}' / MARKER}" for p in range(6)
    )


@pytest.mark.parametrize("syncs", range(4))
@pytest.mark.parametrize("seed", range(6))
def test_a_power_loss_while_closing_together_never_leaves_a_marker_over_less(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncs: int, seed: int
) -> None:
    """The power goes after ``syncs`` of the close's three syncs of the file system:
    a log whose marker survives opens as it was closed, one without it recovers at
    least what it flushed, and after the first sync every byte is kept."""
    storage = DiskStorage(str(tmp_path))
    power = PowerLoss(monkeypatch)
    logs = _fill(storage, 4)
    before = [_state(log) for log in logs]
    flushed = [log.recovery_point for log in logs]
    power.syncs_left = syncs
    if syncs < 3:
        with pytest.raises(KafkaStorageError, match="power lost"):
            storage.close()
    else:
        storage.close()
    rng = random.Random(seed)
    for log, state, durable in zip(logs, before, flushed, strict=True):
        power.strike(log.directory, rng)
        marked = os.path.exists(os.path.join(log.directory, MARKER))
        if syncs != 2:  # (the markers are written after the second, synced by the third)
            assert marked == (syncs == 3)
        reopened = DiskLog(log.directory, "t", log.partition)
        if marked or syncs >= 1:
            assert _state(reopened) == state
        else:  # recovered: what was flushed is kept, and no checkpoint is torn
            assert reopened.log_end_offset >= durable
            kept = [(e, start) for e, start in state[2] if start < reopened.log_end_offset]
            assert _state(reopened)[2] == kept  # the leader epochs of what is kept
            assert reopened.log_start_offset == state[0]  # DeleteRecords' is not lost
        reopened.close()


def test_a_failed_sync_of_the_file_system_is_a_storage_error_and_marks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = DiskStorage(str(tmp_path))
    logs = _fill(storage, 3)
    before = [_state(log) for log in logs]

    def failing(path: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(filesystem_sync, "sync_filesystem", failing)
    with pytest.raises(KafkaStorageError, match=f"cannot sync the logs under {tmp_path}"):
        storage.close()
    assert not any((tmp_path / f"t-{p}" / MARKER).exists() for p in range(3))
    monkeypatch.undo()
    again = DiskStorage(str(tmp_path))
    opened = again.open_many([("t", p, None) for p in range(3)])
    assert [_state(log) for log in opened if isinstance(log, DiskLog)] == before
    again.close()


def test_a_new_log_closes_without_index_files_until_its_first_entry(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker stopping with thousands of new partitions created two empty index files
    for each (a create costs up to 1 ms here): an active segment with no index entry
    leaves them out, its next open finds it whole by scanning, and its first entry
    makes them."""
    path = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=2 * len(BATCH))
    log = DiskLog(str(path), "t", 0, config, clock=clock)
    log.append(BATCH, leader_epoch=0)
    with counting_syncs(monkeypatch) as calls:
        log.close()
    created = sorted(c.rsplit("/", 1)[1] for c in calls if c.startswith("create"))
    assert created == [
        "00000000000000000003.snapshot.tmp",
        "clean-shutdown.tmp",
        "leader-epoch-checkpoint.tmp",
        "recovery-point-offset-checkpoint.tmp",
    ]
    reopened = DiskLog(str(path), "t", 0, config, clock=clock)
    assert reopened.rebuilt_indexes == 0
    assert reopened.recovered_bytes_truncated == 0
    assert reopened.log_end_offset == 3
    assert reopened.offset_for_timestamp(0) is not None
    for _ in range(3):
        reopened.append(BATCH, leader_epoch=0)  # the third passes the index interval
    reopened.flush()
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= set(os.listdir(path))
    reopened.close()
    again = DiskLog(str(path), "t", 0, config, clock=clock)
    assert again.rebuilt_indexes == 0
    assert [decode_at(again, o) for o in range(12)] == [o // 3 * 3 for o in range(12)]
    again.close()


def decode_at(log: DiskLog, offset: int) -> int:
    """The offset of the first record a read at ``offset`` returns (its batch's base)."""
    return int(decode(log.read(offset, 1).to_bytes())[0][0])
