"""The C accelerator of the append path (kafkette.backends._append) against pure Python.

The CRC-32C is the crc32c package's (no other implementation in kafkette's C);
``check_batch`` against the fast path's own checks; ``write_batch`` bytes, short
writes, EINTR and errors; and logs fed the same appends (good, damaged, control,
several batches, LogAppendTime and compacted logs) through the C path and the
Python path, compared call by call (AppendInfo or error) and at the end (stored
bytes, segments, indexes, producer state).

These tests need the extension built (``pip install -e .`` with a compiler);
without it the import below fails, loudly, rather than skipping. They use it
even under KAFKETTE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import signal
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkette.backends.disk.segment as disk_segment
import kafkette.backends.segmented as segmented
from kafkette.backends import _append
from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from kafkette.errors import KafkaStorageError
from kafkette.protocol.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_STRUCT,
    LAST_OFFSET_DELTA_OFFSET,
    RECORDS_COUNT_OFFSET,
    batch_crc,
)
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import FakeClock, control_batch, make_batch, read_all, simple_batch


@contextmanager
def append_path(name: str) -> Iterator[None]:
    """Appends in the block take the C path (``"c"``) or the pure-Python one."""
    with pytest.MonkeyPatch.context() as patch:
        c = name == "c"
        patch.setattr(segmented, "_check_batch", _append.check_batch if c else None)
        patch.setattr(disk_segment, "_write_batch", _append.write_batch if c else None)
        yield


def test_paths_are_switched() -> None:
    """The switch used below really changes what the log calls."""
    with append_path("c"):
        assert vars(segmented)["_check_batch"] is _append.check_batch
        assert vars(disk_segment)["_write_batch"] is _append.write_batch
    with append_path("python"):
        assert vars(segmented)["_check_batch"] is None
        assert vars(disk_segment)["_write_batch"] is None


# -- CRC-32C: the crc32c package's, and nobody else's --------------------------------------


def test_check_batch_checks_the_crc_of_every_size() -> None:
    """A batch's CRC is checked over attributes..end whatever its length: the right one is
    taken, any other refused (None: the general path then names the error)."""
    for count in (1, 2, 7, 50, 300):
        batch = bytearray(simple_batch(count, size=37))
        good = crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])
        assert struct.unpack_from(">I", batch, CRC_OFFSET)[0] == good
        assert _append.check_batch(batch, True) == HEADER_STRUCT.unpack_from(batch)
        for wrong in (good ^ 1, good ^ 0x80000000, 0):
            struct.pack_into(">I", batch, CRC_OFFSET, wrong)
            assert _append.check_batch(batch, True) is None
            assert _append.check_batch(batch, False) == HEADER_STRUCT.unpack_from(batch)


def test_one_crc32c_implementation() -> None:
    """No C file of kafkette computes CRC-32C itself (no polynomial, no crc32 instruction,
    no table): the crc32c package is the one implementation."""
    root = Path(segmented.__file__).resolve().parent.parent
    sources = sorted(root.rglob("*.c")) + sorted(root.rglob("*.h"))
    assert sources
    for source in sources:
        text = source.read_text().lower()
        for sign in ("0x82f63b78", "_mm_crc32", "crc32c_table", "slice_table"):
            assert sign not in text, (source, sign)


# -- check_batch ---------------------------------------------------------------------------


def python_check(data: bytes, check_crc: bool) -> tuple[int, ...] | None:
    """What the pure-Python fast path accepts (its conditions, restated)."""
    if len(data) < 61:
        return None
    fields = HEADER_STRUCT.unpack_from(data)
    if (
        fields[1] == len(data) - 12
        and fields[3] == 2
        and fields[6] >= 0
        and fields[12] >= 0
        and not fields[5] & CONTROL_MASK
        and (not check_crc or crc32c.crc32c(data[ATTRIBUTES_OFFSET:]) == fields[4])
    ):
        return fields
    return None


def with_int(batch: bytes, position: int, fmt: str, value: int, *, fix_crc: bool) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, position, value)
    if fix_crc:
        struct.pack_into(">I", out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)


MANGLES: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda b: b,
    "crc": lambda b: b[:-1] + bytes([b[-1] ^ 1]),
    "crc field": lambda b: with_int(b, CRC_OFFSET, ">I", 0, fix_crc=False),
    "trailing": lambda b: b + b"\x00",
    "truncated": lambda b: b[:-1],
    "header only": lambda b: b[:61],
    "short": lambda b: b[:60],
    "empty": lambda b: b"",
    "length": lambda b: with_int(b, 8, ">i", len(b) - 11, fix_crc=True),
    "magic 1": lambda b: b[:16] + b"\x01" + b[17:],
    "negative delta": lambda b: with_int(b, LAST_OFFSET_DELTA_OFFSET, ">i", -1, fix_crc=True),
    "negative count": lambda b: with_int(b, RECORDS_COUNT_OFFSET, ">i", -2, fix_crc=True),
    "control bit": lambda b: with_int(b, ATTRIBUTES_OFFSET, ">h", CONTROL_MASK, fix_crc=True),
    "two batches": lambda b: b + b,
    "offset and epoch": lambda b: with_int(
        with_int(b, 0, ">q", 77, fix_crc=False), 12, ">i", 3, fix_crc=False
    ),
}

record_lists = st.lists(
    st.tuples(
        st.integers(0, 2**40),
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=200)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    records=record_lists,
    producer=st.sampled_from([(-1, -1, -1), (5, 0, 0), (2**40, 7, 2**31 - 10)]),
    mangle=st.sampled_from(sorted(MANGLES)),
    check_crc=st.booleans(),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_check_batch_accepts_what_the_python_fast_path_accepts(
    records: list[tuple[int, bytes | None, bytes | None]],
    producer: tuple[int, int, int],
    mangle: str,
    check_crc: bool,
    kind: Callable[[bytes], Any],
) -> None:
    """Same header fields for what it takes, None for everything else."""
    pid, epoch, sequence = producer
    batch = make_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
    data = MANGLES[mangle](batch)
    expected = python_check(data, check_crc)
    assert _append.check_batch(kind(data), check_crc) == expected
    if mangle == "none":
        assert expected == HEADER_STRUCT.unpack_from(batch)


def test_check_batch_takes_a_sliced_view() -> None:
    batch = simple_batch(3)
    view = memoryview(b"xx" + batch + b"yy")[2:-2]
    assert _append.check_batch(view, True) == HEADER_STRUCT.unpack_from(batch)


def test_check_batch_needs_a_contiguous_buffer() -> None:
    with pytest.raises(BufferError):
        _append.check_batch(memoryview(simple_batch(3) * 2)[::2], True)
    with pytest.raises(TypeError):
        _append.check_batch(simple_batch(3))  # type: ignore[call-arg]


# -- write_batch ---------------------------------------------------------------------------


def stored_form(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">qii", out, 0, base_offset, len(batch) - 12, leader_epoch)
    return bytes(out)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_write_batch_writes_the_stored_form(tmp_path: Path, kind: Callable[[bytes], Any]) -> None:
    """New base offset, length and epoch, then the caller's bytes after their first 16."""
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    first, second = simple_batch(2), simple_batch(5, size=3000)
    try:
        _append.write_batch(fd, kind(first), 0, -1)
        _append.write_batch(fd, kind(second), 2**62 + 3, 2**31 - 1)
        _append.write_batch(fd, kind(first[:16]), 9, 0)  # the prefix alone
    finally:
        os.close(fd)
    assert path.read_bytes() == (
        stored_form(first, 0, -1)
        + stored_form(second, 2**62 + 3, 2**31 - 1)
        + struct.pack(">qii", 9, 4, 0)
    )


