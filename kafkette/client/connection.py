"""One client connection to one broker, on anyio (asyncio or trio).

Requests are pipelined: any number of tasks may call :meth:`request` at once;
frames are written whole, one after another, and responses are matched by
correlation id. How the frames move is a pipe's job
(:mod:`kafkette.client.pipes`): an asyncio protocol for TCP under asyncio, an
anyio byte stream otherwise (trio, in-process streams).

On open, the connection negotiates API versions: it sends ApiVersions at our
newest version and, if the broker does not know it, reads the version-0
answer (KIP-511) and retries with the newest version both sides know.
:meth:`version_for` then picks, per API, the highest version both support.
Given SASL credentials, it then authenticates (:mod:`kafkette.client.sasl`)
before the connection is handed out.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import anyio
import anyio.abc

from kafkette._version import __version__
from kafkette.client.pipes import AsyncioPipe, FramePipe, OnResponse, StreamPipe
from kafkette.client.sasl import SaslCredentials, authenticate
from kafkette.client.wire import ClientWire
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from kafkette.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkette.protocol.schema import Request, Response

logger = logging.getLogger("kafkette.client.connection")

API_VERSIONS_KEY = 18


def _running_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        return False
    return True


class BrokerConnection:
    """A negotiated connection to one broker; create it with :meth:`connect`."""

    def __init__(self, pipe: FramePipe, wire: ClientWire, *, address: str) -> None:
        self.address = address
        self._pipe = pipe
        self._wire = wire
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._submit_versions: dict[type[Request], int] = {}  # negotiated once, at open

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = "kafkette",
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        clock: MonotonicClockMs = monotonic_ms,
    ) -> BrokerConnection:
        """Open a TCP (or TLS) connection, negotiate API versions, authenticate (SASL).

        A refused authentication raises the broker's error
        (:class:`~kafkette.errors.SaslAuthenticationFailedError`...), not retriable.
        """
        address = f"{host}:{port}"
        wire = ClientWire(client_id, clock=clock)
        try:
            with anyio.fail_after(connect_timeout_s):
                pipe: FramePipe
                if _running_asyncio():
                    pipe = await AsyncioPipe.connect(
                        host,
                        port,
                        wire,
                        address=address,
                        request_timeout_s=request_timeout_s,
                        ssl_context=ssl_context,
                    )
                else:
                    stream: anyio.abc.ByteStream
                    if ssl_context is None:
                        stream = await anyio.connect_tcp(host, port)
                    else:
                        stream = await anyio.connect_tcp(
                            host, port, ssl_context=ssl_context, tls_standard_compatible=False
                        )
                    pipe = StreamPipe(
                        stream, wire, address=address, request_timeout_s=request_timeout_s
                    )
        except TimeoutError:
            raise KafkaTimeoutError(
                f"connecting to {address} took over {connect_timeout_s}s"
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {address}: {exc}") from exc
        connection = cls(pipe, wire, address=address)
        try:
            await connection._negotiate()
            if sasl is not None:
                await authenticate(
                    connection._send_versioned, connection.broker_versions, sasl, address
                )
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _send_versioned(self, request: Request, version: int) -> Response | None:
        return await self.request(request, version=version)

    @classmethod
    async def over_stream(
        cls,
        stream: anyio.abc.ByteStream,
        *,
        address: str,
        client_id: str | None = "kafkette",
        request_timeout_s: float = 30.0,
        clock: MonotonicClockMs = monotonic_ms,
    ) -> BrokerConnection:
        """A connection over an already open byte stream (e.g. in-process), negotiated."""
        wire = ClientWire(client_id, clock=clock)
        pipe = StreamPipe(stream, wire, address=address, request_timeout_s=request_timeout_s)
        connection = cls(pipe, wire, address=address)
        await connection._negotiate()
        return connection

    # ---- versions

    async def _negotiate(self) -> None:
        ours = ApiVersionsRequest.VALID_VERSIONS[1]
        request = ApiVersionsRequest(
            client_software_name="kafkette", client_software_version=__version__
        )
        response = await self._api_versions(request, ours)
        if response.error_code == UnsupportedVersionError.code:
            theirs = {k.api_key: k.max_version for k in response.api_keys}.get(API_VERSIONS_KEY, 0)
            response = await self._api_versions(request, min(ours, theirs))
        if response.error_code != 0:
            raise UnsupportedVersionError(
                f"ApiVersions failed with error code {response.error_code}"
            )
        self.broker_versions = {
            k.api_key: (k.min_version, k.max_version) for k in response.api_keys
        }
        self._submit_versions.clear()

    async def _api_versions(self, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
        response = await self.request(request, version=version)
        if not isinstance(response, ApiVersionsResponse):
            raise KafkaConnectionError(f"{self.address} answered ApiVersions with {response!r}")
        return response

    def version_for(self, request: type[Request] | Request, maximum: int | None = None) -> int:
        """The highest version of ``request``'s API both sides support (up to ``maximum``)."""
        api_key = request.API_KEY
        low, high = request.VALID_VERSIONS
        if maximum is not None:
            high = min(high, maximum)
        broker = self.broker_versions.get(api_key)
        if broker is None:
            raise UnsupportedVersionError(f"{self.address} does not support {request.NAME[:-7]}")
        version = min(high, broker[1])
        if version < max(low, broker[0]):
            raise UnsupportedVersionError(
                f"{self.address} supports {request.NAME[:-7]} versions {broker[0]}-{broker[1]}, "
                f"kafkette {low}-{high}"
            )
        return version

    def supports(self, request: type[Request]) -> bool:
        try:
            self.version_for(request)
        except UnsupportedVersionError:
            return False
        return True

    # ---- requests

    @property
    def closed(self) -> bool:
        return self._pipe.failure is not None

    @property
    def in_flight(self) -> int:
        return self._wire.in_flight

    async def request(
        self, request: Request, *, version: int | None = None, expect_response: bool = True
    ) -> Response | None:
        """Send ``request`` and return its response (``None`` when none is expected).

        Raises :class:`KafkaConnectionError` when the connection breaks and
        :class:`KafkaTimeoutError` after ``request.timeout.ms``; both close
        the connection, as a late response could no longer be matched safely.
        While the broker throttles the connection (KIP-219), the request waits first.
        """
        throttled_ms = self._wire.throttle_delay_ms()
        if throttled_ms > 0:
            await anyio.sleep(throttled_ms / 1000)
        failure = self._pipe.failure
        if failure is not None:
            raise KafkaConnectionError(f"connection to {self.address} is closed") from failure
        if version is None:
            version = self.version_for(request)
        correlation_id, frame = self._wire.send(request, version, expect_response=expect_response)
        return await self._pipe.exchange(frame, correlation_id, expect_response)

    def throttle_delay_ms(self) -> float:
        """How long the broker still asks for no new request on this connection
        (KIP-219; 0: none). :meth:`request` waits it out; callers of :meth:`submit` do."""
        return self._wire.throttle_delay_ms()

    @property
    def can_submit(self) -> bool:
        """Whether :meth:`submit` works now: under asyncio over TCP, or where
        :meth:`start_pump` started a pump, while the socket keeps up."""
        return self._pipe.can_submit

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        """Let :meth:`submit` work over a stream (trio, ``memory://``): a task in
        ``task_group`` writes submitted requests and reads the responses, until the
        connection closes or the group is cancelled. Nothing to do under asyncio."""
        self._pipe.start_pump(task_group)

    def submit(self, request: Request, on_response: OnResponse) -> None:
        """Send ``request`` now, without a task; ``on_response`` gets the outcome later.

        Only where :attr:`can_submit`. ``on_response(response, None)`` or
        ``on_response(None, error)`` runs in the event loop, as for
        :meth:`AsyncioPipe.submit <kafkette.client.pipes.AsyncioPipe.submit>`;
        a closed connection raises :class:`KafkaConnectionError` at once.
        """
        pipe = self._pipe
        failure = pipe.failure
        if failure is not None:
            raise KafkaConnectionError(f"connection to {self.address} is closed") from failure
        version = self._submit_versions.get(type(request))
        if version is None:
            version = self._submit_versions[type(request)] = self.version_for(request)
        correlation_id, frame = self._wire.send(request, version)
        pipe.submit(frame, correlation_id, on_response)

    def cork(self) -> None:
        """Hold submitted requests until :meth:`uncork` writes them together (where
        :attr:`can_submit`)."""
        self._pipe.cork()

    def uncork(self) -> None:
        """Write the requests submitted since :meth:`cork`."""
        self._pipe.uncork()

    async def aclose(self) -> None:
        """Close the connection; requests still waiting fail with KafkaConnectionError."""
        await self._pipe.close(KafkaConnectionError(f"connection to {self.address} was closed"))

    async def __aenter__(self) -> BrokerConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
