"""A child process appending through a DiskLog is killed with SIGKILL at random points.

After each kill the log is reopened (recovering) and must be a prefix of what
was appended, with valid CRCs, contiguous offsets, every flushed batch, the
producer's sequence state and indexes equal to freshly rebuilt ones.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.backends.disk import DiskLog
from kafkette.protocol.records.batch_header import iter_entries, verify_crc
from tests.backends.crash_child import (
    COMPACTED,
    CONFIG,
    KEYS,
    PRODUCER_ID,
    batch_for,
    key_for,
    run,
)
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import decode, read_all

KILLS = 50


def run_until_killed(
    directory: str, rng: random.Random, write_buffer: int = 0, compacted: bool = False
) -> tuple[int, int, int]:
    """Fork a child appending to the log, let it append a random number of batches,
    SIGKILL it.

    Returns (start offset, last reported appended end, last reported flushed end).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: append until killed, never return into pytest
        try:
            os.close(read_end)
            run(directory, write_end, write_buffer, compacted)
        finally:
            os._exit(1)
    os.close(write_end)
    target = rng.randrange(1, 80)
    buf = b""
    reports: list[tuple[bytes, int]] = []
    appends = 0
    killed = False
    try:
        while True:
            chunk = os.read(read_end, 4096)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 9:
                kind, value = buf[:1], struct.unpack(">q", buf[1:9])[0]
                buf = buf[9:]
                reports.append((kind, value))
                appends += kind == b"A"
            if not killed and appends >= target:
                os.kill(pid, signal.SIGKILL)
                killed = True
    finally:
        os.close(read_end)
        if not killed:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    start = next(v for k, v in reports if k == b"S")
    appended = max([v for k, v in reports if k == b"A"], default=start)
    flushed = max([v for k, v in reports if k == b"F"], default=0)
    return start, appended, flushed


def check_log(log: DiskLog, appended: int, flushed: int) -> None:
    end = log.log_end_offset
    assert end >= flushed, "a flushed batch was lost"
    assert end <= appended + 3, "the log holds more than was appended"
    data = read_all(log)
    offset = 0
    for pos, size in iter_entries(data):
        header = verify_crc(data, pos)
        assert header.base_offset == offset, "offsets are not contiguous"
        assert data[pos + 12 : pos + size] == batch_for(offset)[12:], "not a prefix of the appends"
        offset = header.next_offset
    assert offset == end
    if end:
        entry = log.producer_state().producers[PRODUCER_ID]
        assert entry.last_sequence == end - 1
        assert entry.last_offset == end - 1
    assert index_snapshot(log) == rebuilt_index_snapshot(log)
    for probe in range(0, end, 7):
        assert log.read(probe, 1).size > 0


@pytest.fixture
def crash_dir(tmp_path: Path) -> Iterator[str]:
    """A directory on tmpfs when there is one: a SIGKILL loses nothing the page cache
    holds, so what is tested does not depend on the device, and fsync latency
    spikes of a shared disk would only slow the test down."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm") as scratch:
            yield os.path.join(scratch, "crash-0")
    else:
        yield str(tmp_path / "crash-0")


@pytest.mark.parametrize(("write_buffer", "kills"), [(0, KILLS), (1500, 20)])
def test_sigkill_at_random_points(crash_dir: str, write_buffer: int, kills: int) -> None:
    """50 kills of the default DiskLog, 20 more of one gathering appends in a buffer."""
    rng = random.Random(20261121 + write_buffer)
    directory = crash_dir
    truncations = 0
    for _ in range(kills):
        start, appended, flushed = run_until_killed(directory, rng, write_buffer)
        log = DiskLog(directory, "crash", 0, CONFIG)
        truncations += log.recovered_bytes_truncated > 0
        assert log.log_end_offset >= start
        check_log(log, appended, flushed)
        if rng.random() < 0.5:
            log.close()
        else:
            log.abandon()
    reopened = DiskLog(directory, "crash", 0, CONFIG)
    assert reopened.log_end_offset > 0
    assert len(reopened.segments) > 1
    reopened.close()


def test_sigkill_while_compacting(crash_dir: str) -> None:
    """The child also compacts after every flush, so kills land inside compaction swaps:
    every stored record is the one appended at its offset, the last record of every
    key survives, the producer's sequence state is whole and no swap file is left."""
    rng = random.Random(7)
    directory = crash_dir
    for _ in range(15):
        _, appended, flushed = run_until_killed(directory, rng, compacted=True)
        log = DiskLog(directory, "crash", 0, COMPACTED)
        end = log.log_end_offset
        assert flushed <= end <= appended + 3
        assert not [n for n in os.listdir(directory) if n.endswith((".swap", ".cleaned"))]
        records = decode(read_all(log))
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets))
        for offset, timestamp, key, value in records:
            assert (timestamp, key, value) == (offset, key_for(offset, True), b"v" * (offset % 50))
        last_of_key = {offset % KEYS: offset for offset in range(end)}
        assert set(last_of_key.values()) <= set(offsets)
        if end:
            assert log.producer_state().producers[PRODUCER_ID].last_sequence == end - 1
        assert index_snapshot(log) == rebuilt_index_snapshot(log)
        if rng.random() < 0.5:
            log.close()
        else:
            log.abandon()
