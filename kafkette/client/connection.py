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

A connection that cannot be opened says why and what to check
(:mod:`kafkette.client.diagnose`): a refused or unreachable address, a TLS
handshake that failed (:class:`~kafkette.errors.SslAuthenticationError`,
not retriable), a listener that speaks TLS to a plaintext client or the
other way round, or one that expects SASL from a client without it
(:class:`~kafkette.errors.IllegalSaslStateError`, found when the broker
closes the connection at its first request after ApiVersions).
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import anyio
import anyio.abc
import attrs

from kafkette._version import __version__
from kafkette.client.diagnose import (
    FailureLog,
    causes,
    describe_os_error,
    describe_ssl_error,
    sasl_mechanisms,
    speaks_plaintext_kafka,
    speaks_tls,
    ssl_alert,
)
from kafkette.client.pipes import AsyncioPipe, FramePipe, OnResponse, StreamPipe, connect_stream
from kafkette.client.sasl import SaslCredentials, authenticate
from kafkette.client.wire import ClientWire
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from kafkette.protocol.errors import DecodeError, ProtocolError
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


_CLOSED_BY_PEER = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
)


@attrs.frozen
class _Endpoint:
    """Where a TCP connection goes and how, for asking the listener what it speaks."""

    host: str
    port: int
    ssl_context: ssl.SSLContext | None
    sasl: SaslCredentials | None
    client_id: str | None
    timeout_s: float

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def protocol(self) -> str:
        """The client's security.protocol, as Kafka spells it."""
        transport = "PLAINTEXT" if self.ssl_context is None else "SSL"
        if self.sasl is None:
            return transport
        return f"SASL_{transport}"

    async def open_failure(self, exc: BaseException) -> KafkaError:
        """The error for a TCP connection or TLS handshake that failed with ``exc``."""
        address = self.address
        if self.ssl_context is not None:
            alert = ssl_alert(exc)
            if alert is not None:
                if isinstance(alert, ssl.SSLCertVerificationError):
                    hint = (
                        "is ssl.ca.location the CA that signed the broker's certificate, "
                        "and is the broker's address one that its certificate names?"
                    )
                else:
                    hint = f"is security.protocol right? it is {self.protocol}"
                return SslAuthenticationError(
                    f"TLS handshake with {address} failed: {describe_ssl_error(alert)}: {hint}"
                )
            if any(isinstance(cause, _CLOSED_BY_PEER) for cause in causes(exc)):
                if await speaks_plaintext_kafka(
                    self.host, self.port, self.timeout_s, self.client_id
                ):
                    return SslAuthenticationError(
                        f"TLS handshake with {address} failed: the broker closed the "
                        "connection, and it answers Kafka requests without TLS: is "
                        f"security.protocol right? it is {self.protocol}, the listener "
                        "expects PLAINTEXT or SASL_PLAINTEXT"
                    )
                return KafkaConnectionError(
                    f"TLS handshake with {address} failed: the broker closed the connection "
                    f"({_reason(exc)}): does the listener expect TLS? security.protocol "
                    f"is {self.protocol}"
                )
        if isinstance(exc, OSError):
            return KafkaConnectionError(
                f"connecting to {address} failed: {describe_os_error(exc, self.host)}"
            )
        return KafkaConnectionError(f"connecting to {address} failed: {_reason(exc)}")

    async def negotiation_failure(self, exc: KafkaConnectionError) -> KafkaError:
        """The error for a connection the broker closed during the ApiVersions exchange."""
        address = self.address
        if self.ssl_context is None:
            if await speaks_tls(self.host, self.port, self.timeout_s):
                return SslAuthenticationError(
                    f"{address} closed the connection during the ApiVersions exchange, and "
                    f"it speaks TLS: is security.protocol right? it is {self.protocol}, "
                    "the listener expects SSL or SASL_SSL"
                )
            return KafkaConnectionError(
                f"{address} closed the connection during the ApiVersions exchange ({exc}): "
                f"is security.protocol right? it is {self.protocol}; the listener may "
                "expect TLS or SASL"
            )
        alert = ssl_alert(exc)
        if alert is not None:
            return SslAuthenticationError(
                f"{address} ended the TLS connection during the ApiVersions exchange: "
                f"{describe_ssl_error(alert)}: does the broker trust the client certificate "
                "(ssl.certificate.location)?"
            )
        return KafkaConnectionError(
            f"{address} closed the TLS connection during the ApiVersions exchange ({exc}): "
            "the broker may want a client certificate that it trusts "
            "(ssl.certificate.location, ssl.key.location)"
        )

    async def first_request_failure(self, exc: KafkaConnectionError) -> KafkaError | None:
        """The error for a connection without SASL that the broker closed at its first
        request after ApiVersions, when the listener expects SASL; None otherwise."""
        mechanisms = await sasl_mechanisms(
            self.host, self.port, self.ssl_context, self.timeout_s, self.client_id
        )
        if mechanisms is None:
            return None
        expected = "SASL_PLAINTEXT" if self.ssl_context is None else "SASL_SSL"
        return IllegalSaslStateError(
            f"{self.address} closed the connection at the first request after ApiVersions "
            f"({exc}), and it expects SASL authentication (mechanisms: "
            f"{', '.join(mechanisms) or 'none'}): is security.protocol right? it is "
            f"{self.protocol}, the listener expects {expected} with sasl.mechanism, "
            "sasl.username and sasl.password"
        )


