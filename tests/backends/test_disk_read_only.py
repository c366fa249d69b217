"""ReadOnlyDiskLog: what a read-write open would serve, without changing a byte on disk."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog, DiskStorage
from kafkette.backends.disk.read_only import ReadOnlyDiskLog
from kafkette.backends.log import Log
from kafkette.errors import PolicyViolationError
from tests.backends.helpers import FakeClock, control_batch, make_batch, read_all, simple_batch
from tests.dir_state import tree_state

CONFIG = LogConfig(index_interval_bytes=64, segment_bytes=1024)
LOG = "00000000000000000000.log"


def observe(log: Log) -> dict[str, Any]:
    """What readers of ``log`` can see."""
    end = log.log_end_offset
    return {
        "start": log.log_start_offset,
        "end": end,
        "stable": log.last_stable_offset,
        "batches": read_all(log),
        "aborted": log.aborted_transactions(0, end),
        "producers": log.producer_state().to_bytes(),
        "at_2000": log.offset_for_timestamp(2000),
        "max_timestamp": log.max_timestamp(),
    }


op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 5)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("open_txn"), st.integers(1, 3)),
    st.tuples(st.just("roll")),
)


def write(path: str, ops: list[tuple[Any, ...]], clock: FakeClock) -> DiskLog:
    log = DiskLog(path, "t", 0, CONFIG, clock=clock)
    pid = 0
    timestamp = 1000
    for step in ops:
        timestamp += 100
        if step[0] == "plain":
            log.append(simple_batch(step[1], timestamp=timestamp, size=40))
        elif step[0] == "roll":
            log.roll()
        else:
            pid += 1
            records = [(timestamp, b"k%d" % i, b"v" * 30) for i in range(step[1])]
            log.append(
                make_batch(
                    records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
                )
            )
            if step[0] == "txn":
                log.append(control_batch(pid, 0, commit=step[2], timestamp=timestamp))
    return log


def damage(path: str, how: str, log: DiskLog) -> None:
    """Leave ``log`` as a clean stop or a crash of kind ``how`` would."""
    sealed = [s.base_offset for s in log.segments[:-1]]
    active = log.segments[-1].base_offset
    if how == "clean":
        log.close()
        return
    log.abandon()  # a crash: no snapshot, no checkpoints, no clean-shutdown marker
    if how == "torn_tail":
        with open(os.path.join(path, f"{active:020d}.log"), "ab") as f:
            f.write(simple_batch(3)[:50])
    elif how == "bad_index" and sealed:
        # (a segment rolled and not flushed since may have no index file yet)
        index = os.path.join(path, f"{sealed[0]:020d}.index")
        with open(index, "r+b" if os.path.exists(index) else "wb") as f:
            f.write(b"\xff" * 8)
    elif how == "pending_swap" and sealed:
        # Compaction had committed the swap (the cleaned copy's .log is a .swap) when the
        # crash came; the old segment is still there (here: cut in half, to tell them apart).
        stem = os.path.join(path, f"{sealed[0]:020d}")
        shutil.copy(stem + ".log", stem + ".log.swap")
        os.truncate(stem + ".log", os.path.getsize(stem + ".log") // 2)


@settings(max_examples=50, deadline=None)
@given(
    ops=st.lists(op, min_size=0, max_size=25),
    how=st.sampled_from(["clean", "crash", "torn_tail", "bad_index", "pending_swap"]),
)
def test_read_only_open_serves_what_recovery_would_and_writes_nothing(
    ops: list[tuple[Any, ...]], how: str
) -> None:
    """After a clean stop or any crash, a read-only open serves exactly what a read-write
    open (recovering, truncating, rebuilding, finishing a swap) serves, and every file and
    directory under the log keeps its name, bytes and mtime."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t-0")
        # Always a sealed segment first, for the damage that needs one.
        damage(path, how, write(path, [("plain", 2), ("roll",), *ops], clock))
        before = tree_state(tmp)
        reader = ReadOnlyDiskLog(path, "t", 0, CONFIG, clock=clock)
        seen = observe(reader)
        assert reader.enforce_retention() == 0
        assert reader.compact(force=True) is None
        reader.tick()
        reader.flush()
        reader.close()
        assert tree_state(tmp) == before
        copy = os.path.join(tmp, "copy")
        shutil.copytree(path, copy)
        recovered = DiskLog(copy, "t", 0, CONFIG, clock=clock)
        assert observe(recovered) == seen
        recovered.close()


def test_writes_are_refused_naming_the_log(tmp_path: Path, clock: FakeClock) -> None:
    """Append, truncate, DeleteRecords, roll and delete raise PolicyViolationError; the
    log is unchanged."""
    path = str(tmp_path / "t-0")
    log = DiskLog(path, "t", 0, CONFIG, clock=clock)
    log.append(simple_batch(3))
    log.close()
    before = tree_state(str(tmp_path))
    reader = ReadOnlyDiskLog(path, "t", 0, CONFIG, clock=clock)
    message = f"its log in {path} is opened read-only"
    for what, action in [
        ("append to", lambda: reader.append(simple_batch(1))),
        ("truncate", lambda: reader.truncate_to(1)),
        ("delete records of", lambda: reader.delete_records_before(1)),
        ("roll", reader.roll),
        ("delete", reader.delete),
    ]:
        with pytest.raises(PolicyViolationError) as raised:
            action()
        assert raised.value.detail == f"cannot {what} t-0: {message}"
    assert (reader.log_start_offset, reader.log_end_offset) == (0, 3)
    reader.close()
    assert tree_state(str(tmp_path)) == before


def test_missing_directory_is_an_empty_log_and_stays_missing(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A partition whose directory is gone reads as empty; nothing is created."""
    reader = ReadOnlyDiskLog(str(tmp_path / "t-0"), "t", 0, CONFIG, clock=clock)
    assert (reader.log_start_offset, reader.log_end_offset, read_all(reader)) == (0, 0, b"")
    reader.close()
    assert os.listdir(tmp_path) == []


def test_read_only_storage_creates_nothing(tmp_path: Path, clock: FakeClock) -> None:
    """DiskStorage(read_only=True) lists and opens the partitions there, creates no root
    and refuses to delete a log."""
    root = str(tmp_path / "logs")
    assert DiskStorage(root, read_only=True).list_partitions() == []
    assert not os.path.exists(root)
    storage = DiskStorage(root, clock=clock, default_config=CONFIG)
    storage.open_log("a", 1).append(simple_batch(2))
    storage.close()
    before = tree_state(str(tmp_path))
    reader = DiskStorage(root, clock=clock, default_config=CONFIG, read_only=True)
    assert reader.list_partitions() == [("a", 1)]
    log = reader.open_log("a", 1)
    assert isinstance(log, ReadOnlyDiskLog)
    assert log.log_end_offset == 2
    with pytest.raises(PolicyViolationError) as raised:
        reader.delete_log("a", 1)
    assert raised.value.detail == f"cannot delete a-1: {root} is opened read-only"
    reader.close()
    assert tree_state(str(tmp_path)) == before
