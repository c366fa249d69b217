"""The registry's HTTP/1.1 shell: h11 (sans-I/O) driven over anyio sockets.

:class:`RegistryHttpServer` accepts connections on a host and port and, per
connection, feeds the bytes it reads to an ``h11.Connection``, hands each
complete request to :meth:`SchemaRegistry.handle
<kafkette.schema_registry.server.registry.SchemaRegistry.handle>` and writes
the answer back; connections are kept alive between requests as HTTP/1.1 says.

With ``ssl_context`` it speaks HTTPS (the handshake done per connection, so a
failing one ends that connection only); with ``authenticate`` every request
needs HTTP Basic credentials it accepts, else 401 with Confluent's body
``{"error_code": 401, "message": "Unauthorized"}``.

Bad input never takes the server down: a request h11 cannot parse gets 400, a
body longer than ``max_body_bytes`` gets 413 (both with Confluent's error body
shape) and the connection is closed (after a 413, once the rest of the body is read
and dropped, for at most :data:`LINGER_S`); a connection idle for ``idle_timeout``
seconds is closed; a peer that goes away ends its connection only.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import anyio
import anyio.abc
import h11
from anyio.streams.tls import TLSStream

from kafkette.schema_registry.server.registry import (
    CONTENT_TYPE,
    Response,
    SchemaRegistry,
    open_registry,
)

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body read: far above a schema the topic takes (about 1 MB)."""
IDLE_TIMEOUT_S = 120.0
HANDSHAKE_TIMEOUT_S = 10.0
READ_SIZE = 65536
LINGER_S = 2.0
LINGER_BYTES = 64 * 1024 * 1024
"""After a 413, what the server still reads and drops of the body before it closes (a
lingering close): closing with unread data would reset the connection, and the client,
still sending, would get a broken pipe instead of the answer."""
UNAUTHORIZED = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()

Authenticate = Callable[[str, str], bool]
"""Whether a user name and password are valid (the broker's SASL users' check)."""


def _error(status: int, message: str) -> Response:
    body = json.dumps({"error_code": status, "message": message}).encode()
    return Response(status, body, CONTENT_TYPE)


class _TooLarge(Exception):
    pass


