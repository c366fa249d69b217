"""A connection served on any anyio backend: the socket driven by hand.

The listener uses this under trio (and under asyncio when asked to): one task
reads with ``recv``, waiting with ``anyio.wait_readable`` when nothing is
there, serves every whole request read, in order, and writes each answer
before reading again. Under asyncio the listener prefers
:mod:`kafkette.server.net.asyncio_connection`, which keeps the socket registered
for reading instead of registering it anew for every wait.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.framing import FrameDecoder
from kafkette.server.broker import Broker
from kafkette.server.dispatch import CloseConnection
from kafkette.server.net import zero_copy
from kafkette.server.net.frames import process_frame, sasl_frame, serve_sasl_frame
from kafkette.server.sasl import SaslSettings, ServerAuthenticator
from kafkette.server.steps import STEP_BUDGET_S

logger = logging.getLogger("kafkette.server.net.listener")

RECEIVE_SIZE = 256 * 1024


def _peer_gone(exc: OSError) -> bool:
    """Whether a send failed because the peer went away (reset, broken pipe, no longer
    connected, timed out): that ends the connection quietly, as its end of stream does.
    Any other error (a segment file that cannot be read) is raised as it is, to be
    logged once as the connection closes, never taken for the peer going away."""
    return isinstance(exc, (ConnectionError, TimeoutError)) or exc.errno == errno.ENOTCONN


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
        """The next bytes received (at most ``max_bytes``); ``EndOfStream`` at the end."""
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
        """Send all of ``data``."""
        view = memoryview(data).cast("B")
        while view:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                if _peer_gone(exc):
                    raise anyio.BrokenResourceError from exc
                raise
            view = view[sent:]

    async def sendfile(self, in_fd: int, offset: int, count: int) -> None:
        """Send ``count`` bytes of file ``in_fd`` from ``offset`` with ``os.sendfile``."""
        out_fd = self.sock.fileno()
        while count > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, count)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)
                continue
            except OSError as exc:
                if _peer_gone(exc):
                    raise anyio.BrokenResourceError from exc
                raise
            if sent == 0:
                raise CloseConnection("a log segment is shorter than the region read from it")
            offset += sent
            count -= sent

    async def send_parts(self, parts: Sequence[Any]) -> None:
        """Send bytes parts (coalesced), file regions (with ``os.sendfile``) and memory log
        slices (their views), in order."""
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
                await self.send_views(part.buffers, spliceable=part.spliceable)
        if pending:
            await self.send(pending)

    async def send_views(self, views: Sequence[Any], *, spliceable: bool = False) -> None:
        """Send a memory log slice's views, none joined: by reference to their pages
        when ``spliceable`` (:mod:`~kafkette.server.net.zero_copy`), else with ``sendmsg``."""
        send = zero_copy.splice_all if spliceable else zero_copy.sendmsg_all
        try:
            await send(self.sock, list(views), self._writable)
        except OSError as exc:
            if _peer_gone(exc):
                raise anyio.BrokenResourceError from exc
            raise

    async def _writable(self) -> bool:
        await anyio.wait_writable(self.sock)
        return True

    def close(self) -> None:
        """Close the socket, waking whoever waits on it."""
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
    """Answer every whole request in ``data`` (in order), keeping the rest for later.

    The other tasks get a turn every :data:`~kafkette.server.steps.STEP_BUDGET_S`:
    ``data`` may hold a thousand small pipelined requests, and neither receiving
    nor sending waits while the socket has room.
    """
    decoder.feed(data)
    turn_ends = time.monotonic() + STEP_BUDGET_S
    while (frame := decoder.next_frame()) is not None:
        if time.monotonic() >= turn_ends:
            await anyio.lowlevel.checkpoint()
            turn_ends = time.monotonic() + STEP_BUDGET_S
        if auth is not None and sasl_frame(auth, frame):
            await serve_sasl_frame(broker, auth, frame, peer, sasl_delay_s, io.send_parts)
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
        broker.connection_closed(peer)
        io.close()