def _malformed(exc: BaseException) -> bool:
    """Whether ``exc`` came from an answer we could not read, not from the broker closing."""
    return any(isinstance(cause, (DecodeError, ProtocolError)) for cause in causes(exc))


def _reason(exc: BaseException) -> str:
    for cause in causes(exc):
        text = str(cause)
        if text:
            return text
    return type(exc).__name__


class BrokerConnection:
    """A negotiated connection to one broker; create it with :meth:`connect`."""

    def __init__(self, pipe: FramePipe, wire: ClientWire, *, address: str) -> None:
        self.address = address
        self._pipe = pipe
        self._wire = wire
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._submit_versions: dict[type[Request], int] = {}  # negotiated once, at open
        self._answered = False  # a request after the handshake had its answer
        self._endpoint: _Endpoint | None = None  # TCP: asked what it speaks after a failure
        self._failures: FailureLog | None = None
        self._closing = False

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
        failures: FailureLog | None = None,
    ) -> BrokerConnection:
        """Open a TCP (or TLS) connection, negotiate API versions, authenticate (SASL).

        A refused authentication raises the broker's error
        (:class:`~kafkette.errors.SaslAuthenticationFailedError`...), a failed TLS
        handshake :class:`~kafkette.errors.SslAuthenticationError`; neither is
        retriable. Other failures raise :class:`KafkaConnectionError` (or
        :class:`KafkaTimeoutError`) saying why. ``failures`` logs each failure once.
        """
        endpoint = _Endpoint(host, port, ssl_context, sasl, client_id, connect_timeout_s)
        try:
            connection = await cls._open(endpoint, request_timeout_s, clock)
        except KafkaError as exc:
            if failures is not None:
                failures.failed(endpoint.address, exc)
            raise
        connection._failures = failures
        return connection

    @classmethod
    async def _open(
        cls, endpoint: _Endpoint, request_timeout_s: float, clock: MonotonicClockMs
    ) -> BrokerConnection:
        address = endpoint.address
        host, port, ssl_context = endpoint.host, endpoint.port, endpoint.ssl_context
        wire = ClientWire(endpoint.client_id, clock=clock)
        try:
            with anyio.fail_after(endpoint.timeout_s):
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
                    stream = await connect_stream(host, port, ssl_context)
                    pipe = StreamPipe(
                        stream, wire, address=address, request_timeout_s=request_timeout_s
                    )
        except TimeoutError:
            raise KafkaTimeoutError(
                f"connecting to {address} took over {endpoint.timeout_s}s: is the host "
                "reachable from here (network, firewall)?"
            ) from None
        except (OSError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            raise await endpoint.open_failure(exc) from exc
        pipe.quiet = True  # a failure is reported once by the caller, not at every retry
        connection = cls(pipe, wire, address=address)
        try:
            try:
                await connection._negotiate()
            except KafkaConnectionError as exc:
                raise await endpoint.negotiation_failure(exc) from exc
            if endpoint.sasl is not None:
                await authenticate(
                    connection._send_versioned, connection.broker_versions, endpoint.sasl, address
                )
        except BaseException:
            await connection.aclose()
            raise
        pipe.quiet = False
        connection._answered = False  # the handshake's answers do not count
        if endpoint.sasl is None:
            connection._endpoint = endpoint
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
        try:
            response = await self._pipe.exchange(frame, correlation_id, expect_response)
        except KafkaConnectionError as exc:
            if self._answered or self._endpoint is None or self._closing or _malformed(exc):
                raise
            error = await self._first_request_failure(exc)
            if error is None:
                raise
            raise error from exc
        if not self._answered:
            self._answered = True
            if self._failures is not None:
                self._failures.connected(self.address)
        return response

    async def _first_request_failure(self, exc: KafkaConnectionError) -> KafkaError | None:
        """Why the broker closed the connection before answering anything after the
        handshake, if it is because it expects SASL (asked once per connection)."""
        endpoint, self._endpoint = self._endpoint, None
        assert endpoint is not None
        error = await endpoint.first_request_failure(exc)
        if error is not None and self._failures is not None:
            self._failures.failed(self.address, error)
        return error

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
        self._closing = True
        await self._pipe.close(KafkaConnectionError(f"connection to {self.address} was closed"))

    async def __aenter__(self) -> BrokerConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
