"""Magic 2 record batches: :class:`RecordBatchBuilder` writes them, :class:`RecordBatch` reads them.

A built batch is byte-for-byte what the Java client writes for the same
records (same varint choices, same header fields), so the CRC and the bytes
can be compared with other clients'. Reading is lazy: the header is parsed
when the view is made, the records (decompressed once, then parsed out of
that one buffer) on first iteration.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final, NoReturn, TypeVar

from crc32c import crc32c

from kafkette.protocol.errors import (
    CorruptRecordError,
    EncodeError,
    TruncatedError,
    UnsupportedCompressionError,
)
from kafkette.protocol.records import speedups
from kafkette.protocol.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
)
from kafkette.protocol.records.compression import (
    CODEC_NAMES,
    DEFAULT_MAX_DECOMPRESSED,
    NO_COMPRESSION,
    compress,
    decompress,
)
from kafkette.protocol.records.record import Header, Record
from kafkette.protocol.records.record_parser import iter_records, parse_segments
from kafkette.protocol.records.record_runs import Segment
from kafkette.protocol.records.varint import ENCODED, encode_varint

Buffer = bytes | bytearray | memoryview

_PREFIX: Final = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC: Final = struct.Struct(">I")
_AFTER_CRC: Final = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_INT32_MAX: Final = 0x7FFFFFFF
_BATCH_LENGTH: Final = struct.Struct(">i")
_BATCH_LENGTH_OFFSET: Final = 8
_NULL: Final = b"\x01"  # varint -1: a null key, value or header value
_TABLE_LIMIT: Final = len(ENCODED)
_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_tuple_new: Final = tuple.__new__
R = TypeVar("R", bound=tuple[object, ...])


class RecordBatchBuilder:
    """Accumulates records and writes one magic 2 batch.

    Offsets are consecutive: the n-th appended record has offset delta n.
    The batch's base timestamp is the first record's timestamp.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_compression",
        "_count",
        "_delete_horizon_ms",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_parts",
        "_producer_epoch",
        "_producer_id",
        "_size",
    )

    def __init__(
        self,
        *,
        compression: int = NO_COMPRESSION,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        log_append_time: bool = False,
        delete_horizon_ms: int | None = None,
    ) -> None:
        if compression not in CODEC_NAMES:
            raise UnsupportedCompressionError(f"unknown compression codec {compression}")
        attributes = compression
        if log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        if is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if is_control:
            attributes |= CONTROL_MASK
        if delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_MASK
        self._attributes = attributes
        self._compression = compression
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._delete_horizon_ms = delete_horizon_ms
        self._base_timestamp: int | None = delete_horizon_ms
        self._max_timestamp = -1
        self._count = 0
        self._parts: list[bytes] = []
        self._size = 0

    def __len__(self) -> int:
        """Number of records appended so far."""
        return self._count

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add a record; return its offset delta in the batch."""
        delta = self._count
        base = self._base_timestamp
        if base is None:
            base = self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        ts_delta = timestamp - base
        c_encode = speedups.encode_record
        if c_encode is not None and not headers:
            raw = c_encode(ts_delta, delta, key, value)
            if raw is not None:  # None: left to the Python code below
                self._parts.append(raw)
                if self._size >= 0:
                    self._size += len(raw)
                self._count = delta + 1
                return delta
        raw = encode_record(ts_delta, delta, key, value, headers)
        self._parts.append(raw)
        if self._size >= 0:
            self._size += len(raw)
        self._count = delta + 1
        return delta

    def size_in_bytes(self) -> int:
        """Size of the batch if built now, before compression."""
        if self._size < 0:
            self._size = sum(map(len, self._parts))
        return RECORD_BATCH_OVERHEAD + self._size

    def build(self) -> bytes:
        """The complete batch: header, (compressed) records, CRC-32C."""
        return bytes(self.build_mutable())

    def build_mutable(self) -> bytearray:
        """:meth:`build` into a bytearray, written once (a producer stamps its header later)."""
        parts = self._parts
        if self._compression != NO_COMPRESSION:
            try:
                records = b"".join(parts)
            except TypeError:
                raise EncodeError("record keys, values and header values must be bytes") from None
            parts = [compress(self._compression, records)]
        try:
            # the header's bytes, written below, then the records: one copy of each part
            batch = bytearray().join((_RESERVED, *parts))
        except TypeError:
            raise EncodeError("record keys, values and header values must be bytes") from None
        base_ts = self._base_timestamp if self._base_timestamp is not None else -1
        _write_header(
            batch,
            self._attributes,
            self._count,
            base_ts,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._base_offset,
            self._partition_leader_epoch,
        )
        return batch


RESERVED_HEADER: Final = RECORD_BATCH_OVERHEAD
"""Bytes a buffer given to :func:`build_reserved` keeps for the batch header at its front."""
_RESERVED: Final = bytes(RECORD_BATCH_OVERHEAD)


def build_reserved(
    buffer: bytearray,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: int = NO_COMPRESSION,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
) -> bytearray:
    """A batch of ``count`` records written after :data:`RESERVED_HEADER` bytes of
    ``buffer`` (as :func:`encode_record` writes them, offset deltas 0, 1, ... and
    timestamp deltas from ``base_timestamp``), the bytes :meth:`RecordBatchBuilder.build_mutable`
    makes of the same records.

    Without compression the header and CRC are written into ``buffer`` itself,
    which is returned: the records are not copied. With compression, a new
    bytearray holds the header and the compressed records.
    """
    if compression not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"unknown compression codec {compression}")
    if len(buffer) < RECORD_BATCH_OVERHEAD:
        raise EncodeError(f"a batch buffer of {len(buffer)} bytes has no room for its header")
    attributes = compression | (TRANSACTIONAL_MASK if is_transactional else 0)
    batch = buffer
    if compression != NO_COMPRESSION:
        with memoryview(buffer) as view:
            compressed = compress(compression, view[RECORD_BATCH_OVERHEAD:])
        batch = bytearray().join((_RESERVED, compressed))
    _write_header(
        batch,
        attributes,
        count,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
        NO_PARTITION_LEADER_EPOCH,
    )
    return batch


def _write_header(
    batch: bytearray,
    attributes: int,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    partition_leader_epoch: int,
) -> None:
    """Write the header (length, fields, CRC-32C of the rest) into the first
    :data:`RESERVED_HEADER` bytes of ``batch``, the records being after them."""
    try:
        _PREFIX.pack_into(batch, 0, base_offset, 0, partition_leader_epoch, 2)
        _AFTER_CRC.pack_into(
            batch,
            ATTRIBUTES_OFFSET,
            attributes,
            count - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    except struct.error as exc:
        raise EncodeError(f"record batch field out of range: {exc}") from None
    batch_length = len(batch) - LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise EncodeError(f"record batch of {batch_length} bytes is too large")
    _BATCH_LENGTH.pack_into(batch, _BATCH_LENGTH_OFFSET, batch_length)
    with memoryview(batch) as view:
        crc = crc32c(view[ATTRIBUTES_OFFSET:])
    _CRC.pack_into(batch, CRC_OFFSET, crc)


def encode_record(
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> bytes:
    """One record of a batch as :class:`RecordBatchBuilder` writes it, length prefix included."""
    c_encode = speedups.encode_record
    if c_encode is not None and not headers:
        raw = c_encode(timestamp_delta, offset_delta, key, value)
        if raw is not None:  # None: left to the Python code below
            return raw
    tail = _encode_headers(headers) if headers else b"\x00"
    return _encode_with_tail(timestamp_delta, offset_delta, key, value, tail)


def encode_record_headed(
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    section: bytes,
) -> bytes:
    """:func:`encode_record` of a record whose headers section (count, then each header)
    is encoded already: ``section``, as the producer's C send encodes it."""
    return _encode_with_tail(timestamp_delta, offset_delta, key, value, section)


