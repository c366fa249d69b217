"""The hand-written Produce codec in C (kafkette.protocol._produce) against the generated one.

For every version the C code takes (3 to 11, both directions, both sides):
random requests and responses over every field of that version (hypothesis,
``struct_of``: full integer ranges and their edges, None where nullable, tagged
fields where flexible) encode to the generated encoder's bytes, and those bytes
decode back, by the C decoder and by the generated one, to equal objects, equal
to what was encoded. Versions 0 to 2 are the generated codec's alone.

The module is bound here as kafkette.protocol.produce_speedups binds it, so
these tests compare the two codecs also under KAFKETTE_NO_EXTENSIONS=1 (which
only turns the selection off); they need the extension built (CI builds it).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol import _produce
from kafkette.protocol.codec import message_decoder, message_encoder
from kafkette.protocol.messages import ProduceRequest, ProduceResponse
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.messages.produce_response import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.messages.request_header import RequestHeader
from tests.protocol.strategies import struct_of

_produce.bind(
    RequestHeader, ProduceRequest, TopicProduceData, PartitionProduceData, LeaderIdAndEpoch
)
_produce.bind_client(ProduceResponse, TopicProduceResponse, PartitionProduceResponse)

C_VERSIONS = range(3, 12)
ALL_VERSIONS = range(ProduceRequest.VALID_VERSIONS[0], ProduceRequest.VALID_VERSIONS[1] + 1)


class Fallback:
    """The generated codec, counting the calls the C code hands over."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.function(*args)


def c_encode(encode: Any, cls: type, version: int, message: Any) -> tuple[bytes, int]:
    fallback = Fallback(message_encoder(cls, version))
    out = bytearray(b"head")
    encode(version, fallback, out, message)
    assert out[:4] == b"head"
    return bytes(out[4:]), fallback.calls


def generated_encode(cls: type, version: int, message: Any) -> bytes:
    out = bytearray()
    message_encoder(cls, version)(out, message)
    return bytes(out)


def request_frame(body: bytes, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A Produce request frame (header, then ``body``) as a broker receives it."""
    head = bytearray()
    header = RequestHeader(0, version, correlation_id, client_id)
    message_encoder(RequestHeader, 2 if version >= 9 else 1)(head, header)
    return bytes(head) + body


def _encodable(message: Any, cls: type, version: int) -> bool:
    try:
        generated_encode(cls, version, message)
    except Exception:
        return False
    return True


requests = st.sampled_from(C_VERSIONS).flatmap(
    lambda v: st.tuples(
        st.just(v),
        struct_of(ProduceRequest, v, v >= 9),
        st.one_of(st.none(), st.text(max_size=8)),
        st.integers(-(2**31), 2**31 - 1),
    )
)


@settings(max_examples=400, deadline=None)
@given(requests)
def test_requests_encode_and_decode_as_the_generated_codec(
    drawn: tuple[int, ProduceRequest, str | None, int],
) -> None:
    """Client side: same bytes. Broker side: the C decoder reads those bytes as the
    generated decoder does, and both give back the request that was encoded."""
    version, request, client_id, correlation_id = drawn
    body, calls = c_encode(_produce.encode_produce_request, ProduceRequest, version, request)
    assert calls == 0  # every drawn request is the C code's own
    assert body == generated_encode(ProduceRequest, version, request)
    generated, end = message_decoder(ProduceRequest, version)(body, 0)
    assert end == len(body)
    assert generated == request
    frame = request_frame(body, version, correlation_id, client_id)
    decoded = _produce.decode_produce_request(frame)
    assert decoded is not None
    header, c_request = decoded
    assert header == RequestHeader(0, version, correlation_id, client_id)
    assert c_request == generated == request


responses = st.sampled_from(C_VERSIONS).flatmap(
    lambda v: st.tuples(st.just(v), struct_of(ProduceResponse, v, v >= 9))
)


@settings(max_examples=400, deadline=None)
@given(responses)
def test_responses_encode_and_decode_as_the_generated_codec(
    drawn: tuple[int, ProduceResponse],
) -> None:
    """Broker side: same bytes (or the generated encoder's own work where the C code
    hands over). Client side: the C decoder reads them back as the generated one."""
    version, response = drawn
    body, _ = c_encode(_produce.encode_produce_response, ProduceResponse, version, response)
    assert body == generated_encode(ProduceResponse, version, response)
    generated = message_decoder(ProduceResponse, version)(body, 0)
    fallback = Fallback(message_decoder(ProduceResponse, version))
    assert _produce.decode_produce_response(version, fallback, body, 0) == generated
    assert generated == (response, len(body))


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([v for v in ALL_VERSIONS if v not in C_VERSIONS]).flatmap(
        lambda v: st.tuples(st.just(v), struct_of(ProduceRequest, v, False))
    )
)
def test_other_versions_are_the_generated_codecs(drawn: tuple[int, ProduceRequest]) -> None:
    """Below version 3 the C encoder hands the whole request to the generated one, and
    the C decoder leaves the frame to it."""
    version, request = drawn
    if not _encodable(request, ProduceRequest, version):
        return
    body, calls = c_encode(_produce.encode_produce_request, ProduceRequest, version, request)
    assert calls == 1
    assert body == generated_encode(ProduceRequest, version, request)
    assert _produce.decode_produce_request(request_frame(body, version, 1, "c")) is None


def test_the_versions_compared_are_those_the_selection_uses() -> None:
    from kafkette.protocol import produce_speedups

    assert (produce_speedups.MIN_VERSION, produce_speedups.MAX_VERSION) == (3, 11)
    assert ProduceRequest.VALID_VERSIONS == (0, 11)  # a new version needs C work or a limit
