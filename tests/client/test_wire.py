"""The sans-I/O client wire: correlation ids and response matching."""

from __future__ import annotations

import pytest

from kafkette.client.wire import ClientWire, UnexpectedResponseError
from kafkette.protocol.framing import encode_frame
from kafkette.protocol.headers import decode_request, encode_response
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.api_versions_response import ApiVersion


def test_responses_matched_by_correlation_id_byte_by_byte() -> None:
    """Two pipelined requests; responses fed one byte at a time, out of order."""
    wire = ClientWire("me")
    first, frame1 = wire.send(MetadataRequest(topics=None), 12)
    second, _ = wire.send(ApiVersionsRequest(), 3)
    assert (first, second) == (0, 1)
    assert wire.in_flight == 2
    assert int.from_bytes(frame1[:4], "big") == len(frame1) - 4
    header, request = decode_request(bytes(frame1[4:]))
    assert (header.correlation_id, header.client_id, request) == (
        0,
        "me",
        MetadataRequest(topics=None),
    )

    versions = ApiVersionsResponse(api_keys=[ApiVersion(3, 0, 12)])
    data = encode_frame(bytes(encode_response(versions, 3, second)))
    data += encode_frame(bytes(encode_response(MetadataResponse(cluster_id="c"), 12, first)))
    received = []
    for i in range(len(data)):
        received += wire.receive_data(data[i : i + 1])
    assert received == [(1, versions), (0, MetadataResponse(cluster_id="c"))]
    assert wire.in_flight == 0


def test_forgotten_request_is_dropped() -> None:
    wire = ClientWire(None)
    cid, _ = wire.send(MetadataRequest(), 1)
    wire.forget(cid)
    data = encode_frame(bytes(encode_response(MetadataResponse(), 1, cid)))
    assert wire.receive_data(data) == [(cid, None)]


def test_unknown_correlation_id() -> None:
    wire = ClientWire(None)
    data = encode_frame(bytes(encode_response(MetadataResponse(), 1, 77)))
    with pytest.raises(UnexpectedResponseError):
        wire.receive_data(data)


def test_no_response_expected_is_not_tracked() -> None:
    wire = ClientWire(None)
    wire.send(MetadataRequest(), 1, expect_response=False)
    assert wire.in_flight == 0


def test_api_versions_v0_fallback_answer_is_read() -> None:
    """A broker that does not know ApiVersions v4 answers at v0; the wire reads it."""
    wire = ClientWire(None)
    cid, _ = wire.send(ApiVersionsRequest(client_software_name="k"), 4)
    answer = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 2)])
    data = encode_frame(bytes(encode_response(answer, 0, cid)))
    assert wire.receive_data(data) == [(cid, answer)]
