"""Legacy message sets, magic 0 and 1: :class:`LegacyBatchBuilder` and :class:`LegacyBatch`.

Each log entry is ``offset int64, size int32`` followed by one message::

    crc uint32 (CRC-32 of the rest)  magic int8  attributes int8
    [timestamp int64, magic 1 only]  key bytes (int32 length, -1 null)
    value bytes (int32 length, -1 null)

Attributes: bits 0-2 the codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 the
timestamp type (magic 1: 1 = LogAppendTime). A compressed entry is a
*wrapper* whose value is a whole compressed message set, the *inner*
messages, which must not be compressed themselves. Offsets inside a magic 0
wrapper are absolute; inside a magic 1 wrapper they are relative (0, 1, ...)
and the wrapper carries the absolute offset of the last one, so inner record
``i`` is at ``wrapper_offset - last_inner + inner_i`` (a wrapper offset of 0,
written by some librdkafka versions, means a base of 0). A magic 1 wrapper
with LogAppendTime gives its timestamp to every inner record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final

from kafkette.protocol.errors import (
    CorruptRecordError,
    EncodeError,
    TruncatedError,
    UnsupportedCompressionError,
)
from kafkette.protocol.records.batch_header import LOG_OVERHEAD
from kafkette.protocol.records.compression import (
    CODEC_NAMES,
    DEFAULT_MAX_DECOMPRESSED,
    NO_COMPRESSION,
    ZSTD,
    compress,
    decompress,
)
from kafkette.protocol.records.record import Record

Buffer = bytes | bytearray | memoryview

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
RECORD_OVERHEAD_V0: Final = 14  # crc, magic, attributes, key length, value length
RECORD_OVERHEAD_V1: Final = 22  # the same plus the timestamp
NO_TIMESTAMP: Final = -1

_LOG_OVERHEAD: Final = struct.Struct(">qi")
_CRC: Final = struct.Struct(">I")
_V0_HEAD: Final = struct.Struct(">bb")  # magic, attributes
_V1_HEAD: Final = struct.Struct(">bbq")  # magic, attributes, timestamp
_INT32: Final = struct.Struct(">i")
_NULL_LENGTH: Final = _INT32.pack(-1)


class _Message:
    """One decoded legacy message (internal)."""

    __slots__ = ("attributes", "crc", "key", "magic", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        crc: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        self.offset = offset
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value


def _read_bytes(buf: Buffer, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError(f"legacy message {what} length runs past the message")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0:
        raise CorruptRecordError(f"negative legacy message {what} length {length}")
    if length > end - pos:
        raise CorruptRecordError(f"legacy message {what} of {length} bytes runs past the message")
    return bytes(buf[pos : pos + length]), pos + length


def _read_message(buf: Buffer, pos: int, end: int, check_crc: bool) -> tuple[_Message, int]:
    """Decode the entry at ``pos`` (offset, size, message); ``end`` bounds the buffer."""
    if end - pos < LOG_OVERHEAD:
        raise TruncatedError(f"{end - pos} bytes are too few for a legacy log entry")
    offset, size = _LOG_OVERHEAD.unpack_from(buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"legacy message size {size} is below the minimum")
    start = pos + LOG_OVERHEAD
    stop = start + size
    if stop > end:
        raise TruncatedError(f"legacy message of {size} bytes runs past the end of the buffer")
    (crc,) = _CRC.unpack_from(buf, start)
    magic = buf[start + 4]
    if magic == 0:
        _, attributes = _V0_HEAD.unpack_from(buf, start + 4)
        timestamp = NO_TIMESTAMP
        p = start + 6
    elif magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(f"magic 1 message size {size} is below the minimum")
        _, attributes, timestamp = _V1_HEAD.unpack_from(buf, start + 4)
        p = start + 14
    else:
        raise CorruptRecordError(f"expected a legacy message (magic 0 or 1), found magic {magic}")
    if check_crc:
        actual = zlib.crc32(memoryview(buf)[start + 4 : stop])
        if actual != crc:
            raise CorruptRecordError(
                f"legacy message at offset {offset} has CRC {actual:#010x}, stored {crc:#010x}"
            )
    key, p = _read_bytes(buf, p, stop, "key")
    value, p = _read_bytes(buf, p, stop, "value")
    if p != stop:
        raise CorruptRecordError(f"legacy message at offset {offset} has {stop - p} extra bytes")
    return _Message(offset, crc, magic, attributes & 0xFF, timestamp, key, value), stop


class LegacyBatch:
    """A view over one magic 0 or 1 log entry: a plain message or a compressed wrapper.

    Records come out as :class:`Record` with empty headers; magic 0 records
    have timestamp -1.
    """

    __slots__ = ("_check_crc", "_max_decompressed", "_message", "_records", "_size")

    def __init__(
        self, message: _Message, size: int, check_crc: bool, max_decompressed: int
    ) -> None:
        self._message = message
        self._size = size
        self._check_crc = check_crc
        self._max_decompressed = max_decompressed
        self._records: list[Record] | None = None

    @classmethod
    def from_buffer(
        cls,
        buf: Buffer,
        pos: int = 0,
        *,
        check_crc: bool = True,
        max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    ) -> LegacyBatch:
        """Decode the legacy entry at ``pos`` (its CRC is checked unless told not to)."""
        message, stop = _read_message(buf, pos, len(buf), check_crc)
        return cls(message, stop - pos, check_crc, max_decompressed)

    @property
    def magic(self) -> int:
        return self._message.magic

    @property
    def size(self) -> int:
        """Bytes the entry takes, log overhead included."""
        return self._size

    @property
    def crc(self) -> int:
        return self._message.crc

    @property
    def attributes(self) -> int:
        return self._message.attributes

    @property
    def compression(self) -> int:
        return self._message.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return self._message.magic == 1 and bool(self._message.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def timestamp(self) -> int:
        """The entry's own timestamp (a wrapper's is its max or append time)."""
        return self._message.timestamp

    @property
    def last_offset(self) -> int:
        """The entry's offset: for a wrapper, the offset of its last inner record."""
        return self._message.offset

    @property
    def next_offset(self) -> int:
        return self._message.offset + 1

    @property
    def base_offset(self) -> int:
        """Offset of the first record (decompresses a wrapper)."""
        records = self.records()
        return records[0].offset if records else self._message.offset

    @property
    def is_transactional(self) -> bool:
        return False

    @property
    def is_control(self) -> bool:
        return False

    def records(self) -> list[Record]:
        """The entry's records: itself, or a wrapper's inner messages."""
        records = self._records
        if records is None:
            records = self._records = self._parse()
        return records

    def _parse(self) -> list[Record]:
        m = self._message
        codec = m.attributes & COMPRESSION_MASK
        if codec == NO_COMPRESSION:
            return [Record(m.offset, m.timestamp, m.key, m.value, ())]
        if codec == ZSTD or codec not in CODEC_NAMES:
            raise UnsupportedCompressionError(
                f"codec {codec} is not valid for a magic {m.magic} message"
            )
        if m.value is None:
            raise CorruptRecordError("compressed legacy message has a null value")
        inner_set = decompress(codec, m.value, max_size=self._max_decompressed, magic=m.magic)
        inner: list[_Message] = []
        pos = 0
        end = len(inner_set)
        while pos < end:
            message, pos = _read_message(inner_set, pos, end, self._check_crc)
            if message.attributes & COMPRESSION_MASK:
                raise CorruptRecordError("inner legacy messages must not be compressed")
            if message.magic != m.magic:
                raise CorruptRecordError(
                    f"inner message magic {message.magic} differs from wrapper magic {m.magic}"
                )
            inner.append(message)
        if not inner:
            raise CorruptRecordError("compressed legacy message holds no records")
        if m.magic == 0:
            return [Record(i.offset, NO_TIMESTAMP, i.key, i.value, ()) for i in inner]
        if m.offset == 0:
            base = 0
        else:
            last = inner[-1].offset
            if m.offset < last:
                raise CorruptRecordError(
                    f"wrapper offset {m.offset} is below its last inner offset {last}"
                )
            base = m.offset - last
        if m.attributes & TIMESTAMP_TYPE_MASK:
            return [Record(base + i.offset, m.timestamp, i.key, i.value, ()) for i in inner]
        return [Record(base + i.offset, i.timestamp, i.key, i.value, ()) for i in inner]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self.records())

    def __repr__(self) -> str:
        m = self._message
        return (
            f"LegacyBatch(magic={m.magic}, offset={m.offset}, "
            f"compression={CODEC_NAMES.get(m.attributes & COMPRESSION_MASK)}, size={self._size})"
        )


