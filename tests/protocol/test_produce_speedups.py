"""The C accelerator for the broker's side of Produce against the generated codec.

What it takes it must decode and encode exactly as the generated code does;
what it does not take it must leave whole to it (None from the decoder, the
fallback's own bytes or error from the encoder). Without the extension (not
built, or KAFKETTE_NO_EXTENSIONS=1) only the Python path exists and the
comparisons are skipped over by construction: the hooks are then None.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol import headers, produce_speedups
from kafkette.protocol.codec import message_decoder, message_encoder
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.headers import decode_request, encode_request, encode_response
from kafkette.protocol.messages import ProduceRequest, ProduceResponse
from kafkette.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.messages.request_header import RequestHeader
from tests.protocol.strategies import struct_of

decode_fast = produce_speedups.decode_produce_request
encode_fast = produce_speedups.encode_produce_response
VERSIONS = range(3, 12)


def python_decode(frame: bytes) -> tuple[Any, Any]:
    """The generated decoders' reading of a Produce frame (header, then body)."""
    version = struct.unpack_from(">h", frame, 2)[0]
    header, pos = message_decoder(RequestHeader, 2 if version >= 9 else 1)(frame, 0)
    body, _ = message_decoder(ProduceRequest, version)(frame, pos)
    return header, body


def python_encode(response: ProduceResponse, version: int) -> bytes | type[Exception]:
    out = bytearray()
    try:
        message_encoder(ProduceResponse, version)(out, response)
    except Exception as exc:
        return type(exc)
    return bytes(out)


def fast_encode(response: ProduceResponse, version: int) -> bytes | type[Exception]:
    assert encode_fast is not None
    out = bytearray(b"prefix")
    try:
        encode_fast(version, message_encoder(ProduceResponse, version), out, response)
    except Exception as exc:
        return type(exc)
    assert out[:6] == b"prefix"
    return bytes(out[6:])


def test_the_codec_uses_the_extension_when_built() -> None:
    assert headers._decode_produce_request is decode_fast
    entry = headers._response_encoding(ProduceResponse, 11)
    assert entry is not None
    encoder: Any = entry[1]
    if encode_fast is None:
        assert encoder is message_encoder(ProduceResponse, 11)
    else:
        assert (encoder.func, encoder.args) == (
            encode_fast,
            (11, message_encoder(ProduceResponse, 11)),
        )


requests = st.sampled_from(VERSIONS).flatmap(
    lambda v: st.tuples(
        st.just(v),
        struct_of(ProduceRequest, v, v >= 9),
        st.one_of(st.none(), st.text(max_size=8)),
        st.integers(-(2**31), 2**31 - 1),
    )
)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_decoded_requests_are_those_of_the_generated_decoder(
    drawn: tuple[int, ProduceRequest, str | None, int],
) -> None:
    version, request, client_id, correlation_id = drawn
    frame = bytes(encode_request(request, version, correlation_id, client_id))
    expected = python_decode(frame)
    assert decode_request(frame) == expected
    if decode_fast is not None:
        got = decode_fast(frame)
        assert got == expected
        assert got is not None
        for topic in got[1].topic_data:
            for partition in topic.partition_data:
                records = partition.records
                assert records is None or (type(records) is memoryview and records.readonly)


@settings(max_examples=300, deadline=None)
@given(
    requests,
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), min_size=1, max_size=3),
    st.integers(0, 400),
)
def test_altered_frames_are_decoded_the_same_or_left_to_python(
    drawn: tuple[int, ProduceRequest, str | None, int],
    flips: list[tuple[int, int]],
    cut: int,
) -> None:
    """Byte changes and truncation: the C decoder's answer, when it gives one, is the
    generated decoder's; otherwise decode_request says what the Python decoder says."""
    version, request, client_id, correlation_id = drawn
    frame = bytearray(encode_request(request, version, correlation_id, client_id))
    for position, value in flips:
        frame[position % len(frame)] = value
    data = bytes(frame[: max(4, len(frame) - cut)])
    try:
        expected: Any = python_decode(data) if data[:2] == b"\x00\x00" else None
    except (ProtocolError, IndexError, struct.error, UnicodeDecodeError) as exc:
        expected = type(exc)
    if decode_fast is not None:
        got = decode_fast(data)
        if got is not None:
            assert got == expected
    try:
        decoded: Any = decode_request(data)
    except ProtocolError:
        decoded = "error"
    if expected is not None and not isinstance(expected, type):
        version_ok = 3 <= struct.unpack_from(">h", data, 2)[0] <= 11
        if version_ok:
            assert decoded == expected


