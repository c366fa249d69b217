"""Delimiters and kcat's output format (``-f``), as bytes.

Escapes in delimiters and formats: ``\\n \\r \\t \\0 \\\\`` and ``\\xNN``.
Format tokens (kcat's meaning): ``%t`` topic, ``%p`` partition, ``%o`` offset,
``%k`` key, ``%K`` key length (-1 for none), ``%s`` value, ``%S`` value length
(-1 for null), ``%R`` the value length as a big-endian signed 32-bit integer
(binary), ``%T`` timestamp in milliseconds (-1 for none), ``%h`` headers as
``name=value`` joined by commas (``name=NULL`` for a null value), ``%%`` a percent
sign. A null key or value prints as nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from kafkette.cli.common import UsageError
from kafkette.consumer.record import ConsumerRecord

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\"}


def unescape(text: str) -> bytes:
    """``text`` as bytes (UTF-8) with the backslash escapes above replaced."""
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out += char.encode()
            i += 1
            continue
        following = text[i + 1 : i + 2]
        if following in _ESCAPES:
            out += _ESCAPES[following]
            i += 2
        elif following == "x" and _is_hex(text[i + 2 : i + 4]):
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            out += b"\\"
            i += 1
    return bytes(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


Piece = Callable[[ConsumerRecord], bytes]


def _literal(data: bytes) -> Piece:
    return lambda record: data


def _length(value: bytes | None) -> bytes:
    return b"-1" if value is None else str(len(value)).encode()


def _headers(record: ConsumerRecord) -> bytes:
    parts = []
    for name, value in record.headers:
        parts.append(name.encode() + b"=" + (b"NULL" if value is None else value))
    return b",".join(parts)


_TOKENS: dict[str, Piece] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "K": lambda r: _length(r.key),
    "s": lambda r: r.value or b"",
    "S": lambda r: _length(r.value),
    "R": lambda r: struct.pack(">i", -1 if r.value is None else len(r.value)),
    "T": lambda r: str(r.timestamp).encode(),
    "h": _headers,
}


class RecordFormat:
    """A compiled ``-f`` format: ``format(record)`` gives the bytes to print."""

    def __init__(self, spec: str) -> None:
        self.pieces: list[Piece] = []
        literal = bytearray()
        i = 0
        while i < len(spec):
            char = spec[i]
            if char != "%":
                end = spec.find("%", i)
                end = len(spec) if end < 0 else end
                literal += unescape(spec[i:end])
                i = end
                continue
            token = spec[i + 1 : i + 2]
            if token == "%":
                literal += b"%"
            elif token in _TOKENS:
                if literal:
                    self.pieces.append(_literal(bytes(literal)))
                    literal = bytearray()
                self.pieces.append(_TOKENS[token])
            else:
                raise UsageError(f"-f {spec!r}: unknown format token %{token}")
            i += 2
        if literal:
            self.pieces.append(_literal(bytes(literal)))

    def format(self, record: ConsumerRecord) -> bytes:
        return b"".join(piece(record) for piece in self.pieces)