def _encode_with_tail(
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    tail: bytes,
) -> bytes:
    ts_raw = (
        ENCODED[timestamp_delta << 1]
        if 0 <= timestamp_delta < 8192
        else encode_varint(timestamp_delta)
    )
    od_raw = ENCODED[offset_delta << 1] if offset_delta < 8192 else encode_varint(offset_delta)
    if key is None:
        key_raw = _NULL
        key = b""
    else:
        n = len(key)
        key_raw = ENCODED[n << 1] if n < 8192 else encode_varint(n)
    if value is None:
        value_raw = _NULL
        value = b""
    else:
        n = len(value)
        value_raw = ENCODED[n << 1] if n < 8192 else encode_varint(n)
    parts = (b"\x00", ts_raw, od_raw, key_raw, key, value_raw, value, tail)
    try:
        body = b"".join(parts)
    except TypeError:
        raise EncodeError("record keys, values and header values must be bytes") from None
    size = len(body)
    return (ENCODED[size << 1] if size < 8192 else encode_varint(size)) + body


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [encode_varint(len(headers))]
    for hkey, hvalue in headers:
        if not isinstance(hkey, str):
            raise EncodeError(f"header key must be a str, not {type(hkey).__name__}")
        raw = hkey.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(_NULL)
        elif isinstance(hvalue, (bytes, bytearray, memoryview)):
            value = bytes(hvalue)
            parts.append(encode_varint(len(value)))
            parts.append(value)
        else:  # bytes(5) would quietly make five zero bytes
            raise EncodeError(
                f"record keys, values and header values must be bytes, not {type(hvalue).__name__}"
            )
    return b"".join(parts)


