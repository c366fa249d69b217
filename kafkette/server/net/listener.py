"""The TCP listener: Kafka frames in, broker core, Kafka frames out.

One task per connection takes whole request frames (a declared size over
``socket.request.max.bytes`` is refused before anything of the frame is
buffered), hands each request to :meth:`Broker.handle` and writes the
response. Requests on
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
to the socket with ``os.sendfile``, never through Python (except under TLS,
whose records the kernel cannot make: there they are read in bounded chunks and
written through the TLS transport).

Under asyncio (the backend ``kafkette serve`` runs on) each connection is an
:class:`asyncio.BufferedProtocol` (:mod:`kafkette.server.net.asyncio_connection`):
the socket stays registered for reading, the serving task wakes once per
whole request, and the answers to pipelined requests go out in one write.
Under trio (or with ``connections="socket"``), a task drives the socket by
hand with a :class:`~kafkette.protocol.framing.FrameDecoder`
(:mod:`kafkette.server.net.socket_connection`). Both serve requests through
:mod:`kafkette.server.net.frames`.

A listener given a TLS context (:mod:`kafkette.server.net.tls`) wraps each
connection in TLS first, under asyncio only (``kafkette serve`` runs there); a
failed handshake (a plaintext client, an untrusted client certificate) is
logged once with the peer's address and closes that connection.

A listener given :class:`~kafkette.server.sasl.SaslSettings` is
``SASL_PLAINTEXT``: each connection has a
:class:`~kafkette.server.sasl.ServerAuthenticator`, and until it completes
only ApiVersions, SaslHandshake and SaslAuthenticate (or, after SaslHandshake
v0, bare size-prefixed tokens) are served; any other request closes the
connection, as does a failed authentication once its answer is sent (after
``failed_authentication_delay_ms``, as Kafka does).
"""

from __future__ import annotations

import asyncio
import logging
import os  # noqa: F401  (tests spy on os.sendfile through this module)
import socket
import ssl
from collections.abc import Awaitable
from typing import Literal

import anyio
import anyio.abc

from kafkette.server.broker import Broker
from kafkette.server.config.listeners import advertised_address
from kafkette.server.connection_quotas import ConnectionQuotas
from kafkette.server.dispatch import CloseConnection
from kafkette.server.metrics.requests import ConnectionStats
from kafkette.server.net.asyncio_connection import serve_asyncio_connection
from kafkette.server.net.frames import authenticate_frame, process_frame
from kafkette.server.net.socket_connection import RECEIVE_SIZE, SocketIO, serve_connection
from kafkette.server.nodes import serving_node
from kafkette.server.sasl import SaslSettings

__all__ = [
    "LISTEN_BACKLOG",
    "RECEIVE_SIZE",
    "CloseConnection",
    "SocketIO",
    "authenticate_frame",
    "process_frame",
    "serve_connection",
    "serve_tcp",
]

logger = logging.getLogger("kafkette.server.net.listener")

LISTEN_BACKLOG = 1024

ConnectionKind = Literal["auto", "protocol", "socket"]
"""How connections are served: ``protocol`` (asyncio only), ``socket`` (any
backend), ``auto`` (``protocol`` under asyncio, else ``socket``)."""


def _asyncio_running() -> bool:
    """Whether this task runs on asyncio (else trio, the other backend anyio runs on)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _counted(
    serve: Awaitable[None],
    quotas: ConnectionQuotas,
    address: str,
    connections: ConnectionStats,
    listener: str,
) -> None:
    """Serve one connection, counted against its address and its listener until it closes."""
    connections.opened(listener)
    try:
        await serve
    finally:
        quotas.release(address)
        connections.closed(listener)


async def serve_tcp(
    broker: Broker,
    host: str,
    port: int,
    *,
    sasl: SaslSettings | None = None,
    connections: ConnectionKind = "auto",
    node: int | None = None,
    tls: ssl.SSLContext | None = None,
    advertised: tuple[str, int] | None = None,
    name: str | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` (0 picks a free port) until cancelled.

    ``task_status.started`` receives the bound port. With ``sasl`` the
    listener is SASL_PLAINTEXT: every connection must authenticate first.
    ``connections`` picks how connections are served (see :data:`ConnectionKind`).
    ``node`` is the node this listener is, when the broker stands for several
    (``kafkette serve --nodes``): its connections' requests are served as that node.
    With ``tls`` (asyncio only) every connection is TLS first (SSL, or SASL_SSL with
    ``sasl``). ``advertised`` is the address this listener's clients are told to
    connect to (port 0: the bound port); None leaves the broker's own. ``name`` is the
    listener's name in the metrics (default: its security protocol).
    """
    if node is not None:
        serving_node.set(node)  # this task's context: every connection task copies it
    asyncio_running = _asyncio_running()
    if connections == "protocol" and not asyncio_running:
        raise ValueError("connections='protocol' needs asyncio")
    use_protocol = connections == "protocol" or (connections == "auto" and asyncio_running)
    if tls is not None and not use_protocol:
        raise ValueError("TLS listeners are served under asyncio only")
    if name is None:
        name = ("SASL_" if sasl is not None else "") + ("SSL" if tls is not None else "PLAINTEXT")
    listener = socket.create_server((host, port), backlog=LISTEN_BACKLOG)
    listener.setblocking(False)
    bound: int = listener.getsockname()[1]
    if advertised is not None:
        advertised_address.set((advertised[0], advertised[1] or bound))
    try:
        async with anyio.create_task_group() as tg:
            task_status.started(bound)
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
                peer = f"{address[0]}:{address[1]}"
                quotas = broker.connection_quotas
                if not quotas.acquire(address[0]):
                    logger.info(
                        "rejected connection from %s: the address already has the "
                        "configured maximum of %d connections (max.connections.per.ip)",
                        peer,
                        quotas.limit(address[0]),
                    )
                    sock.close()
                    continue
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if use_protocol:
                    serve = serve_asyncio_connection(broker, sock, peer, sasl, tls)
                else:
                    serve = serve_connection(broker, sock, peer, sasl)
                stats = broker.metrics.connections
                tg.start_soon(_counted, serve, quotas, address[0], stats, name)
    finally:
        anyio.notify_closing(listener)
        listener.close()
