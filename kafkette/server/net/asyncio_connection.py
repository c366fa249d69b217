"""A connection served under asyncio with an :class:`asyncio.BufferedProtocol`.

The socket stays registered for reading for the connection's life (no
``add_reader``/``remove_reader`` per wait) and is read into one buffer shared
by the thread's connections: :meth:`ConnectionProtocol.buffer_updated` cuts
whole requests out of it with a :class:`~kafkette.server.net.frame_queue.FrameQueue`
(one copy each) and wakes the connection's one serving task only once a whole
request has arrived. The rest of a large request (from
:data:`~kafkette.backends.pages.landing.LAND_FROM` bytes) is received straight into
its region of the connection's :class:`~kafkette.backends.pages.landing.Landing`
instead, where a memory log may keep its batches. Before the task waits, it
reads what the socket already holds: a client waiting for an answer has often
sent its next request by the time the answer is written, and reading it there
serves it without two turns of the event loop (select, then the woken task).
It gives the event loop a turn at least every :data:`MAX_DIRECT_READS` such
reads, and before the next request once it has served requests for
:data:`~kafkette.server.steps.STEP_BUDGET_S` without a wait.

The task serves the requests strictly in order (so pipelined requests are
answered in order, as Kafka does), and each answer goes out as soon as it is
ready, as Kafka's broker sends them: a client pipelining requests gets the
first answer while the next request is served, so it and the broker work at
the same time. (Holding the answers to the requests of one read for a single
``send`` saved system calls but made such a client and the broker take
turns: kafkette's producer, 5 requests in flight, sent 1.6 to 2.2 times fewer
records a second that way.) The task waits for the transport to drain above
its high-water mark, and log segment regions go out with ``loop.sendfile``
(``os.sendfile``) after the bytes queued before them (under TLS, whose records
the kernel cannot make, they are read in chunks, large ones in a worker thread,
and written through the transport as it drains). On plain TCP, an answer
holding at least :data:`DIRECT_FROM` bytes of a memory log's stored batches
goes out the same way, written by the connection on the socket once the
transport has sent what it holds: Python 3.11's transport would copy whatever
the socket does not take at once. Arena batches are spliced by reference to
their pages (:mod:`~kafkette.server.net.zero_copy`), other views go with ``sendmsg``.

A client that sends faster than it is served cannot grow memory without
bound: reading pauses while whole requests over :data:`READ_HIGH_WATER`
bytes wait, and resumes once they are served. Bytes of one request still
arriving are bounded by ``socket.request.max.bytes``.

``connections.max.idle.ms`` counts time waiting for a request (since the
last bytes received), never time serving one, so a long-polling fetch is not
cut. One timer per connection checks it, rescheduled only when it fires.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio.to_thread

from kafkette.backends.pages.landing import Landing
from kafkette.backends.types import FileRef
from kafkette.protocol.errors import ProtocolError
from kafkette.server.acl.principal import connection_principal
from kafkette.server.broker import Broker
from kafkette.server.dispatch import CloseConnection
from kafkette.server.net import zero_copy
from kafkette.server.net.frame_queue import FrameQueue
from kafkette.server.net.frames import process_frame, sasl_frame, serve_sasl_frame
from kafkette.server.net.tls import ANONYMOUS, certificate_principal
from kafkette.server.sasl import SaslSettings, ServerAuthenticator
from kafkette.server.steps import STEP_BUDGET_S

logger = logging.getLogger("kafkette.server.net.listener")

READ_HIGH_WATER = 1024 * 1024
"""Reading pauses while more than this many bytes of whole requests wait to be served."""

RECEIVE_SIZE = 256 * 1024
"""Bytes read from the socket at most at once."""

_local = threading.local()


def _receive_buffer() -> memoryview:
    """The buffer the connections of this thread's event loop read into.

    One for all of them: a read and the cutting of its frames (which copies
    them out) happen in one callback, so no connection's bytes outlive it, and
    idle connections hold no buffer.
    """
    view: memoryview | None = getattr(_local, "receive_buffer", None)
    if view is None:
        view = _local.receive_buffer = memoryview(bytearray(RECEIVE_SIZE))
    return view


FLUSH_SIZE = 256 * 1024
"""Queued answers are handed to the transport at once past this many bytes."""

MAX_DIRECT_READS = 16
"""Reads the serving task makes itself in a row before it waits on the event loop
(so a connection that never stops sending cannot keep the others, and the
timers, from their turn)."""

_BUFFERS = (bytes, bytearray, memoryview)
LARGE_PART = 64 * 1024
"""Queued parts from this size on are handed to the transport alone, not joined."""

DIRECT_FROM = 64 * 1024
"""An answer holding at least this many bytes of stored batch views (a memory log's
records) is written on the socket by the connection itself, not by the transport."""

REGION_CHUNK = 256 * 1024
"""A log segment region that cannot go by ``os.sendfile`` (TLS) is read and written
this many bytes at a time."""

READ_ON_LOOP = 64 * 1024
"""Chunks of a region up to this size are read on the event loop (from the page cache
that takes microseconds, less than a hand-off to a worker thread); larger ones in a
worker thread."""


class ConnectionClosed(Exception):
    """The peer closed the connection or it broke (the argument, if any, says when,
    for the log)."""


_CUT = "went away in the middle of an answer"


def _view_bytes(parts: Sequence[Any]) -> int:
    """Bytes of the stored batch views (memory log slices) among an answer's parts."""
    return sum(part.size for part in parts if not isinstance(part, _BUFFERS) and part.file is None)


