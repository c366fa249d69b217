"""How a broker connection moves frames: one interface, two implementations.

:class:`BrokerConnection <kafkette.client.connection.BrokerConnection>`
encodes requests and negotiates versions; a pipe writes the encoded frames
and hands back the matching responses.

- :class:`StreamPipe` works over any anyio byte stream (TCP under trio, the
  in-process streams of ``memory://``). Without a pump there is no background
  reader task: the first task waiting for a response reads from the stream
  and hands every response it finds to its owner; when it has its own, the
  next waiting task takes over reading. A producer starts the pump
  (:meth:`StreamPipe.start_pump`): one task that writes submitted frames and
  reads every response while it runs, so that requests handed over with
  :meth:`StreamPipe.submit` need no task each.
- :class:`AsyncioPipe` is an :class:`asyncio.BufferedProtocol` for TCP (and
  TLS) under asyncio: the transport reads into one buffer the pipe keeps (a
  new bytes object per read is fresh memory, faulted in page by page, for
  each 256 KiB of a consumer's fetches), responses are parsed and delivered to
  one future per request, or to a callback for requests handed over with
  :meth:`AsyncioPipe.submit` (the producer's, which need no task of their
  own). anyio's socket streams pause and resume reading around every
  receive (two ``epoll_ctl`` calls) and yield to the loop on every send; for
  a producer pipelining thousands of requests a second that overhead was
  most of a request's cost.

Both close the connection when a request times out (a late response could
no longer be matched safely) and fail every waiting request when it breaks.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections import deque
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.abc

from kafkette.client.events import clock_factory, event_factory
from kafkette.client.gather_write import GatherWriter
from kafkette.client.wire import ClientWire
from kafkette.errors import KafkaConnectionError, KafkaTimeoutError
from kafkette.protocol.errors import DecodeError, ProtocolError
from kafkette.protocol.primitives import Buffer
from kafkette.protocol.schema import Response

logger = logging.getLogger("kafkette.client.connection")

RECEIVE_SIZE = 256 * 1024
WRITE_BUFFER_HIGH = 1 << 20
"""Bytes queued in an asyncio transport before a request waits for the socket to drain."""


OnResponse = Callable[[Response | None, BaseException | None], object]
"""Called with ``(response, None)`` or ``(None, error)`` for a submitted request."""


class FramePipe(Protocol):
    """Writes request frames and returns their responses, for one connection."""

    quiet: bool
    """Log the connection's closing at debug level, not info (the handshake's failures are
    reported by the caller, once)."""

    @property
    def failure(self) -> BaseException | None:
        """Why the pipe is closed, or None while it is open."""
        ...

    async def exchange(
        self, frame: bytes | bytearray, correlation_id: int, expect_response: bool
    ) -> Response | None:
        """Write ``frame``; return the response to ``correlation_id`` (None if none is expected).

        Raises :class:`KafkaConnectionError` when the connection breaks and
        :class:`KafkaTimeoutError` when no response comes in time.
        """
        ...

    async def close(self, error: BaseException) -> None:
        """Close the connection; waiting requests fail with ``error``."""
        ...

    @property
    def can_submit(self) -> bool:
        """Whether :meth:`submit` may be used now."""
        ...

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start what :meth:`submit` needs, in ``task_group`` (if anything)."""
        ...

    @property
    def behind(self) -> bool:
        """Whether the pipe is open and more than the high-water mark waits to be written."""
        ...

    def when_drained(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once, in the event loop, when the pipe is no longer
        :attr:`behind` or closes."""
        ...

    def submit(self, parts: list[Buffer], correlation_id: int, on_response: OnResponse) -> None:
        """Write the frame ``parts`` make, one after another (unchanged until written);
        ``on_response(response, error)`` gets the outcome later."""
        ...

    def cork(self) -> None:
        """Hold submitted frames until :meth:`uncork`."""
        ...

    def uncork(self) -> None:
        """Write the frames held since :meth:`cork`, together."""
        ...


async def connect_stream(
    host: str, port: int, ssl_context: ssl.SSLContext | None
) -> anyio.abc.ByteStream:
    """A TCP connection to ``host:port``, under TLS when ``ssl_context`` is given (Kafka
    brokers close TLS without close_notify, hence not standard-compatible)."""
    if ssl_context is None:
        return await anyio.connect_tcp(host, port)
    return await anyio.connect_tcp(
        host, port, ssl_context=ssl_context, tls_standard_compatible=False
    )


class StreamPipe:
    """Frames over an anyio byte stream; waiting tasks take turns reading, or the pump reads."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        wire: ClientWire,
        *,
        address: str,
        request_timeout_s: float,
    ) -> None:
        self._stream = stream
        self._wire = wire
        self._address = address
        self._request_timeout_s = request_timeout_s
        self._send_lock = anyio.Lock()
        self._responses: dict[int, Response | None] = {}
        self._reader_active = False
        self._new_event = event_factory()
        self._clock = clock_factory()
        self._changed = self._new_event()
        self._callbacks: dict[int, OnResponse] = {}
        self._deadlines: deque[tuple[float, int]] = deque()
        self._outbox: list[Buffer] = []
        self._outbox_size = 0
        self._outbox_ready = self._new_event()
        self._on_drained: list[Callable[[], object]] = []
        self._corked = False
        self._pumping = False
        self._read_scope: anyio.CancelScope | None = None
        self.failure: BaseException | None = None
        self.quiet = False

    async def exchange(
        self, frame: bytes | bytearray, correlation_id: int, expect_response: bool
    ) -> Response | None:
        try:
            with anyio.fail_after(self._request_timeout_s):
                async with self._send_lock:
                    await self._send(bytes(frame))
                if not expect_response:
                    return None
                return await self._wait_for(correlation_id)
        except TimeoutError:
            timeout = KafkaTimeoutError(
                f"no response from {self._address} within {self._request_timeout_s}s"
            )
            await self.close(timeout)
            raise timeout from None
        except anyio.get_cancelled_exc_class():
            self._wire.forget(correlation_id)
            raise

    async def _send(self, frame: bytes) -> None:
        try:
            await self._stream.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            error = KafkaConnectionError(f"connection to {self._address} broke: {exc}")
            await self.close(error)
            raise error from exc

    async def _wait_for(self, correlation_id: int) -> Response | None:
        while correlation_id not in self._responses:
            if self.failure is not None:
                raise KafkaConnectionError(
                    f"connection to {self._address} is closed"
                ) from self.failure
            if self._reader_active:
                await self._changed.wait()
                continue
            self._reader_active = True
            try:
                while correlation_id not in self._responses:
                    await self._read_once()
            finally:
                self._reader_active = False
                self._notify()
        return self._responses.pop(correlation_id)

    async def _read_once(self) -> None:
        try:
            data = await self._stream.receive(RECEIVE_SIZE)
        except (
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ) as exc:
            error = KafkaConnectionError(f"connection to {self._address} closed by the broker")
            await self.close(error)
            raise error from exc
        try:
            responses = self._wire.receive_data(data)
        except (DecodeError, ProtocolError) as exc:
            error = KafkaConnectionError(f"malformed response from {self._address}: {exc}")
            await self.close(error)
            raise error from exc
        callbacks = self._callbacks
        for correlation_id, response in responses:
            callback = callbacks.pop(correlation_id, None)
            if callback is not None:
                callback(response, None)
            elif response is not None:
                self._responses[correlation_id] = response
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = self._new_event()

    async def close(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            logger.log(
                logging.DEBUG if self.quiet else logging.INFO,
                "closing connection to %s: %s",
                self._address,
                error,
            )
            self._outbox.clear()
            self._outbox_ready.set()  # the pump's writer stops
            self._drained_now()
            callbacks, self._callbacks = self._callbacks, {}
            for callback in callbacks.values():
                broken = error
                if not isinstance(error, KafkaConnectionError):
                    broken = KafkaConnectionError(f"connection to {self._address} is closed")
                    broken.__cause__ = error
                callback(None, broken)
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
        self._notify()

    # ---- submit: the pump writes and reads for requests that have no task

    def submit(self, parts: list[Buffer], correlation_id: int, on_response: OnResponse) -> None:
        """Queue the frame ``parts`` make for the pump; ``on_response`` gets its response later.

        As :meth:`AsyncioPipe.submit`: ``on_response(response, None)``, or
        ``on_response(None, error)`` when the connection breaks or the request
        times out. Only while :attr:`can_submit`.
        """
        if self.failure is not None:
            raise KafkaConnectionError(f"connection to {self._address} is closed") from self.failure
        self._callbacks[correlation_id] = on_response
        self._outbox += parts
        self._outbox_size += sum(map(len, parts))
        deadline = self._clock() + self._request_timeout_s
        self._deadlines.append((deadline, correlation_id))
        scope = self._read_scope
        if scope is not None and scope.deadline > deadline:
            scope.deadline = deadline  # the pump reads with no deadline while nothing was due
        if not self._corked:
            self._outbox_ready.set()

    def cork(self) -> None:
        """Hold submitted frames until :meth:`uncork`, to write them at once."""
        self._corked = True

    def uncork(self) -> None:
        """Let the pump write the frames held since :meth:`cork` (in one write)."""
        self._corked = False
        if self._outbox:
            self._outbox_ready.set()

    @property
    def can_submit(self) -> bool:
        """Whether the pump runs and keeps up (less than the high-water mark queued)."""
        return self._pumping and self.failure is None and self._outbox_size < WRITE_BUFFER_HIGH

    @property
    def behind(self) -> bool:
        """Whether the pump runs and the high-water mark is queued for it to write."""
        return self._pumping and self.failure is None and self._outbox_size >= WRITE_BUFFER_HIGH

    def when_drained(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once the pump takes the queued frames, or stops."""
        self._on_drained.append(callback)

    def _drained_now(self) -> None:
        waiting, self._on_drained = self._on_drained, []
        for callback in waiting:
            callback()

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        """Run the pump in ``task_group`` (once): it ends when the pipe closes or the
        group is cancelled; readers waiting for responses then take turns again."""
        if self._pumping or self.failure is not None:
            return
        self._pumping = True
        task_group.start_soon(self._pump)

    async def _pump(self) -> None:
        while self._reader_active:  # a waiting request is reading: the pump takes over after it
            await self._changed.wait()
        self._reader_active = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write_submitted)
                await self._read_all()
                tg.cancel_scope.cancel()
        finally:
            self._pumping = False
            self._reader_active = False
            self._notify()
            self._drained_now()

    async def _write_submitted(self) -> None:
        while self.failure is None:
            if not self._outbox or self._corked:
                self._outbox_ready = self._new_event()
                await self._outbox_ready.wait()
                continue
            frames, self._outbox, self._outbox_size = self._outbox, [], 0
            self._drained_now()
            try:
                async with self._send_lock:
                    await self._send(b"".join(frames))  # bytes, as exchange sends
            except KafkaConnectionError:
                return  # closed: the submitted requests have failed with it

    async def _read_all(self) -> None:
        """Read until the pipe closes; a submitted request unanswered in time closes it."""
        deadlines = self._deadlines
        while self.failure is None:
            while deadlines and deadlines[0][1] not in self._callbacks:
                deadlines.popleft()  # answered
            deadline = deadlines[0][0] if deadlines else math.inf
            with anyio.CancelScope(deadline=deadline) as scope:
                self._read_scope = scope
                try:
                    await self._read_once()
                except KafkaConnectionError:
                    return  # closed: the submitted requests have failed with it
                finally:
                    self._read_scope = None
            if scope.cancelled_caught:
                timeout = KafkaTimeoutError(
                    f"no response from {self._address} within {self._request_timeout_s}s"
                )
                callback = self._callbacks.pop(deadlines.popleft()[1], None)
                if callback is not None:
                    callback(None, timeout)
                await self.close(timeout)


class AsyncioPipe(asyncio.BufferedProtocol):
    """Frames over an asyncio transport; responses go to per-request futures or callbacks.

    Timeouts: every request gets the same ``request_timeout_s``, so their
    deadlines come in the order the requests were written. One timer, armed
    for the oldest request still waiting, watches them all.
    """

    def __init__(self, wire: ClientWire, *, address: str, request_timeout_s: float) -> None:
        self._wire = wire
        self._address = address
        self._request_timeout_s = request_timeout_s
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._waiters: dict[int, asyncio.Future[Response | None]] = {}
        self._callbacks: dict[int, OnResponse] = {}
        self._deadlines: deque[tuple[float, int]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._drained: asyncio.Future[None] | None = None
        self._on_drained: list[Callable[[], object]] = []
        self._writer: GatherWriter | None = None  # writes submitted frames
        self._corked: list[Buffer] | None = None
        self._received: memoryview | None = None  # what the transport reads into
        self._direct = False  # get_buffer gave a view of the wire's buffer
        self.failure: BaseException | None = None
        self.quiet = False

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        wire: ClientWire,
        *,
        address: str,
        request_timeout_s: float,
        ssl_context: object | None = None,
    ) -> AsyncioPipe:
        """Open a TCP (TLS with ``ssl_context``) connection; OSError when it cannot."""
        loop = asyncio.get_running_loop()
        _, pipe = await loop.create_connection(
            lambda: cls(wire, address=address, request_timeout_s=request_timeout_s),
            host,
            port,
            ssl=ssl_context,  # type: ignore[arg-type]
        )
        return pipe

    # ---- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._writer = GatherWriter(transport)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)

    def get_buffer(self, sizehint: int) -> memoryview:
        # Straight into the wire's buffer, and a large response (a fetch) into the buffer
        # it is handed out in: no copy, and one read takes all that has arrived (for the
        # sync consumer's loop thread, each read is one more wait for the interpreter
        # lock).
        direct = self._wire.receive_buffer()
        self._direct = direct is not None
        if direct is not None:
            return direct
        received = self._received
        if received is None:  # on the first read: a connection never read from needs none
            received = self._received = memoryview(bytearray(RECEIVE_SIZE))
        return received

    def buffer_updated(self, nbytes: int) -> None:
        if self._direct:
            self._deliver(lambda: self._wire.received(nbytes))
            return
        assert self._received is not None
        self.data_received(self._received[:nbytes])  # the wire copies what it keeps

    def data_received(self, data: bytes | bytearray | memoryview) -> None:
        self._deliver(lambda: self._wire.receive_data(data))

    def _deliver(self, receive: Callable[[], list[tuple[int, Response | None]]]) -> None:
        """Hand the responses ``receive()`` completes to their waiters and callbacks."""
        try:
            responses = receive()
        except (DecodeError, ProtocolError) as exc:
            error = KafkaConnectionError(f"malformed response from {self._address}: {exc}")
            error.__cause__ = exc
            self._fail(error)
            return
        waiters = self._waiters
        callbacks = self._callbacks
        for correlation_id, response in responses:
            waiter = waiters.pop(correlation_id, None)
            if waiter is not None:
                if not waiter.done():
                    waiter.set_result(response)
                continue
            callback = callbacks.pop(correlation_id, None)
            if callback is not None:
                callback(response, None)
                if self.failure is not None:  # the callback closed the connection
                    return

    def eof_received(self) -> bool:
        self._fail(KafkaConnectionError(f"connection to {self._address} closed by the broker"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        error = KafkaConnectionError(f"connection to {self._address} closed by the broker")
        if exc is not None:
            error = KafkaConnectionError(f"connection to {self._address} broke: {exc}")
            error.__cause__ = exc  # a TLS alert, say: the connection tells the user about it
        self._fail(error)

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = self._loop.create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)
        waiting, self._on_drained = self._on_drained, []
        for callback in waiting:
            callback()

    # ---- FramePipe

    async def exchange(
        self, frame: bytes | bytearray, correlation_id: int, expect_response: bool
    ) -> Response | None:
        if self.failure is not None:
            raise KafkaConnectionError(f"connection to {self._address} is closed") from self.failure
        transport = self._transport
        assert transport is not None
        if not expect_response:
            transport.write(frame)
            if self._drained is not None:
                # the timeout covers waiting for the socket to drain
                timer = self._loop.call_later(self._request_timeout_s, self._time_out)
                try:
                    await self._wait_drained()
                finally:
                    timer.cancel()
            return None
        waiter: asyncio.Future[Response | None] = self._loop.create_future()
        self._waiters[correlation_id] = waiter
        transport.write(frame)
        # the deadline covers waiting for the socket to drain as well as for the answer
        self._watch(correlation_id)
        try:
            if self._drained is not None:
                await self._wait_drained()
            return await waiter
        except BaseException:
            self._discard(correlation_id, waiter)
            raise

    def submit(self, parts: list[Buffer], correlation_id: int, on_response: OnResponse) -> None:
        """Write the frame ``parts`` make now (:class:`GatherWriter`: over TCP, a batch's
        buffer is written from where it is, not copied into a frame); ``on_response``
        gets its response later, in the event loop.

        ``on_response(response, None)`` when the response arrives, or
        ``on_response(None, error)`` when the connection breaks or the request
        times out (:class:`KafkaConnectionError`, :class:`KafkaTimeoutError`).
        Raises :class:`KafkaConnectionError` at once if the connection is
        closed. Writes beyond the transport's buffer limit are queued by
        asyncio; a caller that must not grow it checks :attr:`writable`.
        """
        if self.failure is not None:
            raise KafkaConnectionError(f"connection to {self._address} is closed") from self.failure
        writer = self._writer
        assert writer is not None
        self._callbacks[correlation_id] = on_response
        if self._corked is not None:
            self._corked += parts
        else:
            writer.write(parts)
        self._watch(correlation_id)

    def cork(self) -> None:
        """Hold the frames :meth:`submit` takes until :meth:`uncork`, to write them at once."""
        if self._corked is None:
            self._corked = []

    def uncork(self) -> None:
        """Write the frames held since :meth:`cork` (one write: one system call)."""
        parts, self._corked = self._corked, None
        if not parts or self.failure is not None or self._writer is None:
            return
        self._writer.write(parts)

    @property
    def can_submit(self) -> bool:
        """Whether :meth:`submit` may be used now: the socket keeps up."""
        return self._drained is None and self.failure is None

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        """Nothing to start: the event loop reads and writes for submitted requests."""

    @property
    def writable(self) -> bool:
        """Whether the socket keeps up: False while more than the high-water mark is queued."""
        return self._drained is None

    @property
    def behind(self) -> bool:
        """Whether the connection is open and more than the high-water mark is queued."""
        return self._drained is not None and self.failure is None

    def when_drained(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once the socket keeps up again (``resume_writing``) or the
        connection closes."""
        self._on_drained.append(callback)

    def _watch(self, correlation_id: int) -> None:
        self._deadlines.append((self._loop.time() + self._request_timeout_s, correlation_id))
        if self._timer is None:
            self._timer = self._loop.call_at(self._deadlines[0][0], self._check_deadlines)

    def _pending(self, correlation_id: int) -> bool:
        return correlation_id in self._waiters or correlation_id in self._callbacks

    def _check_deadlines(self) -> None:
        self._timer = None
        deadlines = self._deadlines
        now = self._loop.time()
        while deadlines:
            deadline, correlation_id = deadlines[0]
            if not self._pending(correlation_id):
                deadlines.popleft()
                continue
            if deadline <= now:
                deadlines.popleft()
                self._expire(correlation_id)
                return
            self._timer = self._loop.call_at(deadline, self._check_deadlines)
            return

    def _expire(self, correlation_id: int) -> None:
        error = self._timeout_error()
        waiter = self._waiters.pop(correlation_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        callback = self._callbacks.pop(correlation_id, None)
        if callback is not None:
            callback(None, error)
        self._fail(error)

    def _discard(self, correlation_id: int, waiter: asyncio.Future[Response | None]) -> None:
        """Give up on a request: its response, should it come, is dropped."""
        if self._waiters.pop(correlation_id, None) is not None:
            self._wire.forget(correlation_id)
        if waiter.done() and not waiter.cancelled():
            waiter.exception()  # retrieved: asyncio would log it as never retrieved
        else:
            waiter.cancel()

    async def _wait_drained(self) -> None:
        drained = self._drained
        if drained is not None:
            await asyncio.shield(drained)  # shared by every writer: one cancelled must not end it
        failure = self.failure
        if isinstance(failure, KafkaTimeoutError):
            raise KafkaTimeoutError(str(failure))
        if failure is not None:
            raise KafkaConnectionError(f"connection to {self._address} is closed") from failure

    def _timeout_error(self) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"no response from {self._address} within {self._request_timeout_s}s"
        )

    def _time_out(self) -> None:
        self._fail(self._timeout_error())

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            logger.log(
                logging.DEBUG if self.quiet else logging.INFO,
                "closing connection to %s: %s",
                self._address,
                error,
            )
            if self._transport is not None:
                self._transport.abort()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                # one exception object per waiter: each is raised in its own task
                waiter.set_exception(self._broken(error))
        callbacks, self._callbacks = self._callbacks, {}
        for callback in callbacks.values():
            callback(None, self._broken(error))
        self.resume_writing()

    def _broken(self, error: BaseException) -> KafkaConnectionError:
        failure = KafkaConnectionError(
            str(error)
            if isinstance(error, KafkaConnectionError)
            else f"connection to {self._address} is closed"
        )
        failure.__cause__ = error
        return failure

    async def close(self, error: BaseException) -> None:
        self._fail(error)
