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

import functools
import struct
from typing import Any

from kafkette.protocol.codec import (
    DECODE_FAILURES,
    ENCODE_FAILURES,
    Decoder,
    Encoder,
    decode_error,
    encode_error,
    message_decoder,
    message_encoder,
)
from kafkette.protocol.errors import (
    EncodeError,
    ProtocolError,
    TruncatedError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kafkette.protocol.messages import REQUESTS, RESPONSES
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.protocol.messages.response_header import ResponseHeader
from kafkette.protocol.primitives import INT16, INT32, Buffer, PartsWriter
from kafkette.protocol.produce_speedups import (
    MAX_VERSION as _FAST_PRODUCE_MAX,
)
from kafkette.protocol.produce_speedups import (
    MIN_VERSION as _FAST_PRODUCE_MIN,
)
from kafkette.protocol.produce_speedups import (
    decode_produce_request as _decode_produce_request,
)
from kafkette.protocol.produce_speedups import (
    decode_produce_response as _decode_produce_response,
)
from kafkette.protocol.produce_speedups import (
    encode_produce_request as _encode_produce_request,
)
from kafkette.protocol.produce_speedups import (
    encode_produce_request_parts as _encode_produce_request_parts,
)
from kafkette.protocol.produce_speedups import (
    encode_produce_response as _encode_produce_response,
)
from kafkette.protocol.schema import Request, Response

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
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


# -- the hot paths ------------------------------------------------------------------------
#
# Each of the five functions below looks its (API, version) up in a cache that holds what
# it needs: the header version and the compiled body codec. An entry exists only for a
# known API at a valid version; anything else takes the general path (the _slow_*
# functions), so unknown keys, unsupported versions and their errors, in their order,
# are those of the general path.

_HEADER_FIXED = struct.Struct(">hhi")  # api key, api version, correlation id
_KEY_AND_VERSION = struct.Struct(">hh")

# (request class, version) -> (header version, body encoder)
_request_encoders: dict[tuple[type[Request], int], tuple[int, Encoder]] = {}
# (api key, version) -> (header decoder, its name, body decoder, its name)
_request_decoders: dict[tuple[int, int], tuple[Decoder, str, Decoder, str]] = {}
# (response class, version) -> (header version, body encoder)
_response_encoders: dict[tuple[type[Response], int], tuple[int, Encoder]] = {}
# (api key, version) -> (header decoder, header version, body decoder, its name)
_response_decoders: dict[tuple[int, int], tuple[Decoder, int, Decoder, str]] = {}


def encode_request_frame(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    """The whole frame of ``request``: size prefix, header and body, in one buffer."""
    entry = _request_encoders.get((type(request), version))
    if entry is None:
        entry = _request_encoding(type(request), version)
        if entry is None:
            return _slow_encode_request_frame(request, version, correlation_id, client_id)
    header_version, encode_body = entry
    out = _frame_head(request.API_KEY, version, correlation_id, client_id, header_version)
    try:
        encode_body(out, request)
    except ENCODE_FAILURES as exc:
        raise encode_error(exc, f"{request.NAME} v{version}") from exc
    size = len(out) - 4
    if size > 0x7FFFFFFF:
        raise EncodeError(f"frame body of {size} bytes does not fit an int32 size")
    INT32.pack_into(out, 0, size)
    return out


def encode_request_parts(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> list[Buffer]:
    """The whole frame of ``request`` in pieces, to be written one after another.

    A ProduceRequest's record sets of 4 KiB or more are pieces by themselves (the
    batches' own buffers, not copied: a 1 MiB batch copied into the frame is fresh
    memory faulted in page by page); any other request is one piece, the frame of
    :func:`encode_request_frame`. The pieces must not change until written.
    """
    if request.API_KEY == PRODUCE_KEY and _encode_produce_request_parts is not None:
        encoded_id = _client_ids.get(client_id) or _encode_client_id(client_id)
        pieces = _encode_produce_request_parts(version, correlation_id, encoded_id, request)
        if pieces is not None:
            return pieces
    return [encode_request_frame(request, version, correlation_id, client_id)]


def _frame_head(
    api_key: int, version: int, correlation_id: int, client_id: str | None, header_version: int
) -> bytearray:
    """4 bytes for the frame's size, then the request header."""
    out = bytearray(4)
    try:
        # The request header written directly: api key, version and correlation id, then
        # (v1+) the client id, always a non-compact nullable string, then (v2) an empty
        # tagged section. test_codec_fast_paths checks it against the compiled RequestHeader.
        out += _HEADER_FIXED.pack(api_key, version, correlation_id)
        if header_version:
            out += _client_ids.get(client_id) or _encode_client_id(client_id)
            if header_version == 2:
                out.append(0)
    except ENCODE_FAILURES as exc:
        raise encode_error(exc, f"RequestHeader v{header_version}") from exc
    return out


# client id -> its encoding (int16 length and UTF-8, or -1 for None): a process uses a few
_client_ids: dict[str | None, bytes] = {None: b"\xff\xff"}
_MAX_CLIENT_IDS = 64


def _encode_client_id(client_id: str | None) -> bytes:
    if client_id is None:
        return b"\xff\xff"
    data = client_id.encode("utf-8")
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes exceeds the int16 length limit")
    encoded = INT16.pack(len(data)) + data
    if len(_client_ids) >= _MAX_CLIENT_IDS:
        _client_ids.clear()
        _client_ids[None] = b"\xff\xff"
    _client_ids[client_id] = encoded
    return encoded


def _request_encoding(cls: type[Request], version: int) -> tuple[int, Encoder] | None:
    try:
        header_version = request_header_version(cls.API_KEY, version)
        entry = (header_version, message_encoder(cls, version))
    except ProtocolError:
        return None
    fast = _encode_produce_request
    if (
        fast is not None
        and cls.API_KEY == PRODUCE_KEY
        and _FAST_PRODUCE_MIN <= version <= _FAST_PRODUCE_MAX
    ):
        # The C encoder, falling back to the generated one for what it does not take.
        entry = (header_version, functools.partial(fast, version, entry[1]))
    _request_encoders[cls, version] = entry
    return entry


def _slow_encode_request_frame(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
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
    try:
        key = _KEY_AND_VERSION.unpack_from(frame, 0)
    except struct.error:
        return _slow_decode_request(frame)
    if key[0] == PRODUCE_KEY and _decode_produce_request is not None:
        # The C decoder takes the common well-formed Produce frame whole; anything
        # else it leaves to the generated decoders below, which also name what is wrong.
        decoded = _decode_produce_request(frame)
        if decoded is not None:
            return decoded
    entry = _request_decoders.get(key)
    if entry is None:
        entry = _request_decoding(*key)
        if entry is None:
            return _slow_decode_request(frame)
    decode_header, header_name, decode_body, body_name = entry
    try:
        header, pos = decode_header(frame, 0)
    except DECODE_FAILURES as exc:
        raise decode_error(exc, header_name) from exc
    try:
        request, _ = decode_body(frame, pos)
    except DECODE_FAILURES as exc:
        raise decode_error(exc, body_name) from exc
    return header, request


def _request_decoding(api_key: int, version: int) -> tuple[Decoder, str, Decoder, str] | None:
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        return None
    try:
        decode_body = message_decoder(request_cls, version)
    except ProtocolError:
        return None
    header_version = request_header_version(api_key, version)
    entry = (
        message_decoder(RequestHeader, header_version),
        f"{RequestHeader.NAME} v{header_version}",
        decode_body,
        f"{request_cls.NAME} v{version}",
    )
    _request_decoders[api_key, version] = entry
    return entry


def _slow_decode_request(frame: Buffer) -> tuple[RequestHeader, Request]:
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
    _append_response(out, response, version, correlation_id)
    return out


def encode_response_frame(response: Response, version: int, correlation_id: int) -> bytearray:
    """The whole frame of ``response``: size prefix, header and body, in one buffer (for
    an answer without external record regions, which a connection writes as it is)."""
    out = bytearray(4)
    _append_response(out, response, version, correlation_id)
    size = len(out) - 4
    if size > 0x7FFFFFFF:
        raise EncodeError(f"frame body of {size} bytes does not fit an int32 size")
    INT32.pack_into(out, 0, size)
    return out


def _append_response(out: bytearray, response: Response, version: int, correlation_id: int) -> None:
    """Append the header and body of ``response`` at ``version`` to ``out``."""
    entry = _response_encoders.get((type(response), version))
    if entry is None:
        entry = _response_encoding(type(response), version)
    if entry is None:
        _slow_encode_response_into(out, response, version, correlation_id)
    else:
        _encode_response_into(out, entry, response, version, correlation_id)


def encode_response_parts(response: Response, version: int, correlation_id: int) -> list[Any]:
    """Like :func:`encode_response`, keeping external record regions as separate parts.

    Returns the frame body as bytes and ``ExternalRecords`` parts, in order;
    ``sum(len(p) for p in parts)`` is the body size.
    """
    out = PartsWriter()
    entry = _response_encoders.get((type(response), version))
    if entry is None:
        entry = _response_encoding(type(response), version)
        if entry is None:
            _slow_encode_response_into(out, response, version, correlation_id)
            return out.parts()
    _encode_response_into(out, entry, response, version, correlation_id)
    return out.parts()


def _encode_response_into(
    out: bytearray,
    entry: tuple[int, Encoder],
    response: Response,
    version: int,
    correlation_id: int,
) -> None:
    header_version, encode_body = entry
    try:
        # the response header: the correlation id, then (v1) an empty tagged section
        out += INT32.pack(correlation_id)
    except ENCODE_FAILURES as exc:
        raise encode_error(exc, f"ResponseHeader v{header_version}") from exc
    if header_version:
        out.append(0)
    try:
        encode_body(out, response)
    except ENCODE_FAILURES as exc:
        raise encode_error(exc, f"{response.NAME} v{version}") from exc


def _response_encoding(cls: type[Response], version: int) -> tuple[int, Encoder] | None:
    try:
        entry = (response_header_version(cls.API_KEY, version), message_encoder(cls, version))
    except ProtocolError:
        return None
    fast = _encode_produce_response
    if (
        fast is not None
        and cls.API_KEY == PRODUCE_KEY
        and _FAST_PRODUCE_MIN <= version <= _FAST_PRODUCE_MAX
    ):
        # The C encoder, falling back to the generated one for what it does not take.
        entry = (entry[0], functools.partial(fast, version, entry[1]))
    _response_encoders[cls, version] = entry
    return entry


def _slow_encode_response_into(
    out: bytearray, response: Response, version: int, correlation_id: int
) -> None:
    ResponseHeader(correlation_id).encode_into(
        out, response_header_version(response.API_KEY, version)
    )
    response.encode_into(out, version)


def peek_correlation_id(frame: Buffer) -> int:
    """Correlation id of a response frame (its first four bytes)."""
    if len(frame) < 4:
        raise TruncatedError("response frame too short for a correlation id")
    correlation_id: int = INT32.unpack_from(frame, 0)[0]
    return correlation_id


def decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[int, Response]:
    """Parse a response frame to a request of ``api_key`` at ``api_version``.

    Returns the correlation id and the response body.
    """
    entry = _response_decoders.get((api_key, api_version))
    if entry is None:
        entry = _response_decoding(api_key, api_version)
        if entry is None:
            return _slow_decode_response(frame, api_key, api_version)
    decode_header, header_version, decode_body, body_name = entry
    try:
        (correlation_id,) = INT32.unpack_from(frame, 0)
        if header_version == 0:
            pos = 4
        elif frame[4] == 0:  # header v1 with an empty tagged section, as usual
            pos = 5
        else:
            _, pos = decode_header(frame, 0)
    except DECODE_FAILURES as exc:
        raise decode_error(exc, f"ResponseHeader v{header_version}") from exc
    try:
        response, _ = decode_body(frame, pos)
    except DECODE_FAILURES as exc:
        raise decode_error(exc, body_name) from exc
    return correlation_id, response


def _response_decoding(api_key: int, version: int) -> tuple[Decoder, int, Decoder, str] | None:
    response_cls = RESPONSES.get(api_key)
    if response_cls is None:
        return None
    try:
        decode_body = message_decoder(response_cls, version)
    except ProtocolError:
        return None
    fast = _decode_produce_response
    if (
        fast is not None
        and api_key == PRODUCE_KEY
        and _FAST_PRODUCE_MIN <= version <= _FAST_PRODUCE_MAX
    ):
        # The C decoder, falling back to the generated one for what it does not take.
        decode_body = functools.partial(fast, version, decode_body)
    header_version = response_header_version(api_key, version)
    entry = (
        message_decoder(ResponseHeader, header_version),
        header_version,
        decode_body,
        f"{response_cls.NAME} v{version}",
    )
    _response_decoders[api_key, version] = entry
    return entry


def _slow_decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[int, Response]:
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
    "encode_request_frame",
    "encode_request_parts",
    "encode_response",
    "encode_response_frame",
    "encode_response_parts",
    "peek_correlation_id",
    "peek_request_key",
    "request_header_version",
    "response_header_version",
]
