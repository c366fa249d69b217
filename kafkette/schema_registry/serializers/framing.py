"""Confluent's wire framing of a registry-encoded key or value, without I/O.

A framed payload is::

    0x00 | schema id (4 bytes, big-endian, signed) | [message indexes] | encoded value

The message indexes exist for Protobuf only: they say which message of the
schema's file the value is, as a path of indexes (``[0]``: the file's first
message; ``[1, 0]``: the first nested message of the second). They are written
as a count then the indexes, each a zig-zag varint, except the common ``[0]``
written as the single byte ``0x00`` (a count of zero, read back as ``[0]``).
"""

from __future__ import annotations

import struct

from kafkette.errors import SerializationError

MAGIC_BYTE = 0
"""The first byte of every framed payload."""

_HEADER = struct.Struct(">bi")
HEADER_SIZE = _HEADER.size
"""The magic byte and the schema id."""

MAX_INDEXES = 1000
"""More message indexes than any file nests: a bigger count is a corrupt payload."""


def frame(schema_id: int, payload: bytes, indexes: bytes = b"") -> bytes:
    """``payload`` framed for ``schema_id``; ``indexes`` from :func:`encode_indexes`."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + indexes + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the rest of ``data`` (indexes and payload)."""
    if len(data) < HEADER_SIZE:
        raise SerializationError(
            f"a framed payload has at least {HEADER_SIZE} bytes, got {len(data)}"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise SerializationError(
            f"unknown magic byte {magic & 0xFF}: not framed for a schema registry"
        )
    return schema_id, memoryview(data)[HEADER_SIZE:]


def _zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_indexes(indexes: list[int]) -> bytes:
    """Protobuf message indexes as Confluent writes them (``[0]`` is one 0 byte)."""
    if not indexes:
        raise ValueError("a message has at least one index")
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(map(_zigzag_varint, indexes))


def _read_zigzag_varint(data: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise SerializationError("truncated varint in the message indexes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise SerializationError("varint longer than 64 bits in the message indexes")


def decode_indexes(data: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of ``data``, and what follows them."""
    count, position = _read_zigzag_varint(data, 0)
    if count == 0:
        return [0], data[position:]
    if not 0 < count <= MAX_INDEXES:
        raise SerializationError(f"invalid count of message indexes: {count}")
    indexes = []
    for _ in range(count):
        index, position = _read_zigzag_varint(data, position)
        if index < 0:
            raise SerializationError(f"negative message index {index}")
        indexes.append(index)
    return indexes, data[position:]
