"""Child process of the crash tests: appends to a DiskLog until it is killed.

The test forks and calls :func:`run` (no interpreter start-up per kill); it
also runs alone: ``python -m tests.backends.crash_child DIRECTORY``. Every batch's
content is a function of its offsets (see :func:`batch_for`), so the parent
can check what survived. Progress goes to a pipe as 9-byte reports: ``S`` +
log end offset after opening, ``A`` + log end offset after each append, ``F``
+ log end offset after each completed flush.
"""

from __future__ import annotations

import os
import struct
import sys

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.protocol.records import RecordBatchBuilder

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=200, retention_ms=-1)
COMPACTED = LogConfig(
    segment_bytes=1024, index_interval_bytes=200, cleanup_policy=("compact",), retention_ms=-1
)
PRODUCER_ID = 77
FLUSH_EVERY = 7
KEYS = 7


def key_for(offset: int, compacted: bool) -> bytes:
    return b"k%d" % (offset % KEYS) if compacted else b"%d" % offset


def batch_for(base_offset: int, compacted: bool = False) -> bytes:
    """The batch appended at ``base_offset``: 1 to 3 records, keyed by offset (or by
    offset modulo 7 for the compacted log), idempotent with sequences equal to offsets."""
    count = 1 + base_offset % 3
    builder = RecordBatchBuilder(
        producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=base_offset
    )
    for offset in range(base_offset, base_offset + count):
        builder.append(offset, key_for(offset, compacted), b"v" * (offset % 50))
    return builder.build()


def run(directory: str, out: int, write_buffer: int = 0, compacted: bool = False) -> None:
    """Append forever to the log in ``directory``, reporting progress to ``out``; the
    compacted log is also compacted after every flush."""
    config = COMPACTED if compacted else CONFIG
    log = DiskLog(directory, "crash", 0, config, write_buffer_bytes=write_buffer)
    os.write(out, b"S" + struct.pack(">q", log.log_end_offset))
    appended = 0
    while True:
        info = log.append(batch_for(log.log_end_offset, compacted))
        os.write(out, b"A" + struct.pack(">q", info.last_offset + 1))
        appended += 1
        if appended % FLUSH_EVERY == 0:
            log.flush()
            os.write(out, b"F" + struct.pack(">q", log.log_end_offset))
            if compacted:
                log.update_high_watermark(log.log_end_offset)
                log.compact(force=True)


if __name__ == "__main__":
    run(sys.argv[1], sys.stdout.fileno())
