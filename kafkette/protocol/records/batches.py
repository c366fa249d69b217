"""Walking a buffer of concatenated batches of any magic (a fetch response, a log segment)."""

from __future__ import annotations

from collections.abc import Iterator

from kafkette.protocol.errors import CorruptRecordError
from kafkette.protocol.records.batch_header import MAGIC_OFFSET, iter_entries
from kafkette.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED
from kafkette.protocol.records.default_records import Buffer, RecordBatch
from kafkette.protocol.records.legacy_records import LegacyBatch


def iter_batches(
    buf: Buffer,
    *,
    start: int = 0,
    allow_partial: bool = True,
    check_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[RecordBatch | LegacyBatch]:
    """Yield a view of each batch (magic 2) or legacy entry (magic 0 and 1) in ``buf``.

    A fetch response may end with a batch cut short by the broker's size
    limit: with ``allow_partial`` (the default) it is skipped, otherwise it
    raises :class:`TruncatedError`. Each batch's CRC is checked as it is
    reached unless ``check_crc`` is false. The walk begins at byte ``start``.
    """
    for pos, size in iter_entries(buf, start=start, allow_partial=allow_partial):
        if size <= MAGIC_OFFSET:
            raise CorruptRecordError(f"entry of {size} bytes at position {pos} is too short")
        magic = buf[pos + MAGIC_OFFSET]
        if magic == 2:
            yield RecordBatch.from_buffer(
                buf, pos, check_crc=check_crc, max_decompressed=max_decompressed
            )
        elif magic in (0, 1):
            # A legacy entry is parsed within its declared size only.
            view = memoryview(buf)[pos : pos + size]
            yield LegacyBatch.from_buffer(
                view, 0, check_crc=check_crc, max_decompressed=max_decompressed
            )
        else:
            raise CorruptRecordError(f"unknown magic {magic} at position {pos}")
