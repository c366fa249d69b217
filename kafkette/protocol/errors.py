"""Errors raised by the sans-I/O protocol layer.

Every malformed input is reported as one of these, never as a bare
``IndexError``, ``struct.error`` or ``MemoryError``::

    ProtocolError
    ├── DecodeError                  bytes that do not parse
    │   ├── TruncatedError           a length or field runs past the end
    │   ├── InvalidLengthError       a negative or impossible length or count
    │   └── InvalidStringError       a string that is not UTF-8
    ├── FrameTooLargeError           a declared frame size over the limit
    ├── UnknownApiKeyError           a request for an API we do not know
    ├── UnsupportedVersionError      a version outside the API's valid range,
    │                                or a field that cannot be sent at a version
    ├── EncodeError                  a value that cannot be encoded
    ├── CorruptRecordError           a record batch whose CRC or layout is wrong
    ├── UnsupportedCompressionError  a codec we do not know, or whose extra is absent
    └── DecompressionLimitError      decompressed data larger than allowed

The broker maps these onto Kafka error codes (``CORRUPT_MESSAGE``,
``UNSUPPORTED_VERSION``, ...); clients raise them as they are.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of every error raised while encoding or decoding Kafka bytes."""


class DecodeError(ProtocolError):
    """Bytes that do not follow the expected layout."""


class TruncatedError(DecodeError):
    """A field or a declared length runs past the end of the available bytes."""


class InvalidLengthError(DecodeError):
    """A length or element count that is negative (and not null) or impossibly large."""


class InvalidStringError(DecodeError):
    """A string field whose bytes are not valid UTF-8."""


class FrameTooLargeError(ProtocolError):
    """A frame declared a size larger than the configured maximum."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class UnknownApiKeyError(ProtocolError):
    """A request header named an API key this library does not implement."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key


class UnsupportedVersionError(ProtocolError):
    """A message version outside its valid range, or a field absent at that version."""


class EncodeError(ProtocolError):
    """A value that cannot be encoded (wrong type, out of range, null where not allowed)."""


class CorruptRecordError(ProtocolError):
    """A record batch or legacy message whose CRC, magic or layout is invalid."""


class UnsupportedCompressionError(ProtocolError):
    """A compression codec that is unknown, or whose optional dependency is not installed."""


class DecompressionLimitError(ProtocolError):
    """Decompressed data would exceed the configured limit (a decompression bomb)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decompressed data exceeds the limit of {limit} bytes")
        self.limit = limit
