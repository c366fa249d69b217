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
Given SASL credentials, it then authenticates (:mod:`kafkette.client.security.sasl`)
before the connection is handed out.

A connection that cannot be opened says why and what to check
(:mod:`kafkette.client.diagnose`): a refused or unreachable address, a TLS
handshake that failed (:class:`~kafkette.errors.SslAuthenticationError`,
not retriable), a listener that speaks TLS to a plaintext client or the
other way round, or one that expects SASL from a client without it
(:class:`~kafkette.errors.IllegalSaslStateError`, found when the broker
closes the connection at its first request after ApiVersions).

A broker that gives SASL sessions a lifetime (``connections.max.reauth.ms``,
KIP-368) closes a connection that has not re-authenticated when its session
ends. The connection re-authenticates itself when its
:class:`~kafkette.client.security.sasl.ReauthSchedule` says so (85-95% of the lifetime), at
the first request from then on: that request and every one made meanwhile wait
(requests handed to :meth:`BrokerConnection.submit` are held, in order) until
SaslHandshake and SaslAuthenticate are answered, then go out in the order they
were made. Requests already sent are not touched: the broker answers them before
the SaslHandshake. A failed re-authentication closes the connection
(:class:`KafkaConnectionError`, retriable: a new connection authenticates anew).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

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
from kafkette.client.events import event_factory
from kafkette.client.pipes import AsyncioPipe, FramePipe, OnResponse, StreamPipe, connect_stream
from kafkette.client.security.sasl import ReauthSchedule, SaslCredentials, authenticate
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
        # KIP-368: set once authenticated with SASL whose session expires.
        self._sasl: SaslCredentials | None = None
        self._clock: MonotonicClockMs = monotonic_ms
        self._reauth = ReauthSchedule()
        self._reauth_due: float | None = None  # self._reauth.due_ms, read on every request
        self._reauthenticating: anyio.Event | None = None
        self._held: list[tuple[Request, OnResponse]] = []  # submitted meanwhile, in order
        self._spawn: anyio.abc.TaskGroup | None = None
        self._reauth_task: object = None  # an asyncio task, kept from the garbage collector
        self._request_timeout_s = 30.0
        self.reauthentications = 0
        """Re-authentications completed on this connection."""

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
                lifetime_ms = await authenticate(
                    connection._send_versioned, connection.broker_versions, endpoint.sasl, address
                )
                connection._clock = clock
                connection._request_timeout_s = request_timeout_s
                connection._session_started(endpoint.sasl, lifetime_ms)
        except BaseException:
            await connection.aclose()
            raise
        pipe.quiet = False
        connection._answered = False  # the handshake's answers do not count
        if endpoint.sasl is None:
            connection._endpoint = endpoint
        return connection

    async def _send_versioned(self, request: Request, version: int) -> Response | None:
        return await self._exchange(request, version, True)

    # ---- re-authentication (KIP-368)

    def _session_started(self, sasl: SaslCredentials, lifetime_ms: int) -> None:
        self._sasl = sasl
        self._reauth.started(self._clock(), lifetime_ms)
        self._reauth_due = self._reauth.due_ms

    def _must_wait(self) -> bool:
        """Whether a request must wait for a re-authentication, under way or due now."""
        if self._reauthenticating is not None:
            return True
        due = self._reauth_due
        return due is not None and self._clock() >= due and self._pipe.failure is None

    async def _wait_reauthenticated(self) -> None:
        """Re-authenticate, or wait for the re-authentication under way to end."""
        while self._reauthenticating is not None:
            await self._reauthenticating.wait()
        if self._must_wait():
            await self._reauthenticate(self._begin_reauthentication())

    def _begin_reauthentication(self) -> anyio.Event:
        """From now on requests wait (the event is set when they may go)."""
        assert self._sasl is not None and self._reauthenticating is None
        done = self._reauthenticating = event_factory()()
        return done

    async def _reauthenticate(self, done: anyio.Event) -> None:
        """SaslHandshake and SaslAuthenticate again, then release the requests held.

        A failure closes the connection: what waits fails with KafkaConnectionError.
        """
        assert self._sasl is not None
        error: KafkaConnectionError | None = None
        try:
            # Shielded: a caller cancelled halfway would leave the exchange half done.
            # The pipe's request timeout still bounds it.
            with anyio.CancelScope(shield=True):
                lifetime_ms = await authenticate(
                    self._send_in_order, self.broker_versions, self._sasl, self.address
                )
        except KafkaError as exc:
            error = KafkaConnectionError(f"re-authentication with {self.address} failed: {exc}")
            error.__cause__ = exc
            await self._pipe.close(error)
        except BaseException as exc:  # a bug: the connection cannot be used any more
            error = KafkaConnectionError(f"re-authentication with {self.address} failed: {exc!r}")
            error.__cause__ = exc
            with anyio.CancelScope(shield=True):
                await self._pipe.close(error)
            raise
        else:
            self.reauthentications += 1
            self._session_started(self._sasl, lifetime_ms)
            logger.debug(
                "re-authenticated with %s (%d, session %d ms)",
                self.address,
                self.reauthentications,
                lifetime_ms,
            )
        finally:
            self._reauthenticating = None
            held, self._held = self._held, []
            for request, on_response in held:  # in the order they were submitted
                self._submit_now(request, on_response, error)
            done.set()

    async def _send_in_order(self, request: Request, version: int) -> Response | None:
        """Send a request of the re-authentication after every frame submitted before it.

        Submitted frames may not be written yet (corked, or in the pump's queue); were
        the SaslHandshake to pass them, the broker would see them in the middle of the
        exchange and close the connection. So it goes the way they went, where they
        went that way: any asyncio pipe, or a stream pipe with its pump.
        """
        pipe = self._pipe
        if not isinstance(pipe, AsyncioPipe):
            if self._spawn is not None:  # a pump was started: let it write what it holds
                with anyio.move_on_after(1.0):
                    while not pipe.can_submit and pipe.failure is None:
                        await anyio.sleep(0.005)
            if not pipe.can_submit:  # no pump (nothing submitted waits), or a stuck one
                return await self._exchange(request, version, True)
        done = event_factory()()
        outcome: list[tuple[Response | None, BaseException | None]] = []

        def on_response(response: Response | None, error: BaseException | None) -> None:
            outcome.append((response, error))
            done.set()

        correlation_id, frame = self._wire.send(request, version)
        pipe.submit([frame], correlation_id, on_response)
        pipe.uncork()
        try:
            with anyio.fail_after(self._request_timeout_s):
                await done.wait()
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no response from {self.address} within {self._request_timeout_s}s"
            ) from None
        response, error = outcome[0]
        if error is not None:
            raise error
        return response

    async def _reauthenticate_in_background(self, done: anyio.Event) -> None:
        try:
            await self._reauthenticate(done)
        except KafkaError:
            pass  # the connection is closed: its requests have failed with it
        finally:
            self._reauth_task = None

    def _start_reauthentication(self) -> bool:
        """Re-authenticate in a task of its own (for :meth:`submit`, which has none);
        False if there is no task to run it in (off asyncio without :meth:`start_pump`):
        requests then go out, and the broker closes the connection when the session ends."""
        done = self._begin_reauthentication()
        if _running_asyncio():
            self._reauth_task = asyncio.get_running_loop().create_task(
                self._reauthenticate_in_background(done)
            )
            return True
        if self._spawn is not None:
            try:
                self._spawn.start_soon(self._reauthenticate_in_background, done)
                return True
            except RuntimeError:  # that task group is over
                self._spawn = None
        self._reauthenticating = None
        self._reauth_due = None
        done.set()
        return False

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
        if self._must_wait():
            await self._wait_reauthenticated()
        if version is None:
            version = self.version_for(request)
        return await self._exchange(request, version, expect_response)

    async def _exchange(
        self, request: Request, version: int, expect_response: bool
    ) -> Response | None:
        failure = self._pipe.failure
        if failure is not None:
            raise KafkaConnectionError(f"connection to {self.address} is closed") from failure
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

    @property
    def behind(self) -> bool:
        """Whether the connection is open and its socket is not keeping up (more than the
        high-water mark waits to be written): :meth:`when_drained` tells when it is."""
        return self._pipe.behind

    def when_drained(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once, in the event loop (from no task), when the connection
        is no longer :attr:`behind` or closes."""
        self._pipe.when_drained(callback)

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        """Let :meth:`submit` work over a stream (trio, ``memory://``): a task in
        ``task_group`` writes submitted requests and reads the responses, until the
        connection closes or the group is cancelled. Nothing to do under asyncio."""
        self._pipe.start_pump(task_group)
        if self._reauth_due is not None:
            self._spawn = task_group  # where submit starts a re-authentication

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
        if self._must_wait() and (
            self._reauthenticating is not None or self._start_reauthentication()
        ):
            self._held.append((request, on_response))  # until re-authenticated (KIP-368)
            return
        correlation_id, parts = self._wire.send_parts(request, version)
        pipe.submit(parts, correlation_id, on_response)

    def _submit_now(
        self, request: Request, on_response: OnResponse, error: BaseException | None
    ) -> None:
        """Send a request held during a re-authentication (or fail it with ``error``)."""
        failure = error or self._pipe.failure
        if failure is None:
            try:
                correlation_id, parts = self._wire.send_parts(
                    request, self._submit_versions[type(request)]
                )
                self._pipe.submit(parts, correlation_id, on_response)
                return
            except KafkaConnectionError as exc:
                failure = exc
            except Exception as exc:  # a request that cannot be encoded: its own failure
                on_response(None, exc)
                return
        broken = KafkaConnectionError(f"connection to {self.address} is closed")
        broken.__cause__ = failure
        on_response(None, broken)

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
