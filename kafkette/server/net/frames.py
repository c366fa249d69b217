"""One request frame in, the response frame's parts out: the part of a connection
that does not depend on how bytes reach the socket.

Both connection implementations (:mod:`kafkette.server.net.socket_connection` for
any anyio backend, :mod:`kafkette.server.net.asyncio_connection` under asyncio) call
:func:`process_frame` for each request and, on a SASL listener, :func:`serve_sasl_frame`
until the client has authenticated (which sets the connection's
:data:`~kafkette.server.acl.principal.connection_principal`), and again for a
re-authentication (KIP-368: :func:`sasl_frame` says which frames are the
authenticator's, and closes a connection whose session expired).

Decoding a request and encoding its answer take time in proportion to the
number of elements a frame holds, and a frame may hold up to
``socket.request.max.bytes`` (100 MB): a Metadata request naming a million
topics takes seconds. Frames of at least :data:`LARGE_FRAME_BYTES` (except
Produce, whose records are decoded lazily) are therefore decoded, and their
answers encoded, in a worker thread, so that the event loop keeps serving
other connections meanwhile; only the handler runs on the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.framing import frame_parts
from kafkette.protocol.headers import (
    API_VERSIONS_KEY,
    PRODUCE_KEY,
    UnsupportedRequestVersionError,
    decode_request,
    encode_response,
    encode_response_frame,
    encode_response_parts,
)
from kafkette.protocol.primitives import INT16, INT32
from kafkette.protocol.schema import Response
from kafkette.server.acl.principal import connection_principal
from kafkette.server.broker import Broker
from kafkette.server.data_dir.read_only import refusal
from kafkette.server.dispatch import ANONYMOUS, HANDLERS, CloseConnection, RequestContext
from kafkette.server.faults.table import FaultDisconnect, controls_faults, serve_with_faults
from kafkette.server.handlers.api_versions import unsupported_version_response
from kafkette.server.nodes import serving_node
from kafkette.server.routing import misrouted
from kafkette.server.sasl import ServerAuthenticator
from kafkette.server.steps import STEP_BUDGET_S

logger = logging.getLogger("kafkette.server.net.listener")


FETCH_KEY = 1
LARGE_FRAME_BYTES = 1 << 20
"""Request frames from this size on are decoded and answered off the event loop."""


def _unsupported_api_versions(broker: Broker, correlation_id: int) -> list[Any]:
    """ApiVersions v0 with UNSUPPORTED_VERSION and our ranges (KIP-511)."""
    body = encode_response(unsupported_version_response(broker), 0, correlation_id)
    return frame_parts([body])


async def process_frame(
    broker: Broker,
    frame: memoryview,
    peer: str,
    *,
    external_records: bool = False,
    offload: bool = True,
) -> Sequence[Any]:
    """Serve one request frame; returns the response frame's parts (none for acks=0).

    Parts are bytes-like; with ``external_records`` a part may also be a log
    segment region (``LogSlice``) for the caller to send with ``os.sendfile``.
    With ``offload`` false, large frames are decoded and answered on the event
    loop too: a loop whose clock is a test's fake (trio's ``MockClock``) cannot
    see a worker thread, and would move its clock while the thread works.
    """
    large = offload and len(frame) >= LARGE_FRAME_BYTES and not _is_produce(frame)
    try:
        if large:
            # A copy: the connection's receive buffer may move on while the thread reads.
            header, request = await anyio.to_thread.run_sync(decode_request, bytes(frame))
        else:
            header, request = decode_request(frame)
    except UnsupportedRequestVersionError as exc:
        if exc.header.request_api_key == API_VERSIONS_KEY:
            return _unsupported_api_versions(broker, exc.header.correlation_id)
        raise CloseConnection(str(exc)) from None
    except ProtocolError as exc:
        raise CloseConnection(f"malformed request: {exc}") from None
    version = header.request_api_version
    # Broker.supports, inlined: this runs for every request.
    entry = HANDLERS.get(header.request_api_key)
    if entry is None or not entry.min_version <= version <= entry.max_version:
        if header.request_api_key == API_VERSIONS_KEY:
            return _unsupported_api_versions(broker, header.correlation_id)
        raise CloseConnection(
            f"{type(request).NAME} version {version} is not served by this broker"
        )
    # Broker.handle, inlined: the entry is already looked up.
    started = time.perf_counter()
    # (positional: attrs' generated __init__ takes them faster than keywords)
    ctx = RequestContext(
        header,
        peer,
        "PLAINTEXT",  # listener: the field's default (no handler reads it)
        serving_node.get(),
        connection_principal.get() or ANONYMOUS,
        broker.authorizer,
    )
    if ctx.node_id in broker.nodes.stopped and not controls_faults(request):
        raise CloseConnection(f"node {ctx.node_id} is stopped")  # as a stopped broker's socket
    # A coordinator request at a node that does not coordinate its key (several nodes).
    answer = misrouted(broker.nodes, ctx.node_id, request, version) if broker.nodes.multi else None
    response: Response | None
    if broker.config.read_only:  # a data directory opened read-only: writes are refused
        answer = answer or refusal(request, broker.config.data_dir)
    if answer is not None:
        response = answer
    elif broker.faults.active:  # a test armed faults on this broker (kafkette.testing)
        try:
            response = await serve_with_faults(
                broker.faults,
                request,
                lambda: entry.func(broker, ctx, request),
                broker.node_id if ctx.node_id is None else ctx.node_id,
            )
        except FaultDisconnect as exc:
            raise CloseConnection(str(exc)) from None
    else:
        response = await entry.func(broker, ctx, request)
    elapsed = time.perf_counter() - started
    broker.metrics.served(header.request_api_key, version, request, response, elapsed)
    # A long handler most likely made a long answer (DescribeConfigs naming a
    # broker 100,000 times in a 100 KB frame answers 150 MB): encode it off the loop too.
    if offload and not large and header.request_api_key not in _HOT_KEYS:
        large = ctx.large_answer or elapsed >= STEP_BUDGET_S
    if response is None:
        return ()
    if header.request_api_key == PRODUCE_KEY:  # never large, no record regions
        # One buffer with its size prefix: the connection writes it as it is (no join).
        return [encode_response_frame(response, version, header.correlation_id)]
    if not external_records:
        if large:
            body = await anyio.to_thread.run_sync(
                encode_response, response, version, header.correlation_id
            )
            return frame_parts([body])
        return frame_parts([encode_response(response, version, header.correlation_id)])
    if large:
        parts = await anyio.to_thread.run_sync(
            encode_response_parts, response, version, header.correlation_id
        )
    else:
        parts = encode_response_parts(response, version, header.correlation_id)
    if len(parts) == 1:
        return [INT32.pack(len(parts[0])), parts[0]]
    return [INT32.pack(sum(len(p) for p in parts)), *parts]


_HOT_KEYS = frozenset({PRODUCE_KEY, FETCH_KEY})
"""Produce and Fetch may wait long (acks, long polls) but their answers are small
or records, cheap to encode: they stay on the loop."""


def _is_produce(frame: memoryview) -> bool:
    return len(frame) >= 2 and INT16.unpack_from(frame)[0] == PRODUCE_KEY


async def authenticate_frame(
    broker: Broker, auth: ServerAuthenticator, frame: memoryview, peer: str
) -> tuple[Sequence[Any], str | None]:
    """Serve one frame of a connection not yet authenticated.

    Returns the parts to send and, when the connection must then close, why.
    """
    if auth.expects_raw_token:
        reauthenticating = auth.reauthenticating
        step = auth.receive_token(bytes(frame), time.monotonic() * 1000.0)
        if step.close is not None or step.token is None:
            return (), step.close or "SASL exchange ended"
        if auth.complete:
            broker.metrics.connections.authenticated(auth.mechanism, True)
            _log_authenticated(auth, peer, reauthenticating, " (SaslHandshake v0, unframed tokens)")
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
    reauthenticating = auth.reauthenticating
    step = auth.receive_request(header.request_api_key, version, request, time.monotonic() * 1000.0)
    if step.to_broker:
        return await process_frame(broker, frame, peer), None
    parts: Sequence[Any] = ()
    if step.response is not None:
        body = encode_response(step.response, version, header.correlation_id)
        parts = frame_parts([body])
    if auth.complete:
        broker.metrics.connections.authenticated(auth.mechanism, True)
        _log_authenticated(auth, peer, reauthenticating)
    return parts, step.close


def _log_authenticated(
    auth: ServerAuthenticator, peer: str, reauthenticated: bool, how: str = ""
) -> None:
    """The connection's principal is set and logged (once per (re-)authentication)."""
    lifetime = auth.session_lifetime_ms
    session = f", session {lifetime} ms" if lifetime else ""
    if not reauthenticated:
        connection_principal.set(auth.principal)
        logger.info(
            "%s authenticated as %s with %s%s%s", peer, auth.principal, auth.mechanism, how, session
        )
        return
    logger.info(
        "%s re-authenticated as %s with %s%s (re-authentication %d on this connection%s)",
        peer,
        auth.principal,
        auth.mechanism,
        how,
        auth.reauthentications,
        session,
    )


