"""Kafka's primitive encodings, as functions over buffers.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is any
bytes-like object and its length is the end of the readable data. Writers
append to a :class:`bytearray`. Every read is bounds-checked and reports
malformed input with :mod:`kafkette.protocol.errors` exceptions.

Two families of variable-length integers exist in Kafka:

- unsigned varints (plain base-128, little-endian groups of 7 bits) for the
  lengths of compact strings, bytes and arrays and for tagged fields;
- zig-zag signed ``varint`` (32-bit) and ``varlong`` (64-bit), used inside
  record batches.

The fixed-width integers are big-endian; see ``_INT*`` below.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kafkette.protocol.errors import (
    EncodeError,
    InvalidLengthError,
    InvalidStringError,
    TruncatedError,
)

Buffer = bytes | bytearray | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

_MAX_UVARINT_BYTES = 5  # 32 bits
_MAX_UVARLONG_BYTES = 10  # 64 bits


# -- unsigned varints -------------------------------------------------------


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint."""
    end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # the one-byte case is by far the most common
            return b, pos + 1
    result = 0
    shift = 0
    for i in range(_MAX_UVARINT_BYTES):
        if pos >= end:
            raise TruncatedError("unsigned varint runs past the end of the buffer")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if i == _MAX_UVARINT_BYTES - 1 and b > 0x0F:
                raise InvalidLengthError("unsigned varint does not fit in 32 bits")
            return result, pos
        shift += 7
    raise InvalidLengthError("unsigned varint longer than 5 bytes")


def read_uvarlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned 64-bit varint."""
    end = len(buf)
    result = 0
    shift = 0
    for _ in range(_MAX_UVARLONG_BYTES):
        if pos >= end:
            raise TruncatedError("unsigned varlong runs past the end of the buffer")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 64:
                raise InvalidLengthError("unsigned varlong does not fit in 64 bits")
            return result, pos
        shift += 7
    raise InvalidLengthError("unsigned varlong longer than 10 bytes")


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint."""
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(0x80))


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint."""
    out += encode_uvarint(value)


# -- zig-zag signed varints ---------------------------------------------------


def zigzag_encode(value: int) -> int:
    """Map a signed integer to an unsigned one: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 64-bit varint."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zig-zag varint."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise EncodeError(f"varint cannot hold {value}")
    return encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zig-zag varlong."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise EncodeError(f"varlong cannot hold {value}")
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# -- fixed width --------------------------------------------------------------


def read_fixed(fmt: struct.Struct, buf: Buffer, pos: int) -> tuple[int, int]:
    """Read one fixed-width value with ``fmt``."""
    if pos + fmt.size > len(buf):
        raise TruncatedError(f"{fmt.size}-byte field runs past the end of the buffer")
    return fmt.unpack_from(buf, pos)[0], pos + fmt.size


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise TruncatedError("boolean runs past the end of the buffer")
    return buf[pos] != 0, pos + 1


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise TruncatedError("uuid runs past the end of the buffer")
    return uuid_from_bytes(buf[pos:end]), end


def _uuid_from_bytes_fast(data: Buffer) -> uuid.UUID:
    # uuid.UUID(bytes=...) spends over a microsecond checking its arguments; this sets
    # the two slots it would set (see _uuid_shortcut_works) from 16 bytes known to be 16.
    value = _new_object(uuid.UUID)
    _set_slot(value, "int", _int_from_bytes(data, "big"))
    _set_slot(value, "is_safe", _SAFE_UNKNOWN)
    return value


def _uuid_from_bytes_plain(data: Buffer) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(data))


_new_object = object.__new__
_set_slot = object.__setattr__
_int_from_bytes = int.from_bytes
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def _uuid_shortcut_works() -> bool:
    """Whether the shortcut builds UUIDs indistinguishable from the constructor's."""
    if getattr(uuid.UUID, "__slots__", None) != ("int", "is_safe", "__weakref__"):
        return False
    sample = bytes(range(1, 17))
    made, expected = _uuid_from_bytes_fast(sample), uuid.UUID(bytes=sample)
    return (
        made == expected
        and made.int == expected.int
        and made.is_safe is expected.is_safe
        and str(made) == str(expected)
        and hash(made) == hash(expected)
    )


uuid_from_bytes = _uuid_from_bytes_fast if _uuid_shortcut_works() else _uuid_from_bytes_plain
"""The UUID whose 16 big-endian bytes are ``data`` (which must be 16 bytes long)."""


# -- lengths and length-prefixed data -----------------------------------------


def _check_span(buf: Buffer, pos: int, length: int, what: str) -> int:
    end = pos + length
    if end > len(buf):
        raise TruncatedError(
            f"{what} of {length} bytes runs past the end of the buffer ({len(buf) - pos} available)"
        )
    return end