class ConnectionProtocol(asyncio.BufferedProtocol):
    """The transport's side of one connection: buffers requests, wakes the serving task.

    The transport receives into a buffer shared by the connections of the
    thread (``recv_into``) rather than a new bytes object per read.
    """

    def __init__(
        self, decoder: FrameQueue, idle_s: float, sock: socket.socket | None = None
    ) -> None:
        self.decoder = decoder
        self._sock = sock
        self._direct_reads = 0
        self._turn_since = time.monotonic()
        """When the serving task last got the event loop back from a wait."""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.closed = False
        """The peer closed the connection, or it broke."""
        self.idle = False
        """``connections.max.idle.ms`` passed while waiting for a request."""
        self.reading_paused = False
        self.eof = False
        """The client closed its side (no more requests will come)."""
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._idle_s = idle_s
        self._last_received = 0.0
        self._waiting_since = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._receive_view = _receive_buffer()
        self._into_landing = False
        """Whether the last buffer handed out is the rest of a frame in a landing region."""
        self._out: list[Any] = []
        self._out_size = 0
        self._flush_scheduled = False
        self._half_close = True
        # Large answers of stored views are written on the socket itself (see
        # _send_direct); that needs an event loop whose writers we can add.
        self._writes_direct = (
            sock is not None
            and isinstance(self.loop, asyncio.SelectorEventLoop)
            and hasattr(sock, "sendmsg")
        )
        self._writing_direct = False
        self._writable: asyncio.Future[None] | None = None
        self._write_fd: int | None = None
        self._sendfile_native = True
        """Whether log segment regions go with ``os.sendfile`` (not under TLS)."""

    # transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        tls = transport.get_extra_info("sslcontext") is not None
        # asyncio's TLS transport cannot stay open for writing after the peer's EOF.
        self._half_close = not tls
        # The kernel cannot make TLS records: regions are read and written instead.
        self._sendfile_native = not tls
        if self._idle_s != math.inf:
            self._last_received = self.loop.time()
            self._idle_timer = self.loop.call_at(
                self._last_received + self._idle_s, self._check_idle
            )

    def get_buffer(self, sizehint: int) -> memoryview:
        landing = self.decoder.receive_buffer()
        self._into_landing = landing is not None
        return self._receive_view if landing is None else landing

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self.decoder
        if self._idle_timer is not None:
            self._last_received = self.loop.time()
        try:
            if self._into_landing:
                decoder.received(nbytes)
            else:
                decoder.feed(self._receive_view[:nbytes])
        except ProtocolError:
            # next_frame raises it again.
            self._pause_reading()
            self._wake()
            return
        if decoder.has_whole_frame:
            if self._waiter is not None:
                self._wake()
            if decoder.buffered > READ_HIGH_WATER or decoder.failed:
                # next_frame raises the failure once the requests before it are served.
                self._pause_reading()

    def eof_received(self) -> bool:
        # The client sent everything it will: the requests already received are
        # still answered (as the socket path does), then the connection is closed.
        self.eof = True
        self._wake()
        return self._half_close  # keep the transport open for the answers

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._wake()
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)
        self._on_writable()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    @property
    def waiting(self) -> bool:
        """Whether the serving task waits on the event loop for a request."""
        return self._waiter is not None

    # the serving task's side

    def ready_frame(self) -> memoryview | None:
        """The next whole request if it has already been received, else None (no wait).

        None too once the serving task has held the event loop for
        :data:`~kafkette.server.steps.STEP_BUDGET_S` since its last wait:
        :meth:`next_frame` then gives the other connections a turn first.
        Raises the decoder's :class:`ProtocolError` for a bad size prefix.
        """
        if time.monotonic() - self._turn_since >= STEP_BUDGET_S:
            return None
        frame = self.decoder.next_frame()
        if frame is not None and self.reading_paused:
            self._resume_if_drained()
        return frame

    def _resume_if_drained(self) -> None:
        decoder = self.decoder
        if decoder.buffered <= READ_HIGH_WATER // 2 and not decoder.failed:
            self._resume_reading()

    async def next_frame(self) -> memoryview | None:
        """The next whole request; None once the connection is closed or idle.

        Raises the decoder's :class:`ProtocolError` for a bad size prefix.
        """
        if time.monotonic() - self._turn_since >= STEP_BUDGET_S:
            # A client pipelining small requests (librdkafka sends one partition per
            # Produce) can keep thousands waiting: served without a wait, they held
            # the loop for 100 ms and more while a wide topic got its first records.
            await asyncio.sleep(0)
            self._turn_since = time.monotonic()
        decoder = self.decoder
        while True:
            frame = decoder.next_frame()
            if frame is not None:
                if self.reading_paused:
                    self._resume_if_drained()
                return frame
            if self._out:
                self.flush()  # every whole request is answered: send the answers now
            if self.reading_paused:
                self._resume_reading()
            if self.closed or self.eof or self.idle:
                return None
            if self._direct_reads < MAX_DIRECT_READS and self._read_now():
                self._direct_reads += 1
                continue
            self._direct_reads = 0
            waiter = self._waiter = self.loop.create_future()
            if self._idle_timer is not None:
                self._waiting_since = self.loop.time()
            try:
                await waiter
            finally:
                self._waiter = None
            self._turn_since = time.monotonic()

    def _read_now(self) -> bool:
        """Read what the socket holds now, as the transport would; whether anything was.

        The answers were just sent: a client that waits for them before sending its
        next request has often sent it by now (it runs while we send, when the
        machine is busy). Reading it here serves it at once instead of going
        through the event loop twice (select, then the woken task). Errors and the
        end of the stream are left for the transport's own read to see.
        """
        sock = self._sock
        if sock is None:
            return False
        try:
            n = sock.recv_into(self.get_buffer(-1))
        except OSError:  # EAGAIN mostly
            return False
        if not n:
            return False
        self.buffer_updated(n)
        return True

    def write(self, parts: Sequence[Any]) -> None:
        """Queue bytes-like parts; they go out at the next :meth:`flush` (the serving
        task flushes after each answer), or at once past :data:`FLUSH_SIZE` queued
        bytes."""
        if self.closed:
            raise ConnectionClosed
        self._out.extend(parts)
        for part in parts:
            self._out_size += len(part)
        if self._out_size >= FLUSH_SIZE:
            self.flush()

    def queue_parts(self, parts: Sequence[Any]) -> bool:
        """Queue the parts as :meth:`write` does if every one is bytes-like; whether they
        were (if not, nothing was: :meth:`send_parts` sends them). The caller then
        waits for :meth:`drain` when :attr:`writing_paused`."""
        if self.closed:
            return False
        for part in parts:
            if not isinstance(part, _BUFFERS):
                return False
        self.write(parts)
        return True

    def send_now(self, parts: Sequence[Any]) -> bool:
        """Hand an answer of bytes-like parts to the transport now, after whatever is
        queued; whether it was (if not, nothing was: :meth:`send_parts` sends it). The
        caller then waits for :meth:`drain` when :attr:`writing_paused`."""
        if len(parts) == 1 and not self._out and not self._writing_direct and not self.closed:
            # The usual answer (a Produce one is one buffer): no queue on the way.
            part = parts[0]
            if isinstance(part, _BUFFERS):
                assert self.transport is not None
                self.transport.write(part)
                return True
        if not self.queue_parts(parts):
            return False
        self.flush()
        return True

    @property
    def writing_paused(self) -> bool:
        """Whether the transport is above its high-water mark."""
        return self._writing_paused

    async def drain(self) -> None:
        """If the transport is above its high-water mark, hand it the queued answers
        and wait until it is below the low-water mark."""
        if self._writing_paused:
            self.flush()
            await self._wait_drained()

    def flush_soon(self) -> None:
        """Make sure queued answers go out if the serving task yields to the loop
        before it flushes them itself (a request that waits, such as a long poll)."""
        if self._out and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand the queued bytes to the transport (in one write)."""
        self._flush_scheduled = False
        if self._writing_direct:  # they go after the answer being written on the socket
            return
        out = self._out
        if not out:
            return
        self._out = []
        self._out_size = 0
        if self.closed:
            return
        assert self.transport is not None
        if len(out) == 1:
            self.transport.write(out[0])
            return
        # Small parts are joined into one write; large ones (stored batches of a memory
        # log under TLS, as views) go to the transport as they are, which sends them
        # without a copy when the socket takes them (it keeps only what it cannot send).
        small: list[Any] = []
        write = self.transport.write
        for part in out:
            if len(part) < LARGE_PART:
                small.append(part)
                continue
            if small:
                write(small[0] if len(small) == 1 else b"".join(small))
                small = []
            write(part)
        if small:
            write(small[0] if len(small) == 1 else b"".join(small))

    async def send_parts(self, parts: Sequence[Any]) -> None:
        """Send bytes parts and log slices, in order; file regions with ``loop.sendfile``."""
        if self.closed:
            raise ConnectionClosed
        if self._writes_direct and _view_bytes(parts) >= DIRECT_FROM:
            await self._send_direct(parts)
            return
        pending: list[Any] = []
        for part in parts:
            if isinstance(part, _BUFFERS):
                pending.append(part)
            elif part.file is None:
                pending.extend(part.buffers)
            else:
                if pending:
                    self.write(pending)
                    pending = []
                await self._send_region(part.file, part.position, part.size)
        if pending:
            self.write(pending)
        await self.drain()

    async def send_parts_now(self, parts: Sequence[Any]) -> None:
        """:meth:`send_parts`, then hand everything queued to the transport."""
        await self.send_parts(parts)
        self.flush()

    async def _send_region(self, file: FileRef, position: int, size: int) -> None:
        """Send ``size`` bytes of ``file`` from ``position``, after the bytes queued before.

        With ``os.sendfile`` (``loop.sendfile``) where the transport allows it (plain
        TCP), else (TLS, whose records the kernel cannot make) read in chunks and
        written through the transport (:meth:`_write_region`).
        """
        if size == 0:
            return
        if self._sendfile_native:
            self.flush()  # loop.sendfile waits for the transport's buffer to empty
            if await self._sendfile(file, position, size):
                return
        await self._write_region(file, position, size)

    async def _sendfile(self, file: Any, position: int, size: int) -> bool:
        """Send the region with ``loop.sendfile``; False if ``os.sendfile`` cannot be used
        on this connection (nothing was sent then: the caller reads the region).
        (``file`` is a :class:`FileRef`: ``loop.sendfile`` only asks for its descriptor.)

        Only the peer going away is a closed connection; any other error goes up to be
        logged as what it is (an error taken for a closing transport once made every
        answer from disk under TLS close the connection without a word).
        """
        transport = self.transport
        assert transport is not None
        if self.closed or transport.is_closing():
            raise ConnectionClosed(_CUT)
        try:
            sent = await self.loop.sendfile(transport, file, position, size, fallback=False)
        except asyncio.SendfileNotAvailableError:
            if self.closed or transport.is_closing():
                raise ConnectionClosed(_CUT) from None
            return False
        except ConnectionError as exc:  # reset, broken pipe, closed while waiting
            raise ConnectionClosed(_CUT) from exc
        if sent != size:
            raise CloseConnection("a log segment is shorter than the region read from it")
        return True

    async def _write_region(self, file: FileRef, position: int, size: int) -> None:
        """Send the region through the transport, read :data:`REGION_CHUNK` bytes at a
        time, each written once the transport is below its high-water mark again.

        Chunks larger than :data:`READ_ON_LOOP` are read in a worker thread, so that a
        large answer (or a slow disk) does not hold up the other connections; at most
        one chunk per connection is held besides what the transport buffers.
        """
        end = position + size
        while position < end:
            length = min(REGION_CHUNK, end - position)
            if length <= READ_ON_LOOP:
                data = file.pread(length, position)
            else:
                data = await anyio.to_thread.run_sync(file.pread, length, position)
            if len(data) != length:
                raise CloseConnection("a log segment is shorter than the region read from it")
            if self.closed:
                raise ConnectionClosed(_CUT)
            self.write([data])
            position += length
            if self._writing_paused:
                self.flush()
                try:
                    await self._wait_drained()
                except ConnectionClosed:
                    raise ConnectionClosed(_CUT) from None

    async def _send_direct(self, parts: Sequence[Any]) -> None:
        """Send an answer holding large stored views on the socket, without the transport.

        Python 3.11's transport copies whatever the socket does not take at once
        into a buffer of its own, so a 16 MiB answer of stored batches would be
        copied; ``loop.sendfile`` avoids that for a file region by waiting until
        the transport's buffer is empty and then writing on the socket itself, and
        so does this for views: spliced by reference to their pages when the slice
        allows it (:mod:`~kafkette.server.net.zero_copy`), else with ``sendmsg`` (many
        views in one call, none joined).
        """
        buffers: list[Any] = []
        for part in parts:
            if isinstance(part, _BUFFERS):
                buffers.append(part)
            elif part.file is not None:
                await self._write_direct(buffers)
                buffers = []
                await self._send_region(part.file, part.position, part.size)
            elif part.spliceable and zero_copy.AVAILABLE:
                await self._write_direct(buffers)
                buffers = []
                await self._write_direct(list(part.buffers), spliceable=True)
            else:
                buffers.extend(part.buffers)
        await self._write_direct(buffers)
        await self.drain()

    async def _write_direct(self, buffers: list[Any], *, spliceable: bool = False) -> None:
        """Write the queued parts, then ``buffers``, on the socket, after everything
        the transport holds; nothing else is written meanwhile (flush waits)."""
        queued, self._out, self._out_size = self._out, [], 0
        buffers = [b for b in buffers if len(b)]
        if not queued and not buffers:
            return
        self._writing_direct = True
        try:
            await self._transport_emptied()
            if not spliceable:
                await self._sendmsg_all([*queued, *buffers])
                return
            if queued:
                await self._sendmsg_all(queued)
                await self._transport_emptied()  # (it sends what sendmsg could not)
            await self._splice_all(buffers)
        finally:
            self._writing_direct = False
            write_fd = self._write_fd
            if write_fd is not None:
                self._write_fd = None
                self.loop.remove_writer(write_fd)
                os.close(write_fd)

    async def _transport_emptied(self) -> None:
        """Wait until the transport has sent everything handed to it."""
        transport = self.transport
        assert transport is not None
        if transport.get_write_buffer_size() == 0:
            return
        low, high = transport.get_write_buffer_limits()
        # With both marks at 0 the transport pauses us now and resumes us once empty.
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            await self._wait_drained()
        finally:
            transport.set_write_buffer_limits(high=high, low=low)

    async def _sendmsg_all(self, buffers: list[Any]) -> None:
        await self._send_views(zero_copy.sendmsg_all, buffers)

    async def _splice_all(self, buffers: list[Any]) -> None:
        await self._send_views(zero_copy.splice_all, buffers)

    async def _send_views(
        self,
        send: Callable[[socket.socket, list[Any], zero_copy.WaitWritable], Awaitable[list[Any]]],
        buffers: list[Any],
    ) -> None:
        """Write ``buffers`` on the socket with ``send``; what it leaves (no descriptor to
        watch) goes to the transport, which is empty and writes nothing else meanwhile."""
        sock = self._sock
        assert sock is not None
        if self.closed:
            raise ConnectionClosed(_CUT)
        try:
            rest = await send(sock, buffers, self._wait_writable)
        except OSError as exc:  # reset, broken pipe; EBADF once the transport closed it
            raise ConnectionClosed(_CUT) from exc
        self._hand_to_transport(rest)

    def _hand_to_transport(self, buffers: Sequence[Any]) -> None:
        assert self.transport is not None
        for buffer in buffers:
            self.transport.write(buffer)

    async def _wait_writable(self) -> bool:
        """Wait until the socket takes bytes again; False if it cannot be watched (no
        descriptor left to duplicate): the transport then sends the rest."""
        if self._write_fd is None:
            sock = self._sock
            assert sock is not None
            # The transport owns the socket's descriptor (the loop refuses writers on
            # it): a duplicate, for this answer only, is watched instead.
            try:
                self._write_fd = os.dup(sock.fileno())
            except OSError as exc:
                self._writes_direct = False  # for the connection's life: one log line
                logger.warning("answers of stored views go through the transport: %s", exc)
                return False
            self.loop.add_writer(self._write_fd, self._on_writable)
        waiter = self._writable = self.loop.create_future()
        try:
            await waiter
        finally:
            self._writable = None
        if self.closed:
            raise ConnectionClosed(_CUT)
        return True

    def _on_writable(self) -> None:
        waiter = self._writable
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait_drained(self) -> None:
        while self._writing_paused and not self.closed:
            drain = self._drain = self.loop.create_future()
            try:
                await drain
            finally:
                self._drain = None
        if self.closed:
            raise ConnectionClosed

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        self.reading_paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def _check_idle(self) -> None:
        now = self.loop.time()
        if self._waiter is None:  # serving a request: idle time starts after its answer
            deadline = now + self._idle_s
        else:
            deadline = max(self._last_received, self._waiting_since) + self._idle_s
            if now >= deadline:
                self._idle_timer = None
                self.idle = True
                self._wake()
                return
        self._idle_timer = self.loop.call_at(deadline, self._check_idle)

    def close(self) -> None:
        """Close the connection (bytes already written still go out first)."""
        self.flush()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close the connection at once, dropping unsent bytes."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self.transport is not None:
            self.transport.abort()


TLS_HANDSHAKE_TIMEOUT_S = 30.0
"""A TLS client that has not completed its handshake by then is disconnected."""


async def serve_asyncio_connection(
    broker: Broker,
    sock: socket.socket,
    peer: str,
    sasl: SaslSettings | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve one client connection (under asyncio) until it closes or misbehaves.

    With ``sasl``, the client must authenticate before anything but
    ApiVersions is served. With ``tls`` the connection is TLS: a failed handshake
    is logged (once, with the peer's address) and closes it.
    """
    idle_ms = broker.config.connections_max_idle_ms
    idle_s = idle_ms / 1000.0 if idle_ms >= 0 else math.inf
    decoder = FrameQueue(broker.config.socket_request_max_bytes, Landing())
    if sasl is not None:  # until the client authenticates; raised again in serve_protocol
        decoder.max_frame_size = min(sasl.max_receive_size, decoder.max_frame_size)
    loop = asyncio.get_running_loop()
    # Under TLS the socket carries records, not requests: no reads around the transport.
    direct = sock if tls is None else None
    try:
        if tls is None:
            transport, conn = await loop.connect_accepted_socket(
                lambda: ConnectionProtocol(decoder, idle_s, direct), sock
            )
        else:
            transport, conn = await loop.connect_accepted_socket(
                lambda: ConnectionProtocol(decoder, idle_s, direct),
                sock,
                ssl=tls,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
            )
    except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
        sock.close()
        if tls is None:
            raise
        logger.warning("TLS handshake with %s failed: %s", peer, _describe(exc))
        return
    except BaseException:
        sock.close()
        raise
    if tls is not None and tls.verify_mode != ssl.CERT_NONE:
        principal = certificate_principal(transport.get_extra_info("peercert"))
        if principal != ANONYMOUS:
            connection_principal.set(principal)  # this connection's task only
            logger.info("TLS client %s is %s", peer, principal)
    await serve_protocol(broker, conn, peer, sasl)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.reason} ({exc.library or 'SSL'})"
    return str(exc) or type(exc).__name__


