"""Request/response headers and whole request/response bodies."""

from __future__ import annotations

import pytest

from kafkette.protocol.errors import TruncatedError, UnknownApiKeyError
from kafkette.protocol.headers import (
    UnsupportedRequestVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_request_frame,
    encode_response,
    encode_response_frame,
    peek_correlation_id,
    request_header_version,
    response_header_version,
)
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceResponse,
)
from kafkette.protocol.messages.api_versions_response import ApiVersion
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.messages.produce_response import (
    PartitionProduceResponse,
    TopicProduceResponse,
)


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [(7, 0, 0), (7, 1, 1), (3, 8, 1), (3, 9, 2), (18, 2, 1), (18, 3, 2), (0, 8, 1), (0, 9, 2)],
)
def test_request_header_version(api_key: int, version: int, expected: int) -> None:
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [(3, 8, 0), (3, 9, 1), (18, 0, 0), (18, 3, 0), (18, 4, 0), (1, 11, 0), (1, 12, 1)],
)
def test_response_header_version(api_key: int, version: int, expected: int) -> None:
    """ApiVersions responses always use header v0, even at flexible versions."""
    assert response_header_version(api_key, version) == expected


def test_request_round_trip_flexible() -> None:
    request = MetadataRequest(topics=[MetadataRequestTopic(name="orders")])
    frame = encode_request(request, 12, correlation_id=42, client_id="app")
    # header v2: key, version, correlation id, non-compact client id, empty tagged section
    assert frame.startswith(b"\x00\x03\x00\x0c\x00\x00\x00\x2a\x00\x03app\x00")
    header, decoded = decode_request(frame)
    assert (header.request_api_key, header.request_api_version) == (3, 12)
    assert (header.correlation_id, header.client_id) == (42, "app")
    assert decoded == request


def test_request_round_trip_null_client_id() -> None:
    frame = encode_request(MetadataRequest(topics=None), 1, correlation_id=-5, client_id=None)
    assert frame == b"\x00\x03\x00\x01\xff\xff\xff\xfb\xff\xff\xff\xff\xff\xff"
    header, decoded = decode_request(frame)
    assert header.client_id is None and header.correlation_id == -5
    assert decoded == MetadataRequest(topics=None)


def test_unknown_api_key() -> None:
    with pytest.raises(UnknownApiKeyError) as info:
        decode_request(b"\x7f\x00\x00\x00\x00\x00\x00\x01\x00\x00")
    assert info.value.api_key == 0x7F00


def test_unsupported_version_keeps_the_header() -> None:
    """A newer ApiVersions than ours still yields its correlation id (for the v0 fallback)."""
    # ApiVersions v99, header v2: correlation id 77, client id "new", empty tags, then a body
    frame = b"\x00\x12\x00\x63\x00\x00\x00\x4d\x00\x03new\x00" + b"\x05hello"
    with pytest.raises(UnsupportedRequestVersionError) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 77
    assert info.value.header.request_api_version == 99
    assert info.value.header.client_id == "new"


def test_truncated_header() -> None:
    with pytest.raises(TruncatedError):
        decode_request(b"\x00\x03")
    with pytest.raises(TruncatedError):
        decode_request(b"\x00\x03\x00\x01\x00\x00")
    with pytest.raises(TruncatedError):
        peek_correlation_id(b"\x00")


def test_api_versions_response_uses_header_v0() -> None:
    response = ApiVersionsResponse(error_code=0, api_keys=[ApiVersion(0, 0, 11)])
    frame = encode_response(response, 3, correlation_id=9)
    assert frame[:4] == b"\x00\x00\x00\x09"
    assert frame[4:6] == b"\x00\x00"  # the body's error code follows the correlation id directly
    assert peek_correlation_id(frame) == 9
    assert decode_response(frame, 18, 3) == (9, response)


def test_flexible_response_header_has_tagged_section() -> None:
    frame = encode_response(MetadataResponse(), 12, correlation_id=1)
    assert frame[:5] == b"\x00\x00\x00\x01\x00"
    assert decode_response(frame, 3, 12) == (1, MetadataResponse())
    assert encode_response(MetadataResponse(), 8, correlation_id=1)[4:8] == b"\x00\x00\x00\x00"


def test_api_versions_request_v0_has_empty_body() -> None:
    assert (
        encode_request(ApiVersionsRequest(), 0, 1, "c")
        == b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01c"
    )


@pytest.mark.parametrize("client_id", ["kafkette", None])
@pytest.mark.parametrize(
    ("request_", "version"),
    [
        (ApiVersionsRequest(), 0),
        (ApiVersionsRequest(client_software_name="k"), 3),
        (MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 12),
    ],
)
def test_request_frame_is_the_size_prefix_and_the_encoded_request(
    request_: ApiVersionsRequest | MetadataRequest, version: int, client_id: str | None
) -> None:
    body = bytes(encode_request(request_, version, 41, client_id))
    frame = encode_request_frame(request_, version, 41, client_id)
    assert bytes(frame) == len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@pytest.mark.parametrize(
    "response",
    [
        ProduceResponse([TopicProduceResponse("t", [PartitionProduceResponse(2, 0, 17, -1, 0)])]),
        MetadataResponse(),
        MetadataResponse(throttle_time_ms=5),
    ],
)
def test_response_frame_is_the_size_prefix_and_the_encoded_response(
    response: ProduceResponse | MetadataResponse | ApiVersionsResponse, version: int
) -> None:
    body = bytes(encode_response(response, version, 7))
    frame = encode_response_frame(response, version, 7)
    assert bytes(frame) == len(body).to_bytes(4, "big") + body