def _decode_utf8(data: Buffer) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidStringError(f"string is not valid UTF-8: {exc.reason}") from None


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Non-compact, non-nullable string: int16 length + UTF-8."""
    length, pos = read_fixed(INT16, buf, pos)
    if length < 0:
        raise InvalidLengthError(f"negative length {length} for a non-nullable string")
    end = _check_span(buf, pos, length, "string")
    return _decode_utf8(buf[pos:end]), end


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    length, pos = read_fixed(INT16, buf, pos)
    if length < 0:
        if length != -1:
            raise InvalidLengthError(f"invalid string length {length}")
        return None, pos
    end = _check_span(buf, pos, length, "string")
    return _decode_utf8(buf[pos:end]), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Compact, non-nullable string: uvarint (length + 1) + UTF-8."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise InvalidLengthError("null where a non-nullable compact string is required")
    end = _check_span(buf, pos, n - 1, "string")
    return _decode_utf8(buf[pos:end]), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _check_span(buf, pos, n - 1, "string")
    return _decode_utf8(buf[pos:end]), end


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    """Non-compact, non-nullable bytes: int32 length + data."""
    length, pos = read_fixed(INT32, buf, pos)
    if length < 0:
        raise InvalidLengthError(f"negative length {length} for non-nullable bytes")
    end = _check_span(buf, pos, length, "bytes")
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_fixed(INT32, buf, pos)
    if length < 0:
        if length != -1:
            raise InvalidLengthError(f"invalid bytes length {length}")
        return None, pos
    end = _check_span(buf, pos, length, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise InvalidLengthError("null where non-nullable compact bytes are required")
    end = _check_span(buf, pos, n - 1, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _check_span(buf, pos, n - 1, "bytes")
    return bytes(buf[pos:end]), end


def read_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    """Nullable int32-length record data, returned as a zero-copy view."""
    length, pos = read_fixed(INT32, buf, pos)
    if length < 0:
        if length != -1:
            raise InvalidLengthError(f"invalid records length {length}")
        return None, pos
    end = _check_span(buf, pos, length, "records")
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _check_span(buf, pos, n - 1, "records")
    return memoryview(buf)[pos:end], end


def read_array_length(buf: Buffer, pos: int, min_element_size: int) -> tuple[int, int]:
    """Non-compact array count (int32, -1 = null, returned as -1).

    ``min_element_size`` is the fewest bytes one element can take; a count
    that cannot fit in the remaining bytes is rejected before any element is
    read, so a forged count cannot make a decoder loop or allocate.
    """
    count, pos = read_fixed(INT32, buf, pos)
    if count < -1:
        raise InvalidLengthError(f"invalid array length {count}")
    if count > 0 and count * min_element_size > len(buf) - pos:
        raise InvalidLengthError(
            f"array of {count} elements cannot fit in {len(buf) - pos} remaining bytes"
        )
    return count, pos


def read_compact_array_length(buf: Buffer, pos: int, min_element_size: int) -> tuple[int, int]:
    """Compact array count (uvarint count + 1; null returned as -1)."""
    n, pos = read_uvarint(buf, pos)
    count = n - 1
    if count > 0 and count * min_element_size > len(buf) - pos:
        raise InvalidLengthError(
            f"array of {count} elements cannot fit in {len(buf) - pos} remaining bytes"
        )
    return count, pos


# -- writers ------------------------------------------------------------------


def write_string(out: bytearray, value: str | None, *, compact: bool, nullable: bool) -> None:
    """Append a string in any of its four encodings."""
    if value is None:
        if not nullable:
            raise EncodeError("null string where a non-nullable string is required")
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if compact:
        out += encode_uvarint(len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise EncodeError(f"string of {len(data)} bytes exceeds the int16 length limit")
        out += INT16.pack(len(data))
    out += data


def write_bytes(out: bytearray, value: Buffer | None, *, compact: bool, nullable: bool) -> None:
    """Append bytes (or records) in any of their four encodings.

    Records may also be an external region (see ``schema.ExternalRecords``):
    its length is written here, and its data is handed to a
    :class:`PartsWriter` as a separate part, or copied into any other writer.
    """
    if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
        region: Any = value
        length = len(region)
        out += encode_uvarint(length + 1) if compact else INT32.pack(length)
        if isinstance(out, PartsWriter):
            out.add_external(region)
        else:
            out += region.to_bytes()
        return
    if value is None:
        if not nullable:
            raise EncodeError("null bytes where non-nullable bytes are required")
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    length = len(value) if not isinstance(value, memoryview) else value.nbytes
    if compact:
        out += encode_uvarint(length + 1)
    else:
        out += INT32.pack(length)
    out += value


def write_array_length(out: bytearray, count: int | None, *, compact: bool) -> None:
    """Append an array count; ``None`` writes the null array."""
    if count is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
    elif compact:
        out += encode_uvarint(count + 1)
    else:
        out += INT32.pack(count)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


# -- tagged fields --------------------------------------------------------------


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[list[tuple[int, memoryview]], int]:
    """Read a tagged-field section into ``(tag, data)`` pairs, in wire order."""
    count, pos = read_uvarint(buf, pos)
    fields: list[tuple[int, memoryview]] = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = _check_span(buf, pos, size, "tagged field")
        fields.append((tag, memoryview(buf)[pos:end]))
        pos = end
    return fields, pos


def write_tagged_fields(out: bytearray, fields: list[tuple[int, Buffer]]) -> None:
    """Append a tagged-field section; ``fields`` must be in ascending tag order."""
    out += encode_uvarint(len(fields))
    for tag, data in fields:
        out += encode_uvarint(tag)
        out += encode_uvarint(len(data))
        out += data


class PartsWriter(bytearray):
    """A writer whose output may hold external regions besides bytes.

    Encoders append to it as to any bytearray; an external region (a log
    segment slice) closes the current bytes part and becomes a part of its
    own, so a transport can send it without copying (``os.sendfile``).
    """

    # the parts before the current bytes; created by the first external region
    _parts: list[Any] | None = None

    def add_external(self, region: Any) -> None:
        parts = self._parts
        if parts is None:
            parts = self._parts = []
        if self:
            parts.append(bytes(self))
            del self[:]
        parts.append(region)

    def parts(self) -> list[Any]:
        """The output: bytes and external regions, in order."""
        tail = [bytes(self)] if self else []
        return tail if self._parts is None else [*self._parts, *tail]
