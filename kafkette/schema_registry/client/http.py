"""HTTP/1.1 to a registry: h11 for the protocol, two edges for the sockets.

:class:`Exchange` is one request and its answer on an ``h11.Connection``, with
no I/O (bytes to send out, bytes received in, the answer once complete), as
h11 itself is. :class:`BlockingHttpTransport` drives it over blocking sockets
(the sync client), :class:`AsyncHttpTransport` over anyio streams (the async
client, asyncio or trio); both keep idle connections for the next request
(HTTP/1.1 keep-alive), retry what Confluent's client retries (no answer,
408, 429, 500, 502, 503, 504) with exponential backoff and jitter, and move
on to the next URL when one cannot be reached.

:func:`decode` turns an answer into its JSON value, or raises
:class:`SchemaRegistryError` with Confluent's ``error_code`` and ``message``.
"""

from __future__ import annotations

import base64
import json
import random
import socket
import ssl
import threading
import time
from typing import Any

import anyio
import anyio.abc
import h11

from kafkette._version import __version__
from kafkette.schema_registry.client.core import Request
from kafkette.schema_registry.client.settings import Endpoint, RegistrySettings
from kafkette.schema_registry.client.types import SchemaRegistryError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
)
RETRIABLE = frozenset({408, 429, 500, 502, 503, 504})
"""Statuses retried, as confluent-kafka's client retries them."""
MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""An answer longer than this is refused (a registry's largest is a schema list)."""
READ_SIZE = 65536

_CLOSED = (
    "the registry closed the connection before answering (one that serves HTTPS closes "
    "plain HTTP requests: is the URL's scheme right?)"
)


class ConnectionFailed(Exception):
    """No answer: connecting, sending or reading failed (retried, then SchemaRegistryError)."""


def decode(status: int, body: bytes) -> Any:
    """The JSON value of a 2xx answer; SchemaRegistryError for any other (Confluent's
    ``error_code`` and ``message`` from an error body, else -1 and the body's text)."""
    try:
        value = json.loads(body) if body else None
    except ValueError:
        value = None
        if 200 <= status < 300:
            message = f"the registry's answer is not JSON: {body[:200]!r}"
            raise SchemaRegistryError(status, SchemaRegistryError.UNKNOWN, message) from None
    if 200 <= status < 300:
        return value
    if isinstance(value, dict) and "message" in value:
        code = value.get("error_code")
        code = code if isinstance(code, int) else status
        raise SchemaRegistryError(status, code, str(value["message"]))
    text = body[:500].decode("utf-8", "replace") or f"HTTP {status}"
    raise SchemaRegistryError(status, SchemaRegistryError.UNKNOWN, text)


def backoff(settings: RegistrySettings, attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): full jitter, capped."""
    cap = min(settings.retries_max_wait_ms, settings.retries_wait_ms * 2 ** (attempt - 1))
    return random.uniform(0, cap) / 1000


class Exchange:
    """One request and its answer on an h11 client connection; no I/O."""

    def __init__(
        self, connection: h11.Connection, endpoint: Endpoint, settings: RegistrySettings
    ) -> None:
        self.connection = connection
        self.endpoint = endpoint
        self.settings = settings
        self._status: int | None = None
        self._body = bytearray()

    def start(self, request: Request) -> bytes:
        """The bytes of ``request`` to send."""
        headers = [
            ("Host", self.endpoint.authority),
            ("Accept", ACCEPT),
            ("User-Agent", f"kafkette/{__version__}"),
        ]
        credentials = self.settings.credentials(self.endpoint)
        if credentials is not None:
            token = base64.b64encode(":".join(credentials).encode()).decode("ascii")
            headers.append(("Authorization", f"Basic {token}"))
        body = request.body or b""
        if request.body is not None:
            headers.append(("Content-Type", CONTENT_TYPE))
        headers.append(("Content-Length", str(len(body))))
        target = self.endpoint.prefix + request.target
        out = self.connection.send(
            h11.Request(method=request.method, target=target, headers=headers)
        )
        if body:
            out = (out or b"") + (self.connection.send(h11.Data(data=body)) or b"")
        return (out or b"") + (self.connection.send(h11.EndOfMessage()) or b"")

    def receive(self, data: bytes) -> tuple[int, bytes] | None:
        """Feed bytes read (``b""`` at end of stream); the answer once it is complete."""
        self.connection.receive_data(data)
        while True:
            try:
                event = self.connection.next_event()
            except h11.RemoteProtocolError as exc:
                if data == b"":  # h11 names an early close as its own state error
                    raise ConnectionFailed(_CLOSED) from None
                raise ConnectionFailed(f"the registry's answer is not HTTP/1.1: {exc}") from None
            if event is h11.NEED_DATA:
                if data == b"":
                    raise ConnectionFailed(_CLOSED)
                return None
            if isinstance(event, h11.Response):
                self._status = event.status_code
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > MAX_ANSWER_BYTES:
                    raise ConnectionFailed(f"an answer longer than {MAX_ANSWER_BYTES} bytes")
            elif isinstance(event, h11.EndOfMessage):
                assert self._status is not None
                return self._status, bytes(self._body)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionFailed(_CLOSED)

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry the next request (then it is ready for it)."""
        if self.connection.our_state is h11.DONE and self.connection.their_state is h11.DONE:
            self.connection.start_next_cycle()
            return True
        return False


class _Endpoints:
    """The URLs in turn: the one that last answered first."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self.current = 0

    def at(self, attempt: int) -> Endpoint:
        endpoints = self.settings.endpoints
        return endpoints[(self.current + attempt) % len(endpoints)]

    def failed(self, endpoint: Endpoint) -> None:
        endpoints = self.settings.endpoints
        if endpoints[self.current] == endpoint:
            self.current = (self.current + 1) % len(endpoints)


def _no_answer(endpoint: Endpoint, reason: object) -> SchemaRegistryError:
    return SchemaRegistryError(
        SchemaRegistryError.UNKNOWN,
        SchemaRegistryError.UNKNOWN,
        f"no answer from the schema registry at {endpoint}: {reason}",
    )


class BlockingHttpTransport:
    """Requests over blocking sockets; safe to share between threads."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self._endpoints = _Endpoints(settings)
        self._ssl = settings.ssl_context() if any(e.tls for e in settings.endpoints) else None
        self._idle: list[tuple[Endpoint, socket.socket, h11.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def send(self, request: Request) -> Any:
        """The decoded answer to ``request``, after retries; SchemaRegistryError otherwise."""
        attempt = 0
        while True:
            endpoint = self._endpoints.at(0)
            try:
                status, body = self._exchange(endpoint, request)
            except ConnectionFailed as exc:
                self._endpoints.failed(endpoint)
                if attempt >= self.settings.max_retries:
                    raise _no_answer(endpoint, exc) from None
            else:
                if status not in RETRIABLE or attempt >= self.settings.max_retries:
                    return decode(status, body)
            attempt += 1
            time.sleep(backoff(self.settings, attempt))

    def _connect(self, endpoint: Endpoint) -> socket.socket:
        timeout = self.settings.timeout
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        except OSError as exc:
            raise ConnectionFailed(f"connecting failed: {exc}") from None
        if endpoint.tls:
            assert self._ssl is not None
            try:
                return self._ssl.wrap_socket(sock, server_hostname=endpoint.host)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise SchemaRegistryError(
                    SchemaRegistryError.UNKNOWN,
                    SchemaRegistryError.UNKNOWN,
                    f"the schema registry at {endpoint}: TLS certificate does not verify: {exc}",
                ) from None
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise ConnectionFailed(f"TLS handshake failed: {exc}") from None
        return sock

    def _exchange(self, endpoint: Endpoint, request: Request) -> tuple[int, bytes]:
        with self._lock:
            if self._closed:
                raise SchemaRegistryError(-1, -1, "the schema registry client is closed")
            found = next((i for i, idle in enumerate(self._idle) if idle[0] == endpoint), None)
            pooled = self._idle.pop(found) if found is not None else None
        if pooled is not None:
            _, sock, connection = pooled
        else:
            sock, connection = self._connect(endpoint), h11.Connection(h11.CLIENT)
        exchange = Exchange(connection, endpoint, self.settings)
        try:
            sock.settimeout(self.settings.timeout)
            sock.sendall(exchange.start(request))
            answer = None
            while answer is None:
                answer = exchange.receive(sock.recv(READ_SIZE))
        except (OSError, ConnectionFailed, h11.LocalProtocolError) as exc:
            sock.close()
            if pooled is not None:  # a kept connection the server closed: try a new one once
                return self._exchange(endpoint, request)
            if isinstance(exc, ConnectionFailed):
                raise
            raise ConnectionFailed(str(exc) or type(exc).__name__) from None
        except BaseException:
            sock.close()
            raise
        with self._lock:
            if exchange.reusable and not self._closed:
                self._idle.append((endpoint, sock, connection))
            else:
                sock.close()
        return answer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, sock, _ in idle:
            sock.close()


class AsyncHttpTransport:
    """Requests over anyio streams (asyncio or trio), in the event loop that uses the client."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self._endpoints = _Endpoints(settings)
        self._ssl = settings.ssl_context() if any(e.tls for e in settings.endpoints) else None
        self._idle: list[tuple[Endpoint, anyio.abc.ByteStream, h11.Connection]] = []
        self._closed = False

    async def send(self, request: Request) -> Any:
        """The decoded answer to ``request``, after retries; SchemaRegistryError otherwise."""
        attempt = 0
        while True:
            endpoint = self._endpoints.at(0)
            try:
                status, body = await self._exchange(endpoint, request)
            except ConnectionFailed as exc:
                self._endpoints.failed(endpoint)
                if attempt >= self.settings.max_retries:
                    raise _no_answer(endpoint, exc) from None
            else:
                if status not in RETRIABLE or attempt >= self.settings.max_retries:
                    return decode(status, body)
            attempt += 1
            await anyio.sleep(backoff(self.settings, attempt))

    async def _connect(self, endpoint: Endpoint) -> anyio.abc.ByteStream:
        try:
            if endpoint.tls:
                return await anyio.connect_tcp(
                    endpoint.host, endpoint.port, ssl_context=self._ssl, tls_hostname=endpoint.host
                )
            return await anyio.connect_tcp(endpoint.host, endpoint.port)
        except ssl.SSLCertVerificationError as exc:
            raise SchemaRegistryError(
                -1, -1, f"the schema registry at {endpoint}: TLS certificate does not verify: {exc}"
            ) from None
        except (OSError, ssl.SSLError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise ConnectionFailed(f"connecting failed: {exc}") from None

    async def _exchange(self, endpoint: Endpoint, request: Request) -> tuple[int, bytes]:
        if self._closed:
            raise SchemaRegistryError(-1, -1, "the schema registry client is closed")
        found = next((i for i, idle in enumerate(self._idle) if idle[0] == endpoint), None)
        pooled = self._idle.pop(found) if found is not None else None
        stream: anyio.abc.ByteStream | None = None
        try:
            with anyio.fail_after(self.settings.timeout):
                if pooled is not None:
                    _, stream, connection = pooled
                else:
                    stream, connection = await self._connect(endpoint), h11.Connection(h11.CLIENT)
                exchange = Exchange(connection, endpoint, self.settings)
                await stream.send(exchange.start(request))
                answer = None
                while answer is None:
                    try:
                        data = await stream.receive(READ_SIZE)
                    except anyio.EndOfStream:
                        data = b""
                    answer = exchange.receive(data)
        except (
            OSError,
            TimeoutError,
            ConnectionFailed,
            h11.LocalProtocolError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            if pooled is not None and not isinstance(exc, TimeoutError):
                return await self._exchange(endpoint, request)
            if isinstance(exc, ConnectionFailed):
                raise
            reason = "timed out" if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
            raise ConnectionFailed(reason) from None
        except BaseException:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            raise
        if exchange.reusable and not self._closed:
            self._idle.append((endpoint, stream, connection))
        else:
            await anyio.aclose_forcefully(stream)
        return answer

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for _, stream, _ in idle:
            await anyio.aclose_forcefully(stream)
