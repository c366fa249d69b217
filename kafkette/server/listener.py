"""The TCP listener: Kafka frames in, broker core, Kafka frames out.

One task per connection reads frames through a
:class:`~kafkette.protocol.framing.FrameDecoder` (which refuses a declared
size over ``socket.request.max.bytes`` before buffering anything), hands
each request to :meth:`Broker.handle` and writes the response. Requests on
one connection are served one at a time, so pipelined requests are answered
in order, as Kafka does; other connections are independent tasks, so a slow
or misbehaving client never stalls the rest.

Bytes that are not the Kafka protocol (an HTTP request, a TLS ClientHello, a
truncated or forged frame, a declared size over the limit) close that
connection with one log line, as Kafka does. A connection that sends nothing
for ``connections.max.idle.ms`` (10 minutes by default; -1 never) is closed
too. So does a request for an API or version this broker does not serve,
except ApiVersions, which is answered at version 0 with UNSUPPORTED_VERSION
and our ranges (KIP-511) so the client can retry.

Fetch responses from disk logs carry segment regions, which go from the file
to the socket with ``os.sendfile``, never through Python (:class:`SocketIO`).

A listener given :class:`~kafkette.server.sasl.SaslSettings` is
``SASL_PLAINTEXT``: each connection has a
:class:`~kafkette.server.sasl.ServerAuthenticator`, and until it completes
only ApiVersions, SaslHandshake and SaslAuthenticate (or, after SaslHandshake
v0, bare size-prefixed tokens) are served; any other request closes the
connection, as does a failed authentication once its answer is sent (after
``failed_authentication_delay_ms``, as Kafka does).
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.framing import FrameDecoder, frame_parts
from kafkette.protocol.headers import (
    API_VERSIONS_KEY,
    UnsupportedRequestVersionError,
    decode_request,
    encode_response,
    encode_response_parts,
)
from kafkette.protocol.primitives import INT32
from kafkette.server.broker import Broker, RequestContext
from kafkette.server.handlers.api_versions import unsupported_version_response
from kafkette.server.sasl import SaslSettings, ServerAuthenticator

logger = logging.getLogger("kafkette.server.listener")

RECEIVE_SIZE = 256 * 1024
LISTEN_BACKLOG = 1024


class CloseConnection(Exception):
    """The connection must be closed (after one log line)."""


async def process_frame(
    broker: Broker, frame: memoryview, peer: str, *, external_records: bool = False
) -> Sequence[Any]:
    """Serve one request frame; returns the response frame's parts (none for acks=0).

    Parts are bytes-like; with ``external_records`` a part may also be a log
    segment region (``LogSlice``) for the caller to send with ``os.sendfile``.
    """
    try:
        header, request = decode_request(frame)
    except UnsupportedRequestVersionError as exc:
        if exc.header.request_api_key == API_VERSIONS_KEY:
            body = encode_response(
                unsupported_version_response(broker), 0, exc.header.correlation_id
            )
            return frame_parts([body])
        raise CloseConnection(str(exc)) from None
    except ProtocolError as exc:
        raise CloseConnection(f"malformed request: {exc}") from None
    version = header.request_api_version
    if not broker.supports(header.request_api_key, version):
        if header.request_api_key == API_VERSIONS_KEY:
            body = encode_response(unsupported_version_response(broker), 0, header.correlation_id)
            return frame_parts([body])
        raise CloseConnection(
            f"{type(request).NAME} version {version} is not served by this broker"
        )
    response = await broker.handle(RequestContext(header, client_host=peer), request)
    if response is None:
        return ()
    if not external_records:
        return frame_parts([encode_response(response, version, header.correlation_id)])
    parts = encode_response_parts(response, version, header.correlation_id)
    return [INT32.pack(sum(len(p) for p in parts)), *parts]


async def authenticate_frame(
    broker: Broker, auth: ServerAuthenticator, frame: memoryview, peer: str
) -> tuple[Sequence[Any], str | None]:
    """Serve one frame of a connection not yet authenticated.

    Returns the parts to send and, when the connection must then close, why.
    """
    if auth.expects_raw_token:
        step = auth.receive_token(bytes(frame))
        if step.close is not None or step.token is None:
            return (), step.close or "SASL exchange ended"
        if auth.complete:
            logger.info(
                "%s authenticated as %s with %s (SaslHandshake v0, unframed tokens)",
                peer,
                auth.principal,
                auth.mechanism,
            )
        return frame_parts([step.token]), None
    try:
        header, request = decode_request(frame)
    except UnsupportedRequestVersionError as exc:
        if exc.header.request_api_key == API_VERSIONS_KEY:
            return await process_frame(broker, frame, peer), None
        raise CloseConnection(f"during SASL authentication: {exc}") from None
    except ProtocolError as exc:
        raise CloseConnection(
            f"not a Kafka request during SASL authentication (is the client using "
            f"security.protocol=SASL_PLAINTEXT?): {exc}"
        ) from None
    version = header.request_api_version
    step = auth.receive_request(header.request_api_key, version, request)
    if step.to_broker:
        return await process_frame(broker, frame, peer), None
    parts: Sequence[Any] = ()
    if step.response is not None:
        body = encode_response(step.response, version, header.correlation_id)
        parts = frame_parts([body])
    if auth.complete:
        logger.info("%s authenticated as %s with %s", peer, auth.principal, auth.mechanism)
    return parts, step.close


class SocketIO:
    """Non-blocking socket I/O on anyio (asyncio or trio), with ``os.sendfile``.

    The listener drives sockets itself rather than through anyio streams so
    that log segment regions can go to the socket with ``os.sendfile`` (no
    copy through Python) in order with the bytes around them: a stream's
    transport may still hold earlier bytes when a raw sendfile would start.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def receive(self, max_bytes: int) -> bytes:
        while True:
            try:
                data = self.sock.recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        while view:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]

    async def sendfile(self, in_fd: int, offset: int, count: int) -> None:
        out_fd = self.sock.fileno()
        while count > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, count)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if sent == 0:
                raise CloseConnection("a log segment is shorter than the region read from it")
            offset += sent
            count -= sent

    async def send_parts(self, parts: Sequence[Any]) -> None:
        """Send bytes parts (coalesced) and file regions (with ``os.sendfile``), in order."""
        pending = bytearray()
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending += part
                continue
            if pending:
                await self.send(pending)
                pending = bytearray()
            file = getattr(part, "file", None)
            if file is not None:
                await self.sendfile(file.fileno(), part.position, part.size)
            else:
                await self.send(part.to_bytes())
        if pending:
            await self.send(pending)

    def close(self) -> None:
        anyio.notify_closing(self.sock)
        self.sock.close()