def sasl_frame(auth: ServerAuthenticator, frame: memoryview) -> bool:
    """Whether ``frame`` goes to :func:`serve_sasl_frame` rather than to the broker: before
    authentication, and for a SaslHandshake that begins a re-authentication (KIP-368).

    Raises :class:`CloseConnection` for a request on a connection whose session expired
    without re-authentication, as Kafka's ``SocketServer`` does (unanswered).
    """
    if auth.session_expires_ms is not None and auth.complete and len(frame) >= 2:
        api_key = INT16.unpack_from(frame)[0]
        close = auth.check_request(api_key, time.monotonic() * 1000.0)
        if close is not None:
            raise CloseConnection(close)
    return not auth.complete


async def serve_sasl_frame(
    broker: Broker,
    auth: ServerAuthenticator,
    frame: memoryview,
    peer: str,
    delay_s: float,
    send: Callable[[Sequence[Any]], Awaitable[None]],
) -> None:
    """Serve one frame before authentication completes, sending its answer with ``send``.

    Raises :class:`CloseConnection` when the connection must close; after a
    failed authentication, only once ``delay_s`` has passed since the answer
    (Kafka's ``connection.failed.authentication.delay.ms``).
    """
    parts, close = await authenticate_frame(broker, auth, frame, peer)
    if parts:
        await send(parts)
    if close is not None:
        if auth.failed:
            broker.metrics.connections.authenticated(auth.mechanism, False)
            await anyio.sleep(delay_s)
        raise CloseConnection(close)
