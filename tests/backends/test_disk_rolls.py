"""A disk log's roll, on the append path, waits for no fsync (#30): the sealed
segment's indexes and the producer snapshot are made durable by the next flush."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from tests.backends.helpers import FakeClock, make_batch, read_all, simple_batch
from tests.backends.power_loss import PowerLoss, counting_syncs

BATCH = simple_batch(3)
CONFIG = LogConfig(segment_bytes=6 * len(BATCH), index_interval_bytes=len(BATCH))


def test_a_roll_syncs_nothing_and_the_next_flush_syncs_what_it_wrote(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t-0"
    log = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    for _ in range(4):
        log.append(BATCH)
    log.flush()  # the active segment's index files exist and are open
    with counting_syncs(monkeypatch) as calls:
        for _ in range(3):
            log.append(BATCH)  # the third one rolls
    assert len(log.segments) == 2
    assert [c for c in calls if c.startswith("fsync")] == []
    with counting_syncs(monkeypatch) as calls:
        log.flush()
    synced = {c.split()[1].rsplit("/", 1)[1] for c in calls if c.startswith("fsync")}
    first = "00000000000000000000"
    assert {f"{first}.index", "00000000000000000018.snapshot"} <= synced
    log.close()
    reopened = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    assert reopened.rebuilt_indexes == 0
    assert reopened.log_end_offset == 21
    reopened.close()


@pytest.mark.parametrize("seed", range(20))
def test_a_power_loss_after_unsynced_rolls_leaves_a_readable_log(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Snapshots written at rolls and never synced may come back cut short: the log
    opens, keeps what was flushed and rebuilds its producer state."""
    path = tmp_path / "t-0"
    power = PowerLoss(monkeypatch)
    log = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    for n in range(8):
        records = [(1000 + i, b"k%d" % i, b"v") for i in range(3)]
        log.append(make_batch(records, producer_id=7, producer_epoch=0, base_sequence=3 * n))
    log.flush()
    flushed = log.log_end_offset
    for _ in range(14):
        log.append(BATCH)
    log.abandon()
    power.strike(str(path), random.Random(seed))
    reopened = DiskLog(str(path), "t", 0, CONFIG, clock=clock)
    assert reopened.log_end_offset >= flushed
    assert len(read_all(reopened)) >= 1
    assert 7 in reopened.producer_state().producers
    reopened.close()
