"""Batch-level helpers for the logs: splitting appended buffers, control keys, empty headers."""

from __future__ import annotations

import struct

from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.types import BatchInfo
from kafkette.errors import CorruptMessageError, RecordListTooLargeError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    batch_crc,
)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


def split_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool, max_batch_bytes: int
) -> list[tuple[int, StoredHeader]]:
    """Positions and headers of the magic 2 batches filling ``buf`` exactly.

    Raises :class:`CorruptMessageError` for anything that is not a sequence of
    whole, valid magic 2 batches, and :class:`RecordListTooLargeError` for a
    batch over ``max_batch_bytes``.
    """
    result: list[tuple[int, StoredHeader]] = []
    pos = 0
    end = len(buf)
    if end == 0:
        raise CorruptMessageError("no record batch to append")
    while pos < end:
        try:
            header = parse_header(buf, pos)
        except ProtocolError as exc:
            raise CorruptMessageError(f"batch at position {pos}: {exc}") from exc
        size = LOG_OVERHEAD + header.batch_length
        if pos + size > end:
            raise CorruptMessageError(f"batch at position {pos} runs past the end of the buffer")
        if check_crc and batch_crc(buf, pos, size) != header.crc:
            raise CorruptMessageError(f"batch at position {pos} fails its CRC")
        if header.last_offset_delta < 0 or header.record_count < 0:
            raise CorruptMessageError(f"batch at position {pos} has negative counts")
        if size > max_batch_bytes:
            raise RecordListTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes ({max_batch_bytes})"
            )
        result.append((pos, header))
        pos += size
    return result


def batch_info(
    header: StoredHeader, control: tuple[int, int] | None = None, *, base_offset: int | None = None
) -> BatchInfo:
    """The producer-state view of one batch (``control`` = (type, coordinator epoch)),
    at ``base_offset`` when given (else the header's)."""
    ctype, cepoch = control if control is not None else (-1, -1)
    base = header.base_offset if base_offset is None else base_offset
    return BatchInfo(
        base_offset=base,
        last_offset=base + header.last_offset_delta,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        last_sequence=header.last_sequence,
        max_timestamp=header.max_timestamp,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        control_type=ctype,
        coordinator_epoch=cepoch,
    )


def empty_batch(buf: bytes | bytearray | memoryview, pos: int) -> bytes:
    """The header of the batch at ``pos`` with no records, as compaction keeps it.

    The offsets, timestamps and producer fields stay (so the producer's last
    sequence survives), the record count becomes 0, compression is cleared and
    the CRC recomputed.
    """
    out = bytearray(buf[pos : pos + RECORD_BATCH_OVERHEAD])
    _INT32.pack_into(out, 8, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
    (attributes,) = _INT16.unpack_from(out, ATTRIBUTES_OFFSET)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, attributes & ~COMPRESSION_MASK)
    _INT32.pack_into(out, RECORDS_COUNT_OFFSET, 0)
    _UINT32.pack_into(out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)
