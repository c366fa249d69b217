"""The C accelerator for the client's side of Produce against the generated codec.

ProduceRequest bodies it encodes must be the generated encoder's bytes (or its
error, through the fallback); ProduceResponse bodies it decodes must be the
generated decoder's objects and end position, and what it does not take (record
errors, tagged fields, malformed bytes) it must leave whole to the fallback.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol import headers, produce_speedups
from kafkette.protocol.codec import message_decoder, message_encoder
from kafkette.protocol.errors import EncodeError, ProtocolError
from kafkette.protocol.messages import MetadataRequest, ProduceRequest, ProduceResponse
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from tests.protocol.strategies import struct_of

encode_fast = produce_speedups.encode_produce_request
decode_fast = produce_speedups.decode_produce_response
VERSIONS = range(3, 12)
FAILURES = (ProtocolError, IndexError, struct.error, UnicodeDecodeError, ValueError)


class Fallback:
    """The generated codec, counting the calls the C code hands over."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.function(*args)


def python_encode(request: ProduceRequest, version: int) -> bytes | type[Exception]:
    out = bytearray()
    try:
        message_encoder(ProduceRequest, version)(out, request)
    except Exception as exc:
        return type(exc)
    return bytes(out)


def fast_encode(request: ProduceRequest, version: int) -> tuple[bytes | type[Exception], int]:
    assert encode_fast is not None
    fallback = Fallback(message_encoder(ProduceRequest, version))
    out = bytearray(b"head")
    try:
        encode_fast(version, fallback, out, request)
    except Exception as exc:
        return type(exc), fallback.calls
    assert out[:4] == b"head"
    return bytes(out[4:]), fallback.calls


def python_decode(buf: bytes, pos: int, version: int) -> Any:
    try:
        return message_decoder(ProduceResponse, version)(buf, pos)
    except FAILURES as exc:
        return type(exc)


def fast_decode(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    assert decode_fast is not None
    fallback = Fallback(message_decoder(ProduceResponse, version))
    try:
        return decode_fast(version, fallback, buf, pos), fallback.calls
    except FAILURES as exc:
        return type(exc), fallback.calls


def _partition(**fields: Any) -> PartitionProduceResponse:
    return PartitionProduceResponse(**{"index": 2, "base_offset": 41, **fields})


def test_the_codec_uses_the_extension_for_produce_on_the_client() -> None:
    assert encode_fast is not None and decode_fast is not None  # built by the test setup
    request_entry = headers._request_encoding(ProduceRequest, 11)
    assert request_entry is not None
    encoder: Any = request_entry[1]
    assert (encoder.func, encoder.args) == (
        encode_fast,
        (11, message_encoder(ProduceRequest, 11)),
    )
    response_entry = headers._response_decoding(0, 11)
    assert response_entry is not None
    decoder: Any = response_entry[2]
    assert (decoder.func, decoder.args) == (
        decode_fast,
        (11, message_decoder(ProduceResponse, 11)),
    )
    assert headers._request_encoding(ProduceRequest, 2) == (
        1,
        message_encoder(ProduceRequest, 2),
    )


def test_a_producers_request_and_its_answer_take_the_fast_path_at_every_version() -> None:
    records = bytearray(b"batch" * 100)
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData("t", [PartitionProduceData(0, records)])],
    )
    response = ProduceResponse(
        responses=[TopicProduceResponse("t", [_partition(log_start_offset=0)])],
        throttle_time_ms=0,
    )
    for version in VERSIONS:
        assert fast_encode(request, version) == (python_encode(request, version), 0)
        body = bytearray(b"xy")
        message_encoder(ProduceResponse, version)(body, response)
        decoded, calls = fast_decode(bytes(body), 2, version)
        assert calls == 0
        assert decoded == (response if version >= 5 else _log_start_unknown(response), len(body))


def _log_start_unknown(response: ProduceResponse) -> ProduceResponse:
    for topic in response.responses:
        for p in topic.partition_responses:
            p.log_start_offset = -1
    return response


requests = st.sampled_from(VERSIONS).flatmap(
    lambda v: st.tuples(st.just(v), struct_of(ProduceRequest, v, v >= 9))
)


@settings(max_examples=200, deadline=None)
@given(requests, st.sampled_from([bytes, bytearray, memoryview]))
def test_encoded_requests_are_those_of_the_generated_encoder(
    drawn: tuple[int, ProduceRequest], kind: type
) -> None:
    version, request = drawn
    for topic in request.topic_data:
        for p in topic.partition_data:
            if p.records is not None:
                p.records = kind(bytes(p.records))
    got, _ = fast_encode(request, version)
    assert got == python_encode(request, version)


def test_requests_the_fast_path_leaves_to_the_generated_encoder() -> None:
    def request(**partition: Any) -> ProduceRequest:
        return ProduceRequest(
            acks=1,
            timeout_ms=5,
            topic_data=[TopicProduceData("t", [PartitionProduceData(**{"index": 0, **partition})])],
        )

    for bad in (
        request(records="text"),  # not bytes: the generated encoder's error
        request(index=1 << 31),
        ProduceRequest(acks=1 << 15, topic_data=[]),
        ProduceRequest(topic_data=[TopicProduceData(None, [])]),  # type: ignore[arg-type]
    ):
        for version in (3, 8, 9, 11):
            got, calls = fast_encode(bad, version)
            assert calls == 1
            assert got == python_encode(bad, version)


