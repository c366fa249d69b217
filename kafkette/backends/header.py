"""A stored batch's header as a tuple: the backends' hot-path twin of ``BatchHeader``.

``kafkette.protocol.records.batch_header.BatchHeader`` is a frozen attrs
class; building one costs several microseconds, which matters when a log
appends or scans tens of thousands of batches a second. :class:`StoredHeader`
has the same fields and properties as a :class:`typing.NamedTuple`, built from
the same ``struct`` layout in a fraction of that.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkette.protocol.errors import CorruptRecordError, TruncatedError
from kafkette.protocol.records.batch_header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    batch_crc,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


class StoredHeader(NamedTuple):
    """The header fields of one magic 2 record batch (see ``BatchHeader``)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, log overhead included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record (wrapping at 2**31), or -1."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


_make = StoredHeader._make
_unpack = _HEADER.unpack_from


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> StoredHeader:
    """The magic 2 header at ``pos``; its declared length must cover a whole header.

    Raises :class:`TruncatedError` when fewer than 61 bytes remain and
    :class:`CorruptRecordError` for another magic or a too small length.
    """
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise TruncatedError(f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes")
    header = _make(_unpack(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"expected a magic 2 record batch, found magic {header.magic}")
    if header.batch_length < _MIN_LENGTH:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    return header


def verify_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> StoredHeader:
    """:func:`parse_header` plus: the batch fits in ``buf`` and its CRC matches."""
    header = parse_header(buf, pos)
    size = LOG_OVERHEAD + header.batch_length
    if pos + size > len(buf):
        raise TruncatedError(f"record batch of {size} bytes runs past the end of the buffer")
    if batch_crc(buf, pos, size) != header.crc:
        raise CorruptRecordError(f"record batch at offset {header.base_offset} fails its CRC")
    return header