class RecordBatch:
    """A lazy view over one stored magic 2 batch.

    The header is read (and the CRC checked) when the view is made; records
    are decompressed and parsed on first use and then kept.
    """

    __slots__ = ("_buf", "_max_decompressed", "_pos", "_records", "_segments", "header")

    header: BatchHeader

    def __init__(self, buf: Buffer, pos: int, header: BatchHeader, max_decompressed: int) -> None:
        self._buf = buf
        self._pos = pos
        self.header = header
        self._max_decompressed = max_decompressed
        self._segments: list[Segment] | None = None
        self._records: list[Record] | None = None

    @classmethod
    def from_buffer(
        cls,
        buf: Buffer,
        pos: int = 0,
        *,
        check_crc: bool = True,
        max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    ) -> RecordBatch:
        """View the batch at ``pos`` of ``buf`` (which must hold all of it)."""
        # The checks of BatchHeader.parse, batch_crc and header.size, inlined on
        # the unpacked fields: this runs once per batch of every fetch.
        available = len(buf) - pos
        if available < RECORD_BATCH_OVERHEAD:
            return cls._refuse(buf, pos)
        fields = HEADER_STRUCT.unpack_from(buf, pos)
        header: BatchHeader = _tuple_new(BatchHeader, fields)
        batch_length = fields[1]
        size = LOG_OVERHEAD + batch_length
        if fields[3] != 2 or batch_length < _MIN_BATCH_LENGTH or size > available:
            return cls._refuse(buf, pos)
        if check_crc:
            actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
            if actual != fields[4]:
                raise CorruptRecordError(
                    f"record batch at offset {fields[0]} has CRC {actual:#010x}, "
                    f"header says {fields[4]:#010x}"
                )
        if fields[12] < 0:
            raise CorruptRecordError(f"negative record count {fields[12]}")
        return cls(buf, pos, header, max_decompressed)

    @staticmethod
    def _refuse(buf: Buffer, pos: int) -> NoReturn:
        """Raise the error for a batch whose header or length :meth:`from_buffer` refused."""
        header = BatchHeader.parse(buf, pos)  # raises for a short buffer or a wrong magic
        if header.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
        raise TruncatedError(
            f"record batch of {header.size} bytes runs past the end of the buffer "
            f"({len(buf) - pos} bytes available)"
        )

    @property
    def size(self) -> int:
        """Bytes the batch takes in the log, log overhead included."""
        return self.header.size

    @property
    def magic(self) -> int:
        return 2

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def next_offset(self) -> int:
        """Offset after the batch's last one (even if compaction removed records)."""
        return self.header.next_offset

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon set by compaction, or None (stored as the base timestamp)."""
        return self.header.base_timestamp if self.header.has_delete_horizon else None

    def raw(self) -> bytes:
        """The batch's bytes as stored."""
        return bytes(self._buf[self._pos : self._pos + self.header.size])

    def records(self) -> list[Record]:
        """All records of the batch, as a list (made once, then kept).

        Iterating over the batch is cheaper when the records are not kept:
        it makes each Record only when it is reached.
        """
        records = self._records
        if records is None:
            records = self._records = list(iter_records(self._parsed()))
        return records

    def records_data(self) -> Buffer:
        """The records section, decompressed (a view of the stored bytes when not compressed).

        For decoders of their own (:mod:`~kafkette.protocol.records.columns`);
        decompressed anew on each call.
        """
        pos = self._pos
        data: Buffer = memoryview(self._buf)[
            pos + RECORD_BATCH_OVERHEAD : pos + LOG_OVERHEAD + self.header.batch_length
        ]
        codec = self.header.attributes & COMPRESSION_MASK
        if codec != NO_COMPRESSION:
            data = decompress(codec, data, max_size=self._max_decompressed)
        return data

    def records_as(
        self, record_type: type[R], prefix: tuple[object, ...], suffix: tuple[object, ...]
    ) -> list[R] | None:
        """The records made as ``record_type((*prefix, *record, *suffix))`` in one pass of
        the C extension, each in one allocation (the consumer's records: topic and
        partition before a Record's fields, timestamp type and leader epoch after).

        None without the extension, once the records were parsed otherwise, or for data
        the extension leaves to Python: iterating the batch then gives the records (or
        raises the error). ``prefix`` and ``suffix`` may hold str, int and None only.
        """
        c_parse = speedups.parse_records
        if c_parse is None or self._segments is not None:
            return None
        base_offset, _, _, _, _, attributes, _, base_ts, max_ts, _, _, _, count = self.header
        fixed = max_ts if attributes & TIMESTAMP_TYPE_MASK else None
        data = self.records_data()
        return c_parse(data, count, base_offset, base_ts, fixed, record_type, prefix, suffix)

    def _parsed(self) -> list[Segment]:
        segments = self._segments
        if segments is not None:
            return segments
        # one unpacking instead of an attribute lookup per field
        base_offset, _, _, _, _, attributes, _, base_ts, max_ts, _, _, _, count = self.header
        data = self.records_data()  # parse_segments copies a view if needed
        fixed = max_ts if attributes & TIMESTAMP_TYPE_MASK else None
        segments = self._segments = parse_segments(data, count, base_offset, base_ts, fixed)
        return segments

    def __iter__(self) -> Iterator[Record]:
        """The records in order; the whole batch is validated before the first one."""
        if self._records is not None:
            return iter(self._records)
        return iter_records(self._parsed())

    def __len__(self) -> int:
        """Number of records the header declares."""
        return self.header.record_count

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, records={h.record_count}, "
            f"compression={CODEC_NAMES.get(h.compression, h.compression)}, size={h.size})"
        )
