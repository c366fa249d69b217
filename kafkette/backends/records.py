"""Record-level work of the logs (keys, timestamps, compaction), on the protocol's record layer."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from kafkette.backends.header import StoredHeader
from kafkette.errors import CorruptMessageError, InvalidRecordError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.records import Record, RecordBatch, compress, parse_control_record
from kafkette.protocol.records.batch_header import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)
from kafkette.protocol.records.varint import encode_varint

MAX_DECOMPRESSED = 1 << 30
"""Decompression limit when the log itself reads records (keys for compaction)."""

_PREFIX = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_CRC = struct.Struct(">I")
_NULL = encode_varint(-1)

Buffer = bytes | bytearray | memoryview


def records_of(buf: Buffer, pos: int = 0) -> list[Record]:
    """The records of the stored batch at ``pos`` (its CRC is not checked again)."""
    try:
        return RecordBatch.from_buffer(
            buf, pos, check_crc=False, max_decompressed=MAX_DECOMPRESSED
        ).records()
    except ProtocolError as exc:
        raise CorruptMessageError(str(exc)) from exc


def control_marker(buf: Buffer, pos: int, header: StoredHeader) -> tuple[int, int]:
    """``(type, coordinator epoch)`` of a control batch's marker; (-1, -1) if unreadable."""
    try:
        records = RecordBatch.from_buffer(buf, pos, check_crc=False).records()
        if not records:
            return -1, -1
        marker = parse_control_record(records[0].key, records[0].value)
    except ProtocolError:
        return -1, -1
    return int(marker.type), marker.coordinator_epoch


def require_keys(buf: memoryview, batches: Sequence[tuple[int, StoredHeader]]) -> None:
    """Refuse keyless records, as a compacted log must (``InvalidRecordError``)."""
    for pos, header in batches:
        if header.is_control:
            continue
        for record in records_of(buf, pos):
            if record.key is None:
                raise InvalidRecordError(
                    "compacted topic cannot accept a record without a key "
                    f"(offset delta {record.offset - header.base_offset})"
                )


def first_record_at_or_after(
    buf: Buffer, header: StoredHeader, timestamp: int, min_offset: int
) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the batch's first record with a timestamp >= ``timestamp``
    and an offset >= ``min_offset``; a LogAppendTime batch gives every record its max timestamp.
    """
    for record in records_of(buf):
        if record.offset >= min_offset and record.timestamp >= timestamp:
            return record.timestamp, record.offset
    return None


def _encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    parts = [
        b"\x00",
        encode_varint(record.timestamp - base_timestamp),
        encode_varint(record.offset - base_offset),
    ]
    for field in (record.key, record.value):
        if field is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(field)))
            parts.append(field)
    parts.append(encode_varint(len(record.headers)))
    for name, value in record.headers:
        raw = name.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def rebuild_batch(
    header: StoredHeader, records: Sequence[Record], *, delete_horizon_ms: int | None
) -> bytes:
    """A batch like ``header``'s holding only ``records``, at their original offsets.

    Base offset, last offset delta, producer fields, base sequence, leader
    epoch and codec stay, so offsets and the producer's sequences survive
    compaction. With ``delete_horizon_ms`` the batch carries Kafka's delete
    horizon (attribute bit 6, stored as the base timestamp).
    """
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max((r.timestamp for r in records), default=-1)
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp if records else header.base_timestamp
    body = b"".join(_encode_record(r, header.base_offset, base_timestamp) for r in records)
    codec = attributes & COMPRESSION_MASK
    if codec and records:
        body = compress(codec, body)
    after_crc = _AFTER_CRC.pack(
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    crc = crc32c(body, crc32c(after_crc))
    prefix = _PREFIX.pack(
        header.base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
        header.partition_leader_epoch,
        2,
    )
    return b"".join((prefix, _CRC.pack(crc), after_crc, body))