async def serve_protocol(
    broker: Broker, conn: ConnectionProtocol, peer: str, sasl: SaslSettings | None = None
) -> None:
    """Serve the requests arriving on ``conn`` (connected) until it closes or misbehaves;
    the connection is closed on return."""
    auth = ServerAuthenticator(sasl) if sasl is not None else None
    sasl_delay_s = sasl.failed_authentication_delay_ms / 1000 if sasl is not None else 0.0
    aborted = True
    try:
        while True:
            # A request already received is taken without a wait (await) on the way.
            frame = conn.ready_frame()
            if frame is None and (frame := await conn.next_frame()) is None:
                break
            conn.flush_soon()
            if auth is not None and sasl_frame(auth, frame):
                await serve_sasl_frame(broker, auth, frame, peer, sasl_delay_s, conn.send_parts_now)
                max_size = broker.config.socket_request_max_bytes
                if not auth.complete:  # a re-authentication is capped again, as in Kafka
                    max_size = min(max_size, auth.settings.max_receive_size)
                conn.decoder.max_frame_size = max_size
                continue
            parts = await process_frame(broker, frame, peer, external_records=True)
            if parts:
                # The answer goes out now (see the module docstring).
                if not conn.send_now(parts):
                    await conn.send_parts(parts)
                elif conn.writing_paused:
                    await conn.drain()
        if conn.idle:
            logger.info(
                "closing connection from %s: idle for %d ms",
                peer,
                broker.config.connections_max_idle_ms,
            )
        elif conn.decoder.has_partial_frame:
            logger.info("client %s went away in the middle of a request", peer)
        aborted = False
    except ConnectionClosed as exc:
        if exc.args:
            logger.info("client %s %s", peer, exc.args[0])
        aborted = False
    except (CloseConnection, ProtocolError) as exc:
        logger.warning("closing connection from %s: %s", peer, exc)
        aborted = False
    except Exception:
        logger.exception("closing connection from %s after an internal error", peer)
    finally:
        broker.connection_closed(peer)
        if aborted:  # cancelled (the listener is shutting down) or an internal error
            conn.abort()
        else:
            conn.close()
        conn.decoder.close()
