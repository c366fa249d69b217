"""The registry's HTTP/1.1 shell: h11 (sans-I/O) driven over anyio sockets.

:class:`RegistryHttpServer` accepts connections on a host and port and, per
connection, feeds the bytes it reads to an ``h11.Connection``, hands each
complete request to :meth:`SchemaRegistry.handle
<kafkette.schema_registry.server.registry.SchemaRegistry.handle>` and writes
the answer back; connections are kept alive between requests as HTTP/1.1 says.

Bad input never takes the server down: a request h11 cannot parse gets 400, a
body longer than ``max_body_bytes`` gets 413 (both with Confluent's error body
shape) and the connection is closed; a connection idle for ``idle_timeout``
seconds is closed; a peer that goes away ends its connection only.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import parse_qsl

import anyio
import anyio.abc
import h11

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
READ_SIZE = 65536


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
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.idle_timeout = idle_timeout

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

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

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                await self._serve_connection(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the peer went away
            except Exception:  # never let one connection take the listener down
                logger.exception("schema registry: connection failed")

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        while True:
            try:
                request, body = await self._read_request(connection, stream)
            except h11.RemoteProtocolError as error:
                await self._send_error(connection, stream, _error(400, f"Bad request: {error}"))
                return
            except _TooLarge:
                message = f"Request body larger than {self.max_body_bytes} bytes"
                await self._send_error(connection, stream, _error(413, message))
                return
            if request is None:
                return
            target = request.target.decode("latin-1")
            path, _, query_text = target.partition("?")
            query = dict(parse_qsl(query_text, keep_blank_values=True))
            headers = {
                name.decode("latin-1"): value.decode("latin-1") for name, value in request.headers
            }
            answer = await self.registry.handle(
                request.method.decode("latin-1"), path, query, body, headers
            )
            await self._send(connection, stream, answer)
            if connection.our_state is h11.MUST_CLOSE or connection.their_state is h11.MUST_CLOSE:
                return
            try:
                connection.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _read_request(
        self, connection: h11.Connection, stream: anyio.abc.SocketStream
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
        self, connection: h11.Connection, stream: anyio.abc.SocketStream, answer: Response
    ) -> None:
        headers = [
            ("Content-Type", answer.content_type),
            ("Content-Length", str(len(answer.body))),
        ]
        data = connection.send(h11.Response(status_code=answer.status, headers=headers))
        data += connection.send(h11.Data(data=answer.body))
        data += connection.send(h11.EndOfMessage())
        await stream.send(data)

    async def _send_error(
        self, connection: h11.Connection, stream: anyio.abc.SocketStream, answer: Response
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
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A registry over ``bootstrap_servers``' ``_schemas`` topic, served on ``host:port``
    until cancelled; reports the bound port (``kafkette serve --schema-registry``)."""
    async with open_registry(bootstrap_servers) as registry, anyio.create_task_group() as tg:
        server = RegistryHttpServer(registry, host, port)
        await tg.start(server.serve)
        task_status.started(server.port)
