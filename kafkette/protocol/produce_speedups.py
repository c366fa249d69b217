"""Selection of the optional C accelerator for Produce.

``decode_produce_request`` and ``encode_produce_response`` (the broker's side),
``encode_produce_request``, ``encode_produce_request_parts`` and
``decode_produce_response`` (the client's) are the
compiled functions of :mod:`kafkette.protocol._produce` when the extension was
built and the environment variable ``KAFKETTE_NO_EXTENSIONS`` is not ``1``, else None.
They take only the common, well-formed case (versions 3 to 11) and leave the
rest to the generated codec, which then decodes, encodes or raises exactly as
without them; :mod:`kafkette.protocol.headers` uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from kafkette.protocol.extensions import load_extension
from kafkette.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kafkette.protocol.messages.produce_response import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.messages.request_header import RequestHeader

DecodeProduceRequest = Callable[[Any], "tuple[RequestHeader, ProduceRequest] | None"]
EncodeProduceResponse = Callable[[int, Callable[[Any, Any], None], Any, Any], None]
EncodeProduceRequest = EncodeProduceResponse
DecodeProduceResponse = Callable[[int, Callable[[Any, int], Any], Any, int], Any]

MIN_VERSION = 3
MAX_VERSION = 11
"""The versions the extension takes (of requests and responses)."""


def _load() -> ModuleType | None:
    _produce = load_extension("kafkette.protocol._produce")
    if _produce is None:
        return None
    _produce.bind(
        RequestHeader, ProduceRequest, TopicProduceData, PartitionProduceData, LeaderIdAndEpoch
    )
    _produce.bind_client(ProduceResponse, TopicProduceResponse, PartitionProduceResponse)
    return _produce


_module = _load()

decode_produce_request: DecodeProduceRequest | None = (
    None if _module is None else _module.decode_produce_request
)
"""``(frame)``: the header and body of a ProduceRequest v3-11 frame, as the generated
decoders make them, or None when the Python decoder must handle the frame."""

encode_produce_response: EncodeProduceResponse | None = (
    None if _module is None else _module.encode_produce_response
)
"""``(version, fallback, out, response)``: append the ProduceResponse body at
``version`` to the bytearray ``out``, or return ``fallback(out, response)`` for what
only the generated encoder handles (nothing appended before that)."""

encode_produce_request: EncodeProduceRequest | None = (
    None if _module is None else _module.encode_produce_request
)
"""``(version, fallback, out, request)``: append the ProduceRequest body at ``version``
to the bytearray ``out``, or return ``fallback(out, request)`` (the client's side)."""

encode_produce_request_parts: Callable[[int, int, bytes, Any], list[Any] | None] | None = (
    None if _module is None else _module.encode_produce_request_parts
)
"""``(version, correlation_id, client_id, request)``: the whole ProduceRequest frame at
``version`` in pieces to write one after another, or None when only the generated
encoder takes the request (``client_id``: the request header's encoded client id,
its int16 length and UTF-8, or ``b"\\xff\\xff"``). The first piece is a bytearray with
the size, the header and the body up to the first large record set; each record set of
4 KiB or more (a bytes or bytearray) is a piece by itself, not copied; bytes objects
hold the rest."""

decode_produce_response: DecodeProduceResponse | None = (
    None if _module is None else _module.decode_produce_response
)
"""``(version, fallback, buf, pos)``: the ProduceResponse body at ``pos`` and where it
ends, as the generated decoder returns them, or ``fallback(buf, pos)`` for what only it
decodes (tagged fields, record errors) or refuses."""

EXTENSION_USED: bool = _module is not None
"""Whether Produce requests and responses go through the C extension."""
