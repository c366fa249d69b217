"""Zig-zag varints as used inside magic 2 records.

Encoding goes through a table for the values records use most (two bytes or
less); decoding of short varints is inlined by the record parser, which calls
:func:`read_varint` only for the rare long ones.
"""

from __future__ import annotations

from typing import Final

from kafkette.protocol.errors import CorruptRecordError, EncodeError, TruncatedError

_TABLE_LIMIT: Final = 1 << 14  # zig-zag values that encode in at most two bytes


def _encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


ENCODED: Final[list[bytes]] = [_encode_unsigned(z) for z in range(_TABLE_LIMIT)]
"""``ENCODED[z]`` is the varint encoding of the zig-zag value ``z``."""

DECODED_1: Final[list[int]] = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
"""``DECODED_1[b]`` is the signed value of the one-byte varint ``b``."""


def zigzag(value: int) -> int:
    """Zig-zag transform of a signed 64-bit value (small magnitudes stay small)."""
    return (value << 1) ^ (value >> 63)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint encoding of a signed 64-bit value."""
    z = (value << 1) ^ (value >> 63)
    if 0 <= z < _TABLE_LIMIT:
        return ENCODED[z]
    if not -(1 << 63) <= value < 1 << 63:
        raise EncodeError(f"{value} does not fit a varlong")
    return _encode_unsigned(z)


def varint_size(value: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``value``."""
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at ``pos``; return ``(value, position after it)``.

    Accepts at most ten bytes (a varlong); longer runs of continuation bytes
    raise :class:`CorruptRecordError`, a varint cut by the end of ``buf``
    raises :class:`TruncatedError`.
    """
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise TruncatedError("varint runs past the end of the data")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than ten bytes")


def build_decode_table(width: int) -> dict[bytes, int]:
    """Map every ``width``-byte varint encoding (1 or 2) to its signed value.

    Used by the parser's columnar path: looking a field up here both decodes
    it and proves it is a varint of exactly that width (a ``KeyError`` if not).
    """
    if width == 1:
        return {bytes((b,)): DECODED_1[b] for b in range(0x80)}
    table: dict[bytes, int] = {}
    for hi in range(0x80):
        for lo in range(0x80):
            z = lo | (hi << 7)
            table[bytes((lo | 0x80, hi))] = (z >> 1) ^ -(z & 1)
    return table
