"""Parsing and checking stored batch headers on the backends' hot paths.

The header type is the protocol's :class:`BatchHeader` (a named tuple, cheap
to build tens of thousands of times a second); :func:`parse_header` and
:func:`verify_batch` add the checks a log needs before it stores or trusts a
batch.
"""

from __future__ import annotations

from kafkette.protocol.errors import CorruptRecordError, TruncatedError
from kafkette.protocol.records.batch_header import (
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    batch_crc,
)

_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


StoredHeader = BatchHeader
"""The header of a stored batch: the protocol's :class:`BatchHeader` (a named tuple)."""


_make = StoredHeader._make
_unpack = HEADER_STRUCT.unpack_from


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
