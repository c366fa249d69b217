"""Delivery results: one shared result per batch, one light future per record.

As in the Java client, the broker answers per batch, so the state lives in a
:class:`BatchResult` (base offset, append time or error) and each record's
:class:`RecordFuture` only knows its batch and its index in it; its
:class:`RecordMetadata` is computed when asked for. That keeps ``send`` cheap:
a record costs one small object, not an event or a lock.

A :class:`RecordFuture` serves both APIs: ``await future`` in the event loop
(asyncio or trio) and ``future.result(timeout)`` from any thread, like a
``concurrent.futures.Future``. Results are always set in the producer's event
loop thread; callbacks run there too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kafkette.producer.speedups import FutureState

logger = logging.getLogger("kafkette.producer")

DeliveryCallback = Callable[[BaseException | None, "RecordMetadata | None"], object]
"""``on_delivery(error, metadata)``: exactly one of the two is None."""

_CALLBACK_LOCK = threading.Lock()


@attrs.frozen(slots=True)
class RecordMetadata:
    """Where a record was stored.

    ``offset`` is -1 when the broker did not say (``acks=0``). ``timestamp``
    is the record's timestamp, or the broker's append time for a topic with
    ``message.timestamp.type=LogAppendTime``.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


class BatchResult:
    """The outcome of one batch, shared by the futures of its records: the outcome half
    of a :class:`~kafkette.producer.accumulator.ProducerBatch`, its base.

    A batch is its own result, rather than holding one, so that a batch in flight is
    one object for the garbage collector to count and walk instead of two (a producer
    sending keyed records to many partitions has tens of thousands in flight). The
    fields are the batch's slots (set by its constructor); the batch drops its bytes
    once settled (:meth:`RecordAccumulator.complete
    <kafkette.producer.accumulator.RecordAccumulator.complete>`), so futures kept by
    the application keep no more than the outcome alive.
    """

    if not TYPE_CHECKING:  # mypy would check the methods' fields against these slots
        __slots__ = ()

    topic: str
    partition: int
    base_offset: int
    """Where the batch was stored (-1 while unknown)."""
    log_append_time: int
    """The broker's append time (-1 unless the topic uses LogAppendTime)."""
    error: BaseException | None
    """Why the batch failed (None unless it did)."""
    done: bool
    """Whether the batch was acknowledged or failed."""
    _event: threading.Event | None
    """Made by the first thread that waits."""
    _async_event: anyio.Event | None
    _callbacks: list[tuple[RecordFuture, Callable[..., object], bool]] | None
    """Made by the first callback: most batches have none, and a list per batch would be
    one more object for the garbage collector to count and walk while it waits."""
    _parts: list[tuple[int, BatchResult]] | None
    """A batch the broker found too large is cut in parts: (first index, result)."""
    _pending_parts: int
    _parent: BatchResult | None

    def split(self, parts: list[tuple[int, BatchResult]]) -> None:
        """This batch will be delivered as ``parts`` (first record index, result), in order.

        It is done when every part is; each record reports its own part's outcome.
        """
        self._parts = parts
        self._pending_parts = len(parts)
        for _, part in parts:
            part._parent = self

    def locate(self, index: int) -> tuple[BatchResult, int]:
        """The result holding record ``index`` of this batch, and its index there."""
        batch = self
        while batch._parts is not None:
            for start, part in reversed(batch._parts):
                if start <= index:
                    batch, index = part, index - start
                    break
        return batch, index

    def add_callback(self, future: RecordFuture, fn: Callable[..., object], delivery: bool) -> None:
        """Register ``fn`` (``on_delivery(err, md)`` if ``delivery`` else ``fn(future)``)."""
        with _CALLBACK_LOCK:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = [(future, fn, delivery)]
                else:
                    self._callbacks.append((future, fn, delivery))
                return
        _invoke(future, fn, delivery)

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """The batch was stored at ``base_offset`` (-1 when unknown)."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish()

    def fail(self, error: BaseException) -> None:
        """The batch will not be stored: every record fails with ``error``."""
        self.error = error
        self._finish()

    def _finish(self) -> None:
        with _CALLBACK_LOCK:
            self.done = True
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        self._finished(callbacks, event)

    def _finished(
        self,
        callbacks: list[tuple[RecordFuture, Callable[..., object], bool]] | None,
        event: threading.Event | None,
    ) -> None:
        """What follows ``done`` (set under the lock, ``callbacks`` and ``event`` taken
        there): the waiters woken, the callbacks run, the parent told."""
        if event is not None:
            event.set()
        if self._async_event is not None:
            self._async_event.set()
        for future, fn, delivery in callbacks or ():
            _invoke(future, fn, delivery)
        parent = self._parent
        if parent is not None:
            parent._pending_parts -= 1
            if parent._pending_parts == 0:
                parent._finish()

    def wait(self, timeout: float | None) -> bool:
        """Block this thread until done; False on timeout."""
        with _CALLBACK_LOCK:
            if self.done:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    async def wait_async(self) -> None:
        """Wait in the event loop (the one that completes the batch)."""
        if self.done:
            return
        if self._async_event is None:
            self._async_event = anyio.Event()
        await self._async_event.wait()


def finish_all(results: Iterable[BatchResult]) -> None:
    """:meth:`BatchResult.complete` of many results whose ``base_offset`` and
    ``log_append_time`` are set: the lock taken once for all (a Produce answer settles
    a batch per partition, up to thousands), and only those with a waiter, a callback or
    a parent looked at again."""
    more: list[tuple[BatchResult, Any, threading.Event | None]] = []
    with _CALLBACK_LOCK:
        for result in results:
            result.done = True
            if (
                result._callbacks is not None
                or result._event is not None
                or result._async_event is not None
                or result._parent is not None
            ):
                more.append((result, result._callbacks, result._event))
                result._callbacks = None
    for result, callbacks, event in more:
        result._finished(callbacks, event)


def _invoke(future: RecordFuture, fn: Callable[..., object], delivery: bool) -> None:
    try:
        if delivery:
            error = future._error()
            fn(error, None if error is not None else future._metadata())
        else:
            fn(future)
    except Exception:
        logger.exception("producer delivery callback %r raised", fn)


class RecordFuture(FutureState):
    """The delivery of one record: awaitable, and ``concurrent.futures.Future``-like.

    ``RecordFuture(batch, index, timestamp)``; the three fields are its base's
    (:class:`~kafkette.producer.append_state.FutureState`, in C when the producer's
    extension is used).
    """

    __slots__ = ()

    def _metadata(self) -> RecordMetadata:
        batch, index = self._batch, self._index
        if batch._parts is not None:
            batch, index = batch.locate(index)
        offset = batch.base_offset + index if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, timestamp)

    def _error(self) -> BaseException | None:
        batch = self._batch
        if batch._parts is not None:
            batch = batch.locate(self._index)[0]
        return batch.error

    def done(self) -> bool:
        """Whether the record was acknowledged or failed."""
        return self._batch.done

    def cancelled(self) -> bool:
        """Always False: a record handed to the producer cannot be taken back."""
        return False

    def cancel(self) -> bool:
        """Always False (see :meth:`cancelled`)."""
        return False

    def running(self) -> bool:
        return not self._batch.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the record's metadata; raise its delivery error, or TimeoutError."""
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise TimeoutError(f"record not delivered within {timeout}s")
        error = self._error()
        if error is not None:
            raise error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the outcome; the delivery error or None."""
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise TimeoutError(f"record not delivered within {timeout}s")
        return self._error()

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Call ``fn(future)`` when done (at once if already done); in the loop thread."""
        self._batch.add_callback(self, fn, False)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if not batch.done:
            yield from batch.wait_async().__await__()
        error = self._error()
        if error is not None:
            raise error
        return self._metadata()

    def __repr__(self) -> str:
        state = "pending" if not self._batch.done else ("failed" if self._error() else "done")
        return f"<RecordFuture {self._batch.topic}-{self._batch.partition} #{self._index} {state}>"