responses = st.sampled_from(VERSIONS).flatmap(
    lambda v: st.tuples(st.just(v), struct_of(ProduceResponse, v, v >= 9))
)


@settings(max_examples=200, deadline=None)
@given(responses)
def test_decoded_responses_are_those_of_the_generated_decoder(
    drawn: tuple[int, ProduceResponse],
) -> None:
    version, response = drawn
    body = bytearray(b"\x00\x00\x00\x07")
    message_encoder(ProduceResponse, version)(body, response)
    got, _ = fast_decode(bytes(body), 4, version)
    assert got == python_decode(bytes(body), 4, version)


@settings(max_examples=300, deadline=None)
@given(
    responses,
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), min_size=1, max_size=3),
    st.integers(0, 300),
)
def test_altered_responses_are_decoded_the_same_or_left_to_python(
    drawn: tuple[int, ProduceResponse], flips: list[tuple[int, int]], cut: int
) -> None:
    version, response = drawn
    body = bytearray()
    message_encoder(ProduceResponse, version)(body, response)
    if not body:
        return
    for position, value in flips:
        body[position % len(body)] = value
    data = bytes(body[: max(1, len(body) - cut)])
    got, _ = fast_decode(data, 0, version)
    assert got == python_decode(data, 0, version)


def test_responses_the_fast_path_leaves_to_the_generated_decoder() -> None:
    for version, response in (
        (
            8,
            ProduceResponse(
                [
                    TopicProduceResponse(
                        "t", [_partition(record_errors=[BatchIndexAndErrorMessage(0, "bad")])]
                    )
                ]
            ),
        ),
        (
            10,
            ProduceResponse(
                [TopicProduceResponse("t", [_partition(current_leader=LeaderIdAndEpoch(3, 4))])]
            ),
        ),
    ):
        body = bytearray()
        message_encoder(ProduceResponse, version)(body, response)
        got, calls = fast_decode(bytes(body), 0, version)
        assert calls == 1
        assert got == (response, len(body))
    assert decode_fast is not None
    for version in (0, 2, 12):  # versions it does not take go to the fallback too
        fallback = Fallback(lambda buf, pos: ("python", pos))
        assert decode_fast(version, fallback, b"", 0) == ("python", 0)
        assert fallback.calls == 1


def _frame(request: ProduceRequest, version: int, client_id: str | None = "client") -> bytes:
    return bytes(headers.encode_request_frame(request, version, 7, client_id))


@settings(max_examples=200, deadline=None)
@given(
    requests,
    st.sampled_from([bytes, bytearray, memoryview]),
    st.sampled_from([1, 4096]),
    st.sampled_from([None, "client", "prodücer-ü" * 20]),
)
def test_a_request_in_pieces_is_the_frame_and_leaves_large_batches_where_they_are(
    drawn: tuple[int, ProduceRequest], kind: type, repeat: int, client_id: str | None
) -> None:
    """Joined, the pieces are the whole frame's bytes; a bytes or bytearray record set of
    4 KiB or more is a piece by itself, the very object (not copied); smaller ones and
    memoryviews are copied into the pieces around them."""
    version, request = drawn
    records: list[Any] = []
    for topic in request.topic_data:
        for p in topic.partition_data:
            if p.records is not None:
                p.records = kind(bytes(p.records) * repeat)
                records.append(p.records)
    parts = headers.encode_request_parts(request, version, 7, client_id)
    assert b"".join(parts) == _frame(request, version, client_id)
    referenced = [p for p in parts if any(p is r for r in records)]
    assert referenced == [r for r in records if kind is not memoryview and len(r) >= 4096]
    assert isinstance(parts[0], bytearray) and len(parts[0]) >= 4


def test_a_request_the_pieces_encoder_declines_is_one_frame() -> None:
    """What only the generated encoder takes (a version under 3, records that are not
    bytes) comes whole from it, or raises its error."""
    records = bytearray(b"r" * 5000)
    request = ProduceRequest(
        acks=1, timeout_ms=5, topic_data=[TopicProduceData("t", [PartitionProduceData(0, records)])]
    )
    parts = headers.encode_request_parts(request, 2, 7, "client")
    assert len(parts) == 1 and bytes(parts[0]) == _frame(request, 2)
    bad = ProduceRequest(
        acks=1,
        timeout_ms=5,
        topic_data=[TopicProduceData("t", [PartitionProduceData(0, "x")])],  # type: ignore[arg-type]
    )
    with pytest.raises(EncodeError):
        headers.encode_request_parts(bad, 9, 7, "client")
    metadata = MetadataRequest(topics=None)
    assert headers.encode_request_parts(metadata, 9, 7, None) == [
        headers.encode_request_frame(metadata, 9, 7, None)
    ]
