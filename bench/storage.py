"""Storage backend throughput against the physical limit of the same machine.

For 1 KiB records in 16 KiB and 1 MiB batches, measures:

- append MB/s of ``DiskLog.append`` (CRC check, offset assignment, segment
  write, indexes, producer bookkeeping) against a raw sequential ``os.write``
  of the same bytes in the same chunks to a plain file; also with
  ``check_crc=False``, as the broker calls it after validating the request,
  and with a 1 MiB ``write_buffer_bytes`` (appends gathered into 1 MiB writes);
- read MB/s of ``DiskLog.read`` with 1 MiB fetches, each slice materialised
  with ``LogSlice.to_bytes()`` (one ``pread``), against raw sequential
  ``os.pread`` of the same bytes in the same chunk sizes;
- ``MemoryLog`` append and read (no raw equivalent; for information).

Neither side fsyncs (Kafka's default leaves flushing to the OS). Raw and log
runs alternate and the best of ``--repeat`` rounds is kept for each, so both
see the same machine load. Targets: append >= 0.7x raw write, read >= 0.8x
raw read.

    python bench/storage.py [--total-mib 128] [--dir /tmp] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from kafkette.protocol.records import RecordBatchBuilder

RECORD_SIZE = 1024
FETCH_BYTES = 1 << 20
CONFIG = LogConfig(retention_ms=-1, max_message_bytes=2 << 20)
WRITE_BUFFER = 1 << 20


def make_batch(batch_bytes: int) -> bytes:
    """An uncompressed batch of 1 KiB records (key and value included) of about ``batch_bytes``."""
    builder = RecordBatchBuilder()
    payload = os.urandom(RECORD_SIZE - 20)
    for i in range(max(batch_bytes // RECORD_SIZE, 1)):
        builder.append(1_700_000_000_000 + i, b"key-%08d" % i, payload)
    return builder.build()


def raw_write(path: str, batch: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def raw_read(path: str, chunk: int, total: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    start = time.perf_counter()
    position = 0
    while position < total:
        position += len(os.pread(fd, chunk, position))
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def log_append(log: SegmentedLog, batch: bytes, count: int, *, check_crc: bool = True) -> float:
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch, check_crc=check_crc)
    return time.perf_counter() - start


def log_read(log: SegmentedLog, batch_size: int, records_per_batch: int) -> float:
    """Read the whole log with 1 MiB fetches (all batches are the same size)."""
    start = time.perf_counter()
    offset, end = 0, log.log_end_offset
    while offset < end:
        data = log.read(offset, FETCH_BYTES).to_bytes()
        offset += len(data) // batch_size * records_per_batch
    return time.perf_counter() - start


def bench(batch_bytes: int, total_mib: int, directory: str, repeat: int) -> dict[str, float]:
    batch = make_batch(batch_bytes)
    records = int.from_bytes(batch[57:61], "big")
    count = max(total_mib * (1 << 20) // len(batch), 1)
    size = count * len(batch)
    fetch_chunk = max(FETCH_BYTES // len(batch), 1) * len(batch)
    raw_path = os.path.join(directory, "raw.bin")
    log_dir = os.path.join(directory, "bench-0")
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, float("inf")), seconds)

    for _ in range(repeat):
        keep("raw write", raw_write(raw_path, batch, count))
        shutil.rmtree(log_dir, ignore_errors=True)
        log = DiskLog(log_dir, "bench", 0, CONFIG)
        keep("disk append", log_append(log, batch, count))
        log.abandon()
        shutil.rmtree(log_dir, ignore_errors=True)
        log = DiskLog(log_dir, "bench", 0, CONFIG)
        keep("disk append, no CRC", log_append(log, batch, count, check_crc=False))
        log.abandon()
        shutil.rmtree(log_dir, ignore_errors=True)
        log = DiskLog(log_dir, "bench", 0, CONFIG, write_buffer_bytes=WRITE_BUFFER)
        keep("disk append, buffered", log_append(log, batch, count, check_crc=False))
        log.flush()
        keep("raw read", raw_read(raw_path, fetch_chunk, size))
        keep("disk read", log_read(log, len(batch), records))
        log.abandon()
        memory = MemoryLog("bench", 0, CONFIG)
        keep("memory append", log_append(memory, batch, count))
        keep("memory read", log_read(memory, len(batch), records))
        del memory
    os.unlink(raw_path)
    shutil.rmtree(log_dir, ignore_errors=True)
    return {name: size / seconds / 1e6 for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="Storage backend throughput.")
    parser.add_argument("--total-mib", type=int, default=128)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for label, batch_bytes in (("16 KiB", 16 << 10), ("1 MiB", 1 << 20)):
            r = bench(batch_bytes, args.total_mib, directory, args.repeat)
            print(f"{label} batches of 1 KiB records, {args.total_mib} MiB, best of {args.repeat}:")
            print(
                f"  disk append {r['disk append']:6.0f} MB/s  raw write {r['raw write']:6.0f} MB/s"
                f"  ratio {r['disk append'] / r['raw write']:.2f} (target 0.70)"
            )
            print(
                f"  disk append {r['disk append, no CRC']:6.0f} MB/s  (check_crc=False: the broker"
                f" validated)  ratio {r['disk append, no CRC'] / r['raw write']:.2f}"
            )
            print(
                f"  disk append {r['disk append, buffered']:6.0f} MB/s  (check_crc=False,"
                f" write_buffer_bytes=1 MiB)"
                f"  ratio {r['disk append, buffered'] / r['raw write']:.2f}"
            )
            print(
                f"  disk read   {r['disk read']:6.0f} MB/s  raw read  {r['raw read']:6.0f} MB/s"
                f"  ratio {r['disk read'] / r['raw read']:.2f} (target 0.80)"
            )
            print(
                f"  memory append {r['memory append']:6.0f} MB/s"
                f"  memory read {r['memory read']:6.0f} MB/s"
            )


if __name__ == "__main__":
    main()