def test_tagged_fields_are_left_to_python() -> None:
    """A request header with a tagged field (v2): the generated decoder skips it."""
    assert decode_fast is not None or produce_speedups.EXTENSION_USED is False
    request = ProduceRequest(acks=1, timeout_ms=5, topic_data=[])
    frame = bytearray(encode_request(request, 11, 9, "c"))
    pos = 4 + 4 + 2 + 1  # key, version, correlation id, client id "c"
    assert frame[pos] == 0
    tagged = bytes(frame[:pos]) + b"\x01\x05\x02ab" + bytes(frame[pos + 1 :])
    if decode_fast is not None:
        assert decode_fast(tagged) is None
        assert decode_fast(bytes(frame)) is not None
    header, body = decode_request(tagged)
    assert (header.correlation_id, header.client_id, body) == (9, "c", request)


def _partition(**fields: Any) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        **{"index": 1, "base_offset": 100, "log_start_offset": 0, **fields}
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "response",
    [
        ProduceResponse(),
        ProduceResponse(responses=[TopicProduceResponse("t", [_partition()])], throttle_time_ms=3),
        ProduceResponse(
            responses=[
                TopicProduceResponse("é" * 5, [_partition(error_code=2, error_message="bad")]),
                TopicProduceResponse("u", [_partition(), _partition(log_append_time_ms=7)]),
            ]
        ),
        # taken by the generated encoder only:
        ProduceResponse(
            responses=[
                TopicProduceResponse(
                    "t",
                    [_partition(record_errors=[BatchIndexAndErrorMessage(0, "no key")])],
                )
            ]
        ),
        ProduceResponse(
            responses=[
                TopicProduceResponse("t", [_partition(current_leader=LeaderIdAndEpoch(1, 2))])
            ]
        ),
        ProduceResponse(node_endpoints=[NodeEndpoint(1, "h", 9092, None)]),
        ProduceResponse(responses=[TopicProduceResponse("t", [_partition(error_code=1 << 15)])]),
        ProduceResponse(responses=[TopicProduceResponse(None, [])]),  # type: ignore[arg-type]
        ProduceResponse(responses=[TopicProduceResponse("t", [_partition(error_message=3)])]),  # type: ignore[arg-type]
        ProduceResponse(responses=[TopicProduceResponse("\ud800", [])]),
        ProduceResponse(responses=[TopicProduceResponse("t", [_partition(index=True)])]),
    ],
)
def test_encoded_responses_are_those_of_the_generated_encoder(
    response: ProduceResponse, version: int
) -> None:
    expected = python_encode(response, version)
    if encode_fast is not None:
        assert fast_encode(response, version) == expected
    try:
        whole: Any = bytes(encode_response(response, version, 4))
    except ProtocolError:
        whole = "error"
    if isinstance(expected, bytes):
        header_size = 5 if version >= 9 else 4
        assert whole[header_size:] == expected


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(VERSIONS).flatmap(
        lambda v: st.tuples(st.just(v), struct_of(ProduceResponse, v, v >= 9))
    )
)
def test_random_responses_encode_as_the_generated_encoder(
    drawn: tuple[int, ProduceResponse],
) -> None:
    version, response = drawn
    expected = python_encode(response, version)
    if encode_fast is not None:
        assert fast_encode(response, version) == expected


def test_the_encoder_takes_only_versions_3_to_11() -> None:
    response = ProduceResponse(responses=[TopicProduceResponse("t", [_partition()])])
    if encode_fast is None:
        return
    calls: list[int] = []

    def fallback(out: bytearray, r: Any) -> None:
        calls.append(1)
        out += b"python"

    for version in (2, 12, 3, 11):
        out = bytearray()
        encode_fast(version, fallback, out, response)
        assert (out == b"python") == (version in (2, 12))
    assert len(calls) == 2
