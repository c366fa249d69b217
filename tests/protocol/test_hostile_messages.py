"""Hostile bytes in message bodies and frames yield specific protocol errors.

Never a bare IndexError/struct.error/MemoryError, a hang, or an allocation
sized by the attacker.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kafkette.protocol.errors import (
    DecodeError,
    FrameTooLargeError,
    InvalidLengthError,
    InvalidStringError,
    TruncatedError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kafkette.protocol.framing import FrameDecoder
from kafkette.protocol.headers import decode_request
from kafkette.protocol.messages import MetadataRequest, ProduceRequest
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic


def test_invalid_utf8_string() -> None:
    """A topic name whose bytes are not UTF-8 (v0: int32 count, int16 length)."""
    body = b"\x00\x00\x00\x01\x00\x02\xff\xfe"
    with pytest.raises(InvalidStringError):
        MetadataRequest.decode(body, 0)


def test_invalid_utf8_compact_string() -> None:
    body = b"\x02\x03\xc3\x28\x00\x00\x00\x00\x00"  # compact array of 1, "\xc3\x28", tags
    with pytest.raises(InvalidStringError):
        MetadataRequest.decode(body, 9)


def test_forged_array_count_is_rejected_before_looping() -> None:
    """2**31-1 elements declared in a 10-byte body: rejected at once, no big allocation."""
    body = b"\x7f\xff\xff\xff" + b"\x00\x01a" * 2
    tracemalloc.start()
    try:
        with pytest.raises(InvalidLengthError, match="cannot fit"):
            MetadataRequest.decode(body, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_forged_compact_array_count() -> None:
    body = b"\xff\xff\xff\xff\x07" + b"\x00" * 8  # uvarint 2**31-1 (+1 encoding)
    with pytest.raises(InvalidLengthError):
        MetadataRequest.decode(body, 9)


def test_overlong_varint() -> None:
    body = b"\xff\xff\xff\xff\xff\xff\x01"
    with pytest.raises(InvalidLengthError):
        MetadataRequest.decode(body, 9)


def test_string_length_past_the_end() -> None:
    body = b"\x00\x00\x00\x01\x7f\xff" + b"abc"
    with pytest.raises(TruncatedError):
        MetadataRequest.decode(body, 0)


def test_negative_length_for_non_nullable_string() -> None:
    body = b"\x00\x00\x00\x01\xff\xfe"
    with pytest.raises(InvalidLengthError):
        MetadataRequest.decode(body, 0)


def test_forged_records_length() -> None:
    """A ProduceRequest whose records claim 2 GiB: truncated, nothing allocated for it."""
    body = struct.pack(">hhi", -1, 1, 1000)  # transactional id null, acks, timeout
    body += struct.pack(">ih", 1, 1) + b"t" + struct.pack(">ii", 1, 0)  # 1 topic, 1 partition 0
    body += struct.pack(">i", 0x7FFFFFFF) + b"x" * 16
    with pytest.raises(TruncatedError):
        ProduceRequest.decode(body, 3)


def test_null_array_where_not_nullable() -> None:
    with pytest.raises(InvalidLengthError):
        ProduceRequest.decode(struct.pack(">hhii", -1, 1, 1000, -1), 3)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b"\x7f\x00\x00\x00\x00\x00\x00\x01\x00\x00", id="unknown-api-key"),
        pytest.param(b"\xff\xff\x00\x00\x00\x00\x00\x01\x00\x00", id="negative-api-key"),
    ],
)
def test_unknown_api_key(frame: bytes) -> None:
    with pytest.raises(UnknownApiKeyError):
        decode_request(frame)


def test_unknown_version_of_a_known_api() -> None:
    frame = struct.pack(">hhih", 3, 500, 1, -1) + b"\x00"
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


def test_http_request_as_a_frame() -> None:
    """The four bytes 'GET ' read as a size are 1,195,725,856: refused before buffering."""
    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(b"GET / HTTP/1.1\r\n")
        decoder.next_frame()
    assert info.value.size == 1_195_725_856


def test_garbage_after_a_valid_header_is_a_decode_error() -> None:
    frame = struct.pack(">hhih", 3, 1, 7, -1) + b"\x00\x00\x00\x05\x00"
    with pytest.raises(DecodeError):
        decode_request(frame)


def test_round_trip_is_unaffected_by_trailing_bytes() -> None:
    """Decoding reads exactly one message; decode_from reports where it ended."""
    msg = MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    data = msg.encode(1) + b"trailing"
    decoded, end = MetadataRequest.decode_from(data, 0, 1)
    assert decoded == msg
    assert data[end:] == b"trailing"
