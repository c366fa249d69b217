"""The fixed layout of a stored batch, read and patched without decoding records.

Every entry of a Kafka log, whatever its magic, starts with the same twelve
bytes (the *log overhead*): ``baseOffset int64`` and ``batchLength int32``,
the length counting everything after those twelve bytes. The magic byte sits
at position 16 in all three formats. A magic 2 batch then continues::

    0  baseOffset int64            12 partitionLeaderEpoch int32
    8  batchLength int32           16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end)
    21 attributes int16            23 lastOffsetDelta int32
    27 baseTimestamp int64         35 maxTimestamp int64
    43 producerId int64            51 producerEpoch int16
    53 baseSequence int32          57 recordCount int32
    61 records...

The broker and the storage backends work at this level: they split a buffer
into batches, check CRCs, and rewrite the base offset (outside the CRC) or the
log-append time (inside it) without touching the records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from kafkette.protocol.errors import CorruptRecordError, TruncatedError

LOG_OVERHEAD = 12
"""Bytes before a batch's length-counted body: baseOffset int64 + batchLength int32."""

MAGIC_OFFSET = 16
"""Position of the magic byte, the same for magic 0, 1 and 2."""

RECORD_BATCH_OVERHEAD = 61
"""Size of a magic 2 batch header; its records start here."""

CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte magic 2 header, field by field, for ``unpack_from``."""
_LOG_OVERHEAD = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The header fields of one magic 2 record batch.

    A named tuple: logs build one per appended or scanned batch, and a tuple
    is several times cheaper to make than an attrs instance.
    """

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

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Read the header of the magic 2 batch starting at ``pos``."""
        if len(buf) - pos < RECORD_BATCH_OVERHEAD:
            raise TruncatedError(
                f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, "
                f"{max(len(buf) - pos, 0)} available"
            )
        header = cls._make(HEADER_STRUCT.unpack_from(buf, pos))
        if header.magic != 2:
            raise CorruptRecordError(f"expected a magic 2 record batch, found magic {header.magic}")
        return header

    @property
    def size(self) -> int:
        """Total bytes of this batch, log overhead included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
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
        """Sequence number of the batch's last record, or -1 without a sequence.

        Sequences wrap from ``2**31 - 1`` to 0, as in Kafka.
        """
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a magic 2 batch as stored in its header (attributes to end)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the magic 2 batch at ``pos`` and check its length and CRC.

    Raises :class:`CorruptRecordError` on a mismatch, :class:`TruncatedError`
    when the declared length runs past the buffer.
    """
    header = BatchHeader.parse(buf, pos)
    if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    if pos + header.size > len(buf):
        raise TruncatedError(f"record batch of {header.size} bytes runs past the end of the buffer")
    actual = batch_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} has CRC {actual:#010x}, "
            f"header says {header.crc:#010x}"
        )
    return header


def read_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Magic byte of the entry at ``pos`` (0, 1 or 2)."""
    if len(buf) - pos <= MAGIC_OFFSET:
        raise TruncatedError("entry too short to hold a magic byte")
    return buf[pos + MAGIC_OFFSET]


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite a batch's base offset in place (outside the CRC, so no recompute)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite a magic 2 batch's partition leader epoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark a magic 2 batch as LogAppendTime with ``timestamp_ms`` and recompute its CRC.

    As in Kafka, only the header changes: the timestamp type bit is set and
    ``maxTimestamp`` holds the append time; readers then report that time for
    every record of the batch.
    """
    (length,) = _INT32.unpack_from(buf, pos + 8)
    size = LOG_OVERHEAD + length
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, size))


def iter_entries(
    buf: bytes | bytearray | memoryview, *, start: int = 0, allow_partial: bool = False
) -> Iterator[tuple[int, int]]:
    """Yield ``(position, size)`` of each entry (batch or legacy message) in ``buf``.

    Only the log overhead is read; nothing is validated beyond the lengths.
    A fetch response may end with a partial batch (cut by ``max_bytes``): with
    ``allow_partial`` it is silently dropped, otherwise it raises
    :class:`TruncatedError`. The walk begins at byte ``start``.
    """
    end = len(buf)
    pos = start
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if allow_partial:
                return
            raise TruncatedError(f"{end - pos} trailing bytes are too few for a batch header")
        _, length = _LOG_OVERHEAD.unpack_from(buf, pos)
        if length < 0:
            raise CorruptRecordError(f"negative batch length {length} at position {pos}")
        size = LOG_OVERHEAD + length
        if pos + size > end:
            if allow_partial:
                return
            raise TruncatedError(
                f"batch at position {pos} declares {size} bytes, {end - pos} available"
            )
        yield pos, size
        pos += size
