"""Request and response headers, and whole request/response bodies.

A frame (see :mod:`kafkette.protocol.framing`) holds a header followed by a
message body. Which header version applies depends on the API and version:

- request header v2 (v1 plus tagged fields) for flexible request versions,
  v1 otherwise, and v0 only for ControlledShutdown v0;
- response header v1 (with tagged fields) for flexible versions, v0
  otherwise, except ApiVersions, whose response always uses v0 so that a
  client can read it before it knows what the broker supports.
"""

from __future__ import annotations

from typing import Any

from kafkette.protocol.errors import (
    EncodeError,
    TruncatedError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kafkette.protocol.messages import REQUESTS, RESPONSES
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.protocol.messages.response_header import ResponseHeader
from kafkette.protocol.primitives import INT16, INT32, Buffer, PartsWriter
from kafkette.protocol.schema import Request, Response

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


class UnsupportedRequestVersionError(UnsupportedVersionError):
    """A request whose API key is known but whose version is not.

    Carries the parsed header so the broker can still answer (ApiVersions
    answers with ``UNSUPPORTED_VERSION`` and its own ranges, at version 0).
    """

    def __init__(self, header: RequestHeader) -> None:
        request_cls = REQUESTS[header.request_api_key]
        low, high = request_cls.VALID_VERSIONS
        super().__init__(
            f"{request_cls.NAME} version {header.request_api_version} is not supported "
            f"(valid versions {low}-{high})"
        )
        self.header = header


def request_header_version(api_key: int, api_version: int) -> int:
    """Header version of a request with this API key and version."""
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        raise UnknownApiKeyError(api_key)
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if request_cls.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Header version of a response with this API key and version."""
    response_cls = RESPONSES.get(api_key)
    if response_cls is None:
        raise UnknownApiKeyError(api_key)
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if response_cls.is_flexible(api_version) else 0


def encode_request(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    """Header and body of ``request`` at ``version`` (without the size prefix)."""
    header = RequestHeader(request.API_KEY, version, correlation_id, client_id)
    out = bytearray()
    header.encode_into(out, request_header_version(request.API_KEY, version))
    request.encode_into(out, version)
    return out


def encode_request_frame(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    """The whole frame of ``request``: size prefix, header and body, in one buffer."""
    header = RequestHeader(request.API_KEY, version, correlation_id, client_id)
    out = bytearray(4)
    header.encode_into(out, request_header_version(request.API_KEY, version))
    request.encode_into(out, version)
    size = len(out) - 4
    if size > 0x7FFFFFFF:
        raise EncodeError(f"frame body of {size} bytes does not fit an int32 size")
    INT32.pack_into(out, 0, size)
    return out


def peek_request_key(frame: Buffer) -> tuple[int, int]:
    """API key and version of a request frame, read without parsing the rest."""
    if len(frame) < 4:
        raise TruncatedError("request frame too short for an API key and version")
    return INT16.unpack_from(frame, 0)[0], INT16.unpack_from(frame, 2)[0]


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Parse a request frame's header; returns it and the position of the body.

    An unknown API key raises :class:`UnknownApiKeyError`. A known key at an
    unknown version is parsed with the newest header layout of that API (the
    client may be newer than us) so the correlation id can still be answered.
    """
    api_key, api_version = peek_request_key(frame)
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        raise UnknownApiKeyError(api_key)
    low, high = request_cls.VALID_VERSIONS
    header_version = request_header_version(api_key, min(max(api_version, low), high))
    return RequestHeader.decode_from(frame, 0, header_version)


def decode_request(frame: Buffer) -> tuple[RequestHeader, Request]:
    """Parse a whole request frame (broker side).

    Raises :class:`UnknownApiKeyError`, :class:`UnsupportedRequestVersionError`
    (carrying the header) or another :class:`ProtocolError` for bad bytes.
    """
    header, pos = decode_request_header(frame)
    request_cls = REQUESTS[header.request_api_key]
    low, high = request_cls.VALID_VERSIONS
    if not low <= header.request_api_version <= high:
        raise UnsupportedRequestVersionError(header)
    request, _ = request_cls.decode_from(frame, pos, header.request_api_version)
    return header, request


def encode_response(response: Response, version: int, correlation_id: int) -> bytearray:
    """Header and body of ``response`` at ``version`` (without the size prefix)."""
    out = bytearray()
    ResponseHeader(correlation_id).encode_into(
        out, response_header_version(response.API_KEY, version)
    )
    response.encode_into(out, version)
    return out


def encode_response_parts(response: Response, version: int, correlation_id: int) -> list[Any]:
    """Like :func:`encode_response`, keeping external record regions as separate parts.

    Returns the frame body as bytes and ``ExternalRecords`` parts, in order;
    ``sum(len(p) for p in parts)`` is the body size.
    """
    out = PartsWriter()
    ResponseHeader(correlation_id).encode_into(
        out, response_header_version(response.API_KEY, version)
    )
    response.encode_into(out, version)
    return out.parts()


def peek_correlation_id(frame: Buffer) -> int:
    """Correlation id of a response frame (its first four bytes)."""
    if len(frame) < 4:
        raise TruncatedError("response frame too short for a correlation id")
    return int.from_bytes(frame[:4], "big", signed=True)


def decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[int, Response]:
    """Parse a response frame to a request of ``api_key`` at ``api_version``.

    Returns the correlation id and the response body.
    """
    response_cls = RESPONSES.get(api_key)
    if response_cls is None:
        raise UnknownApiKeyError(api_key)
    header, pos = ResponseHeader.decode_from(
        frame, 0, response_header_version(api_key, api_version)
    )
    response, _ = response_cls.decode_from(frame, pos, api_version)
    return header.correlation_id, response


__all__ = [
    "UnsupportedRequestVersionError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "peek_correlation_id",
    "peek_request_key",
    "request_header_version",
    "response_header_version",
]
