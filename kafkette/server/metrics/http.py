"""The scrape endpoint: HTTP on the broker's event loop, ``GET /metrics`` answered with
Prometheus' text format (h11 parses; every wait is a non-blocking socket read; the
scrape itself lets other tasks run every few milliseconds).

Any other path is 404, any other method 405. A connection may ask again (keep-alive);
one that sends nothing for :data:`IDLE_TIMEOUT_S` is closed, as is one that sends
something h11 cannot read (400 first).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import h11

from kafkette.server.metrics.exposition import CONTENT_TYPE

logger = logging.getLogger("kafkette.server.metrics")

IDLE_TIMEOUT_S = 30.0
READ_SIZE = 65536
PATHS = (b"/metrics", b"/")


_REASONS = {200: b"OK", 404: b"Not Found", 405: b"Method Not Allowed"}


def _response(status: int, body: bytes, content_type: str) -> tuple[h11.Response, h11.Data]:
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    if status == 405:
        headers.append(("Allow", "GET, HEAD"))
    response = h11.Response(status_code=status, headers=headers, reason=_REASONS[status])
    return response, h11.Data(data=body)


async def _serve_connection(
    stream: anyio.abc.ByteStream, scrape: Callable[[], Awaitable[str]]
) -> None:
    connection = h11.Connection(h11.SERVER)
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            with anyio.move_on_after(IDLE_TIMEOUT_S) as idle:
                try:
                    data = await stream.receive(READ_SIZE)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    data = b""
            if idle.cancelled_caught:
                return
            connection.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            path = event.target.split(b"?", 1)[0]
            if event.method not in (b"GET", b"HEAD"):
                answer = _response(405, b"only GET\n", "text/plain")
            elif path not in PATHS:
                answer = _response(404, b"the metrics are at /metrics\n", "text/plain")
            else:
                answer = _response(200, (await scrape()).encode(), CONTENT_TYPE)
            head, body = answer
            out = connection.send(head) or b""
            if event.method != b"HEAD":
                out += connection.send(body) or b""
            out += connection.send(h11.EndOfMessage()) or b""
            await stream.send(out)
            continue
        if isinstance(event, h11.EndOfMessage):
            if connection.our_state is h11.MUST_CLOSE or connection.their_state is h11.MUST_CLOSE:
                return
            try:
                connection.start_next_cycle()
            except h11.LocalProtocolError:
                return
            continue
        if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
            return


_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


async def _guarded(stream: anyio.abc.ByteStream, scrape: Callable[[], Awaitable[str]]) -> None:
    """Serve one connection; a malformed request is answered 400 and the connection closed."""
    async with stream:
        try:
            await _serve_connection(stream, scrape)
        except h11.RemoteProtocolError as exc:
            logger.info("metrics endpoint: a malformed request (%s): connection closed", exc)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(_BAD_REQUEST)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass


async def open_metrics_listener(host: str, port: int) -> anyio.abc.Listener[anyio.abc.SocketStream]:
    """The endpoint's listening socket (port 0: a free one); an OSError naming the address
    when it cannot be bound."""
    try:
        return await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        raise OSError(exc.errno, f"metrics endpoint {host}:{port}: {exc.strerror}") from None


async def serve_metrics(
    scrape: Callable[[], Awaitable[str]],
    host: str,
    port: int,
    *,
    listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``await scrape()`` on ``http://host:port/metrics`` (or on ``listener``, opened with
    :func:`open_metrics_listener`) until cancelled; ``task_status`` gets the bound port."""
    if listener is None:
        listener = await open_metrics_listener(host, port)
    async with listener:
        task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))
        await listener.serve(lambda stream: _guarded(stream, scrape))