class RegistryHttpServer:
    """Serves one :class:`SchemaRegistry` over HTTP/1.1 on ``host:port`` (0: any free port)."""

    def __init__(
        self,
        registry: SchemaRegistry,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        idle_timeout: float = IDLE_TIMEOUT_S,
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Authenticate | None = None,
    ) -> None:
        self.registry = registry
        self.ssl_context = ssl_context
        self.authenticate = authenticate
        self.host = host
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.idle_timeout = idle_timeout

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen, report the URL to ``task_status`` once bound, serve until cancelled."""
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        async with listener:
            self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
            logger.debug("schema registry listening on %s:%d", self.host, self.port)
            task_status.started(self.url)
            await listener.serve(self._connection)

    async def _connection(self, raw: anyio.abc.SocketStream) -> None:
        # the socket is closed however this ends, also when the server is stopped
        # (cancelled) during the TLS handshake
        try:
            await self._serve_socket(raw)
        finally:
            await anyio.aclose_forcefully(raw)

    async def _serve_socket(self, raw: anyio.abc.SocketStream) -> None:
        stream: anyio.abc.ByteStream = raw
        if self.ssl_context is not None:
            try:
                with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
                    stream = await TLSStream.wrap(
                        raw, server_side=True, ssl_context=self.ssl_context
                    )
            except (OSError, ssl.SSLError, TimeoutError, anyio.BrokenResourceError) as error:
                logger.debug("schema registry: TLS handshake failed: %s", error)
                return
            except anyio.EndOfStream:
                return
        try:
            async with stream:  # closing TLS may fail too: inside the try
                await self._serve_connection(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
            pass  # the peer went away (ssl.SSLError is an OSError)
        except Exception:  # never let one connection take the listener down
            logger.exception("schema registry: connection failed")

    async def _serve_connection(self, stream: anyio.abc.ByteStream) -> None:
        connection = h11.Connection(h11.SERVER)
        accepted: str | None = None  # the Authorization header accepted on this connection
        while True:
            try:
                request, body = await self._read_request(connection, stream)
            except h11.RemoteProtocolError as error:
                await self._send_error(connection, stream, _error(400, f"Bad request: {error}"))
                return
            except _TooLarge:
                message = f"Request body larger than {self.max_body_bytes} bytes"
                await self._send_error(connection, stream, _error(413, message))
                await _linger(stream)
                return
            if request is None:
                return
            target = request.target.decode("latin-1")
            path, _, query_text = target.partition("?")
            query = dict(parse_qsl(query_text, keep_blank_values=True))
            headers = {
                name.decode("latin-1"): value.decode("latin-1") for name, value in request.headers
            }
            credentials = headers.get("authorization")
            if self.authenticate is not None and (credentials is None or credentials != accepted):
                if not self._authenticated(credentials):
                    await self._send(connection, stream, Response(401, UNAUTHORIZED, CONTENT_TYPE))
                    if connection.our_state is h11.MUST_CLOSE:
                        return
                    connection.start_next_cycle()
                    continue
                accepted = credentials
            method = request.method.decode("latin-1").upper()
            head = method == "HEAD"  # a GET's headers without its body
            answer = await self.registry.handle(
                "GET" if head else method, path, query, body, headers
            )
            await self._send(connection, stream, answer, head=head)
            if connection.our_state is h11.MUST_CLOSE or connection.their_state is h11.MUST_CLOSE:
                return
            try:
                connection.start_next_cycle()
            except h11.LocalProtocolError:
                return

    def _authenticated(self, header: str | None) -> bool:
        scheme, _, encoded = (header or "").partition(" ")
        if scheme.lower() != "basic" or self.authenticate is None:
            return False
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, ValueError):
            return False
        return bool(sep) and self.authenticate(user, password)

    async def _read_request(
        self, connection: h11.Connection, stream: anyio.abc.ByteStream
    ) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                with anyio.move_on_after(self.idle_timeout):
                    try:
                        data = await stream.receive(READ_SIZE)
                    except anyio.EndOfStream:
                        data = b""
                    connection.receive_data(data)
                    continue
                return None, b""  # idle
            if isinstance(event, h11.Request):
                request = event
                length = dict(event.headers).get(b"content-length")
                if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                    raise _TooLarge
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_body_bytes:
                    raise _TooLarge
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b""

    async def _send(
        self,
        connection: h11.Connection,
        stream: anyio.abc.ByteStream,
        answer: Response,
        *,
        head: bool = False,
    ) -> None:
        headers = [
            ("Content-Type", answer.content_type),
            ("Content-Length", str(len(answer.body))),
        ]
        if answer.status == 401:
            headers.append(("WWW-Authenticate", 'Basic realm="SchemaRegistry"'))
        data = connection.send(h11.Response(status_code=answer.status, headers=headers))
        if not head:
            data += connection.send(h11.Data(data=answer.body))
        data += connection.send(h11.EndOfMessage())
        await stream.send(data)

    async def _send_error(
        self, connection: h11.Connection, stream: anyio.abc.ByteStream, answer: Response
    ) -> None:
        if connection.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [
            ("Content-Type", answer.content_type),
            ("Content-Length", str(len(answer.body))),
            ("Connection", "close"),
        ]
        try:
            data = connection.send(h11.Response(status_code=answer.status, headers=headers))
            data += connection.send(h11.Data(data=answer.body))
            data += connection.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return
        await stream.send(data)


async def serve_registry(
    bootstrap_servers: str,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    authenticate: Authenticate | None = None,
    client_config: Mapping[str, Any] | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A registry over ``bootstrap_servers``' ``_schemas`` topic, served on ``host:port``
    until cancelled; reports the bound port (``kafkette serve --schema-registry``).
    ``client_config``: how its clients reach the broker (:mod:`.broker_access`)."""
    async with (
        open_registry(bootstrap_servers, client_config) as registry,
        anyio.create_task_group() as tg,
    ):
        server = RegistryHttpServer(
            registry, host, port, ssl_context=ssl_context, authenticate=authenticate
        )
        await tg.start(server.serve)
        task_status.started(server.port)


async def _linger(stream: anyio.abc.ByteStream) -> None:
    """Read and drop what the peer still sends, until it closes or for :data:`LINGER_S`
    and :data:`LINGER_BYTES` at most."""
    dropped = 0
    with anyio.move_on_after(LINGER_S):
        try:
            while dropped < LINGER_BYTES:
                dropped += len(await stream.receive(READ_SIZE))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
