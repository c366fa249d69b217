"""The client side of one Kafka connection, without I/O.

:class:`ClientWire` numbers requests, remembers which API and version each
correlation id was sent with, and turns received bytes into
``(correlation_id, response)`` pairs. The connection around it
(:mod:`kafkette.client.connection`) owns the socket; this class can be
driven byte by byte in tests.
"""

from __future__ import annotations

import attrs

from kafkette.client.throttle import client_throttle_ms
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.protocol.errors import DecodeError
from kafkette.protocol.framing import FrameDecoder
from kafkette.protocol.headers import (
    decode_response,
    encode_request_frame,
    encode_request_parts,
    peek_correlation_id,
)
from kafkette.protocol.primitives import Buffer
from kafkette.protocol.schema import Request, Response

DEFAULT_MAX_RESPONSE_SIZE = 2**31 - 1
API_VERSIONS_KEY = 18
SPARE_RESPONSE_BUFFERS = 3
"""Buffers of large responses (fetches) kept to receive later ones into, once the records
viewing them are dropped: fresh memory faults in page by page (see FrameDecoder)."""


class UnexpectedResponseError(DecodeError):
    """A response whose correlation id matches no request in flight."""


@attrs.frozen
class InFlight:
    api_key: int
    api_version: int


_sent: dict[tuple[int, int], InFlight] = {}
"""One (frozen) InFlight per API key and version, shared by the requests that use them."""


class ClientWire:
    """Correlation ids and response parsing for one connection."""

    def __init__(
        self,
        client_id: str | None,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        *,
        clock: MonotonicClockMs = monotonic_ms,
    ) -> None:
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: dict[int, InFlight] = {}
        self._decoder = FrameDecoder(max_response_size, spare_buffers=SPARE_RESPONSE_BUFFERS)
        self._clock = clock
        self.throttled_until_ms = 0.0
        """Until when the broker asked for no more requests on this connection (KIP-219:
        a ``throttle_time_ms`` it answered with, counted from when the answer arrived)."""

    def throttle_delay_ms(self) -> float:
        """How long requests must still wait for the broker's throttle (0: none)."""
        until = self.throttled_until_ms
        return max(until - self._clock(), 0.0) if until else 0.0

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not been read yet."""
        return len(self._in_flight)

    def send(
        self, request: Request, version: int, *, expect_response: bool = True
    ) -> tuple[int, bytearray]:
        """Encode ``request``: returns its correlation id and the whole frame."""
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        frame = encode_request_frame(request, version, correlation_id, self.client_id)
        if expect_response:
            self._in_flight[correlation_id] = InFlight(request.API_KEY, version)
        return correlation_id, frame

    def send_parts(self, request: Request, version: int) -> tuple[int, list[Buffer]]:
        """Encode ``request`` (a response expected): its correlation id and the frame in
        pieces, a Produce request's large batches by reference (see
        :func:`~kafkette.protocol.headers.encode_request_parts`)."""
        correlation_id = self._next_id
        parts = encode_request_parts(request, version, correlation_id, self.client_id)
        self._next_id = (correlation_id + 1) & 0x7FFFFFFF
        sent = _sent.get((request.API_KEY, version))
        if sent is None:
            sent = _sent[request.API_KEY, version] = InFlight(request.API_KEY, version)
        self._in_flight[correlation_id] = sent
        return correlation_id, parts

    def forget(self, correlation_id: int) -> None:
        """Stop expecting a response (the caller gave up on it); it is dropped on arrival."""
        if correlation_id in self._in_flight:
            self._in_flight[correlation_id] = InFlight(-1, -1)

    def receive_data(
        self, data: bytes | bytearray | memoryview
    ) -> list[tuple[int, Response | None]]:
        """Feed received bytes; returns the complete responses, in arrival order.

        A response to a forgotten request is returned as ``(id, None)``.
        """
        self._decoder.feed(data)
        return self._responses()

    def receive_buffer(self) -> memoryview | None:
        """Where to receive the next bytes, a large response's straight into the buffer
        it is handed out in (see :meth:`FrameDecoder.receive_buffer
        <kafkette.protocol.framing.FrameDecoder.receive_buffer>`); or None: then
        receive anywhere and call :meth:`receive_data`."""
        return self._decoder.receive_buffer()

    def received(self, nbytes: int) -> list[tuple[int, Response | None]]:
        """Count ``nbytes`` received into :meth:`receive_buffer`'s view; returns the
        complete responses, as :meth:`receive_data` does."""
        self._decoder.received(nbytes)
        return self._responses()

    def _responses(self) -> list[tuple[int, Response | None]]:
        results: list[tuple[int, Response | None]] = []
        while (frame := self._decoder.next_frame()) is not None:
            correlation_id = peek_correlation_id(frame)
            sent = self._in_flight.pop(correlation_id, None)
            if sent is None:
                raise UnexpectedResponseError(
                    f"response with unknown correlation id {correlation_id}"
                )
            if sent.api_key < 0:
                results.append((correlation_id, None))
                continue
            try:
                _, response = decode_response(frame, sent.api_key, sent.api_version)
            except DecodeError:
                # A broker that does not know our ApiVersions version answers at v0 (KIP-511).
                if sent.api_key != API_VERSIONS_KEY or sent.api_version == 0:
                    raise
                _, response = decode_response(frame, API_VERSIONS_KEY, 0)
            throttle = client_throttle_ms(sent.api_key, sent.api_version, response)
            if throttle:
                self.throttled_until_ms = max(self.throttled_until_ms, self._clock() + throttle)
            results.append((correlation_id, response))
        return results
