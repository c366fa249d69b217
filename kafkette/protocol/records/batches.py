"""Walking a buffer of concatenated batches of any magic (a fetch response, a log segment)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kafkette.protocol.errors import CorruptRecordError, TruncatedError
from kafkette.protocol.records.batch_header import LOG_OVERHEAD, MAGIC_OFFSET
from kafkette.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED
from kafkette.protocol.records.default_records import Buffer, RecordBatch
from kafkette.protocol.records.legacy_records import LegacyBatch

_LENGTH = struct.Struct(">i")


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
    # batch_header.iter_entries inlined: one generator per fetch instead of two, as the
    # consumer walks batches of 16 KiB and less one by one.
    from_buffer = RecordBatch.from_buffer
    unpack_length = _LENGTH.unpack_from
    end = len(buf)
    pos = start
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if allow_partial:
                return
            raise TruncatedError(f"{end - pos} trailing bytes are too few for a batch header")
        (length,) = unpack_length(buf, pos + 8)
        if length < 0:
            raise CorruptRecordError(f"negative batch length {length} at position {pos}")
        size = LOG_OVERHEAD + length
        if pos + size > end:
            if allow_partial:
                return
            raise TruncatedError(
                f"batch at position {pos} declares {size} bytes, {end - pos} available"
            )
        if size <= MAGIC_OFFSET:
            raise CorruptRecordError(f"entry of {size} bytes at position {pos} is too short")
        magic = buf[pos + MAGIC_OFFSET]
        if magic == 2:
            yield from_buffer(buf, pos, check_crc=check_crc, max_decompressed=max_decompressed)
        elif magic in (0, 1):
            # A legacy entry is parsed within its declared size only.
            view = memoryview(buf)[pos : pos + size]
            yield LegacyBatch.from_buffer(
                view, 0, check_crc=check_crc, max_decompressed=max_decompressed
            )
        else:
            raise CorruptRecordError(f"unknown magic {magic} at position {pos}")
        pos += size