async def _serve_data(
    broker: Broker,
    io: SocketIO,
    decoder: FrameDecoder,
    data: bytes,
    auth: ServerAuthenticator | None,
    sasl_delay_s: float,
    peer: str,
) -> None:
    """Answer every whole request in ``data`` (in order), keeping the rest for later."""
    decoder.feed(data)
    while (frame := decoder.next_frame()) is not None:
        if auth is not None and not auth.complete:
            parts, close = await authenticate_frame(broker, auth, frame, peer)
            if parts:
                await io.send_parts(parts)
            if close is not None:
                if auth.failed:
                    await anyio.sleep(sasl_delay_s)
                raise CloseConnection(close)
            continue
        parts = await process_frame(broker, frame, peer, external_records=True)
        if parts:
            await io.send_parts(parts)


async def serve_connection(
    broker: Broker, sock: socket.socket, peer: str, sasl: SaslSettings | None = None
) -> None:
    """Serve one client connection until it closes or misbehaves.

    With ``sasl``, the client must authenticate before anything but
    ApiVersions is served.
    """
    io = SocketIO(sock)
    auth = ServerAuthenticator(sasl) if sasl is not None else None
    sasl_delay_s = sasl.failed_authentication_delay_ms / 1000 if sasl is not None else 0.0
    decoder = FrameDecoder(broker.config.socket_request_max_bytes)
    idle_ms = broker.config.connections_max_idle_ms
    idle_s = idle_ms / 1000.0 if idle_ms >= 0 else math.inf
    # One scope for the connection's life; each receive moves its deadline
    # (cheaper than a new scope per request).
    idle = anyio.CancelScope()
    try:
        with idle:
            while True:
                idle.deadline = anyio.current_time() + idle_s
                data = await io.receive(RECEIVE_SIZE)
                idle.deadline = math.inf  # a request may take long (a fetch long poll)
                await _serve_data(broker, io, decoder, data, auth, sasl_delay_s, peer)
        if idle.cancelled_caught:
            logger.info("closing connection from %s: idle for %d ms", peer, idle_ms)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if decoder.has_partial_frame:
            logger.info("client %s went away in the middle of a request", peer)
    except CloseConnection as exc:
        logger.warning("closing connection from %s: %s", peer, exc)
    except ProtocolError as exc:
        logger.warning("closing connection from %s: %s", peer, exc)
    except Exception:
        logger.exception("closing connection from %s after an internal error", peer)
    finally:
        io.close()


async def serve_tcp(
    broker: Broker,
    host: str,
    port: int,
    *,
    sasl: SaslSettings | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` (0 picks a free port) until cancelled.

    ``task_status.started`` receives the bound port. With ``sasl`` the
    listener is SASL_PLAINTEXT: every connection must authenticate first.
    """
    listener = socket.create_server((host, port), backlog=LISTEN_BACKLOG)
    listener.setblocking(False)
    try:
        async with anyio.create_task_group() as tg:
            task_status.started(listener.getsockname()[1])
            while True:
                try:
                    sock, address = listener.accept()
                except (BlockingIOError, InterruptedError):
                    await anyio.wait_readable(listener)
                    continue
                except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                    logger.warning("accept failed: %s", exc)
                    await anyio.sleep(0.1)
                    continue
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                tg.start_soon(serve_connection, broker, sock, f"{address[0]}:{address[1]}", sasl)
    finally:
        anyio.notify_closing(listener)
        listener.close()
