"""Confluent's framing: magic byte, schema id, Protobuf message indexes."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry._sync.protobuf import ProtobufSerializer as CProtobufSerializer
from hypothesis import given
from hypothesis import strategies as st

from kafkette.errors import SerializationError
from kafkette.schema_registry.serializers.framing import (
    decode_indexes,
    encode_indexes,
    frame,
    unframe,
)

indexes = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=20)


def confluent_indexes(values: list[int]) -> bytes:
    import io

    buffer = io.BytesIO()
    CProtobufSerializer._encode_varints(buffer, values)
    return buffer.getvalue()


@given(values=indexes)
def test_indexes_encode_as_confluents(values: list[int]) -> None:
    """Message indexes are confluent-kafka's bytes and read back the same."""
    encoded = encode_indexes(values)
    assert encoded == confluent_indexes(values)
    assert decode_indexes(memoryview(encoded + b"rest")) == (values, memoryview(b"rest"))


def test_the_first_message_is_one_zero_byte() -> None:
    """``[0]`` is written as the single byte 0, and a count of zero reads as ``[0]``."""
    assert encode_indexes([0]) == b"\x00"
    assert encode_indexes([1]) == b"\x02\x02"
    assert decode_indexes(memoryview(b"\x00\x08"))[0] == [0]


@given(schema_id=st.integers(0, 2**31 - 1), payload=st.binary())
def test_frame_round_trip(schema_id: int, payload: bytes) -> None:
    """The magic byte 0, the id in 4 big-endian bytes, then the payload."""
    framed = frame(schema_id, payload)
    assert framed == b"\x00" + schema_id.to_bytes(4, "big") + payload
    found, rest = unframe(framed)
    assert (found, bytes(rest)) == (schema_id, payload)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "at least 5 bytes"),
        (b"\x00\x00\x00", "at least 5 bytes"),
        (b"\x01\x00\x00\x00\x01x", "unknown magic byte 1"),
    ],
)
def test_unframe_refuses_what_is_not_framed(data: bytes, message: str) -> None:
    """Short data and another magic byte are SerializationErrors naming the problem."""
    with pytest.raises(SerializationError, match=message):
        unframe(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x80",
        b"\x04\x02",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        b"\xfe\x0f",
        b"\x02\x01",
    ],
)
def test_corrupt_indexes_are_refused(data: bytes) -> None:
    """Truncated varints, overlong ones, absurd counts, negative indexes: SerializationErrors."""
    with pytest.raises(SerializationError):
        decode_indexes(memoryview(data))


@given(data=st.binary(max_size=40))
def test_any_bytes_unframe_or_raise_serialization_error(data: bytes) -> None:
    """Whatever the bytes, reading a frame and its indexes gives values or SerializationError."""
    try:
        _, rest = unframe(data)
        indexes, _ = decode_indexes(rest)
    except SerializationError:
        return
    assert indexes and all(i >= 0 for i in indexes)