def test_write_batch_argument_errors(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(ValueError, match="a batch has 16 bytes to 2 GiB"):
            _append.write_batch(fd, b"x" * 15, 0, 0)
        with pytest.raises(OverflowError):
            _append.write_batch(fd, simple_batch(1), 0, 2**31)
        with pytest.raises(OverflowError):
            _append.write_batch(2**40, simple_batch(1), 0, 0)
    finally:
        os.close(fd)
    assert os.path.getsize(tmp_path / "f") == 0


@pytest.mark.parametrize("closed", [True, False])
def test_write_batch_raises_errno(tmp_path: Path, closed: bool) -> None:
    """OSError with the errno: a closed descriptor (or -1), a read-only one."""
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
    if closed:
        os.close(fd)
    try:
        for target in (fd, -1):
            with pytest.raises(OSError) as caught:
                _append.write_batch(target, simple_batch(1), 0, 0)
            assert caught.value.errno == errno.EBADF
    finally:
        if not closed:
            os.close(fd)


def test_write_batch_short_write_then_error() -> None:
    """A non-blocking pipe takes part of the batch, then refuses (EAGAIN): the part
    written is the start of the stored form, and the error is raised."""
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
        os.set_blocking(write_end, False)
        batch = simple_batch(8, size=1000)
        with pytest.raises(BlockingIOError):
            _append.write_batch(write_end, batch, 12, 1)
        assert os.read(read_end, 1 << 16) == stored_form(batch, 12, 1)[:4096]
    finally:
        os.close(read_end)
        os.close(write_end)


def test_write_batch_survives_signals_and_short_writes() -> None:
    """A blocking pipe drained by another thread while a timer interrupts the writer
    every 200 us: short writes and EINTR are retried (the signal handler runs) and
    every byte arrives once, in order."""
    batch = b"".join(simple_batch(40, size=1000) for _ in range(100))  # ~4 MB of batches
    batch = struct.pack(">qi", 0, len(batch) - 12) + batch[12:]
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    received: list[bytes] = []

    def drain() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while chunk := os.read(read_end, 3000):
            received.append(chunk)

    ticks = 0

    def tick(signum: int, frame: object) -> None:
        nonlocal ticks
        ticks += 1

    reader = threading.Thread(target=drain)
    previous = signal.signal(signal.SIGALRM, tick)
    reader.start()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
        _append.write_batch(write_end, batch, 5, 6)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
        os.close(write_end)
        reader.join()
        os.close(read_end)
    assert ticks > 0
    assert b"".join(received) == stored_form(batch, 5, 6)


# -- logs: the C path against the Python path ----------------------------------------------

SMALL = {"segment_bytes": 3000, "segment_ms": 400, "index_interval_bytes": 300}
CONFIGS = {
    "create time": LogConfig(**SMALL),  # type: ignore[arg-type]
    "log append time": LogConfig(message_timestamp_type="LogAppendTime", **SMALL),  # type: ignore[arg-type]
    "compacted": LogConfig(cleanup_policy=("compact",), **SMALL),  # type: ignore[arg-type]
    "full index": LogConfig(index_interval_bytes=1, segment_index_bytes=36),
    "flush every 3 messages": LogConfig(flush_messages=3, **SMALL),  # type: ignore[arg-type]
    "flush every 100 ms": LogConfig(flush_ms=100, **SMALL),  # type: ignore[arg-type]
}


def open_log(backend: str, directory: str, config: LogConfig) -> SegmentedLog:
    if backend == "memory":
        return MemoryLog("t", 0, config, clock=FakeClock())
    buffer = 1000 if backend == "disk-buffered" else 0
    return DiskLog(directory, "t", 0, config, clock=FakeClock(), write_buffer_bytes=buffer)


def outcome(log: SegmentedLog, data: bytes, epoch: int, check_crc: bool) -> object:
    """The AppendInfo, or the error raised (class and message)."""
    try:
        return log.append(data, leader_epoch=epoch, check_crc=check_crc)
    except Exception as exc:  # compared, not swallowed
        return type(exc), str(exc)


def state(log: SegmentedLog) -> dict[str, object]:
    log.update_high_watermark(log.log_end_offset)
    seen: dict[str, object] = {
        "bytes": read_all(log),
        "end": log.log_end_offset,
        "segments": [(s.base_offset, s.size, s.first_timestamp, s.is_full) for s in log.segments],
        "max timestamps": [(s.max_timestamp, s.offset_of_max_timestamp) for s in log.segments],
        "producers": log.producer_state().producers,
        "aborted": log.aborted_transactions(0, log.log_end_offset),
        "epochs": log.leader_epochs,
        "unflushed": log._unflushed_messages,  # what the flush policy counts
    }
    if isinstance(log, DiskLog):
        seen["recovery point"] = log.recovery_point
        seen["indexes"] = index_snapshot(log)
        assert seen["indexes"] == rebuilt_index_snapshot(log)
        seen["files"] = [
            os.path.getsize(s.log_path)  # type: ignore[attr-defined]
            for s in log.segments
        ]
    return seen


append_spec = st.tuples(
    st.sampled_from(["plain", "idempotent", "txn", "commit", "abort"]),
    st.integers(1, 6),  # records
    st.integers(0, 150),  # timestamp step
    st.sampled_from(["none"] * 6 + sorted(MANGLES)),
    st.sampled_from([-1, -1, 0, 1, 3]),  # leader epoch
    st.booleans(),  # check_crc
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield directory


@pytest.mark.parametrize("backend", ["disk", "disk-buffered", "memory"])
@settings(max_examples=30, deadline=None)
@given(config=st.sampled_from(sorted(CONFIGS)), plan=st.lists(append_spec, max_size=14))
def test_c_and_python_paths_agree(
    scratch: str, backend: str, config: str, plan: list[tuple[str, int, int, str, int, bool]]
) -> None:
    """Same AppendInfo or error for every call; same bytes, files, segments, indexes,
    producer state and epochs at the end."""
    logs = {
        name: open_log(backend, tempfile.mkdtemp(dir=scratch), CONFIGS[config])
        for name in ("c", "python")
    }
    now = 1_000
    sequences = {5: 0, 7: 0}
    try:
        for kind, count, step, mangle, epoch, check_crc in plan:
            now += step
            if kind in ("commit", "abort"):
                batch = control_batch(7, 0, commit=kind == "commit", timestamp=now)
            else:
                pid = {"plain": -1, "idempotent": 5, "txn": 7}[kind]
                batch = make_batch(
                    [(now + i, b"k%d" % i, b"v" * 30) for i in range(count)],
                    producer_id=pid,
                    producer_epoch=0 if pid >= 0 else -1,
                    base_sequence=sequences[pid] if pid >= 0 else -1,
                    transactional=kind == "txn",
                )
                if pid >= 0:
                    sequences[pid] += count
            data = MANGLES[mangle](batch)
            results = {}
            for name, log in logs.items():
                with append_path(name):
                    results[name] = outcome(log, data, epoch, check_crc)
            assert results["c"] == results["python"]
        assert state(logs["c"]) == state(logs["python"])
    finally:
        for log in logs.values():
            log.close()


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes fail with EFBIG (SIGXFSZ ignored meanwhile)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


@pytest.mark.parametrize("path", ["c", "python"])
def test_failed_write_leaves_no_torn_batch(tmp_path: Path, path: str) -> None:
    """A write that stops part way (file size limit: a short write, then EFBIG) raises
    KafkaStorageError, leaves the file as it was, and the next append lands right."""
    log = DiskLog(str(tmp_path), "t", 0, LogConfig(index_interval_bytes=1))
    first, second, third = simple_batch(2), simple_batch(30, size=200), simple_batch(3)
    with append_path(path):
        log.append(first)
        segment_file = log.segments[0].log_path  # type: ignore[attr-defined]
        with (
            file_size_limit(len(first) + 100),
            pytest.raises(KafkaStorageError, match="File too large"),
        ):
            log.append(second)
        assert os.path.getsize(segment_file) == len(first)
        assert log.log_end_offset == 2
        log.append(third)
    assert read_all(log) == stored_form(first, 0, -1) + stored_form(third, 2, -1)
    assert index_snapshot(log) == rebuilt_index_snapshot(log)
    log.close()


@pytest.mark.parametrize("path", ["c", "python"])
def test_append_after_close_is_a_storage_error(tmp_path: Path, path: str) -> None:
    """A write to the closed descriptor (-1) is an OSError turned into KafkaStorageError."""
    log = DiskLog(str(tmp_path), "t", 0)
    log.append(simple_batch(1))
    segment = log.segments[-1]
    segment.close()
    with append_path(path), pytest.raises(KafkaStorageError):
        log.append(simple_batch(1))
    assert log.log_end_offset == 1