def _encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    if magic == 0:
        head = _V0_HEAD.pack(magic, attributes)
    else:
        head = _V1_HEAD.pack(magic, attributes, timestamp)
    body = b"".join(
        (
            head,
            _NULL_LENGTH if key is None else _INT32.pack(len(key)),
            b"" if key is None else key,
            _NULL_LENGTH if value is None else _INT32.pack(len(value)),
            b"" if value is None else value,
        )
    )
    crc = _CRC.pack(zlib.crc32(body))
    return b"".join((_LOG_OVERHEAD.pack(offset, len(body) + 4), crc, body))


class LegacyBatchBuilder:
    """Writes a magic 0 or 1 message set: plain messages, or one compressed wrapper."""

    __slots__ = (
        "_base_offset",
        "_compression",
        "_log_append_time",
        "_magic",
        "_max_timestamp",
        "_messages",
        "_size",
    )

    def __init__(
        self,
        *,
        magic: int,
        compression: int = NO_COMPRESSION,
        base_offset: int = 0,
        log_append_time: bool = False,
    ) -> None:
        if magic not in (0, 1):
            raise EncodeError(f"legacy message sets have magic 0 or 1, not {magic}")
        if compression == ZSTD or compression not in CODEC_NAMES:
            raise UnsupportedCompressionError(
                f"codec {compression} is not valid for magic {magic} messages"
            )
        if log_append_time and magic == 0:
            raise EncodeError("magic 0 messages have no timestamp type")
        self._magic = magic
        self._compression = compression
        self._base_offset = base_offset
        self._log_append_time = log_append_time
        self._max_timestamp = NO_TIMESTAMP
        self._messages: list[bytes] = []
        self._size = 0

    def __len__(self) -> int:
        return len(self._messages)

    def append(self, timestamp: int, key: bytes | None, value: bytes | None) -> int:
        """Add a message; return its offset delta. ``timestamp`` is ignored for magic 0."""
        delta = len(self._messages)
        magic = self._magic
        if magic == 1:
            self._max_timestamp = max(self._max_timestamp, timestamp)
            attributes = TIMESTAMP_TYPE_MASK if self._log_append_time else 0
        else:
            timestamp = NO_TIMESTAMP
            attributes = 0
        # Inside a magic 1 wrapper offsets are relative; everywhere else absolute.
        relative = magic == 1 and self._compression != NO_COMPRESSION
        offset = delta if relative else self._base_offset + delta
        encoded = _encode_message(offset, magic, attributes, timestamp, key, value)
        self._messages.append(encoded)
        self._size += len(encoded)
        return delta

    def size_in_bytes(self) -> int:
        """Size of the message set if built now, before compression."""
        if self._compression == NO_COMPRESSION:
            return self._size
        overhead = LOG_OVERHEAD + (RECORD_OVERHEAD_V0 if self._magic == 0 else RECORD_OVERHEAD_V1)
        return overhead + self._size

    def build(self) -> bytes:
        """The message set: the messages one after the other, or their wrapper."""
        inner = b"".join(self._messages)
        if self._compression == NO_COMPRESSION or not self._messages:
            return inner
        attributes = self._compression
        if self._log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        last_offset = self._base_offset + len(self._messages) - 1
        return _encode_message(
            last_offset,
            self._magic,
            attributes,
            self._max_timestamp,
            None,
            compress(self._compression, inner, magic=self._magic),
        )
