"""Closing and reopening many disk logs (#30): several at a time, each one's
clean-shutdown marker written after its flush and durably removed when it opens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkette.backends.disk import DiskLog, DiskStorage
from tests.backends.helpers import FakeClock, simple_batch
from tests.backends.power_loss import counting_syncs

BATCH = simple_batch(3)
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


def test_storage_closes_and_opens_many_logs_each_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
