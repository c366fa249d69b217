"""The record accumulator: records waiting to be sent, grouped in batches per partition.

Theory of operation. ``send`` (any thread) appends a record to the open batch
of its partition, under one lock; the sender (the event loop thread) asks
which partitions are :meth:`ready`, :meth:`drains` their oldest batches,
builds them (compression happens there, outside the lock) and completes or
fails them when the broker answers. Nothing crosses threads per record: the
accumulator calls ``wakeup`` only when the sender has something new to look
at, i.e. a batch was opened (its linger starts), a batch filled up, or a
flush began, and not again until the sender has looked (:meth:`ready` clears
the pending flag).

A partition's batch is ready when it is full (``batch.size``), or older than
``linger.ms``, or a flush or close is in progress, and it is not waiting out a
retry backoff. ``buffer.memory`` bounds the bytes of records accepted but not
yet acknowledged: an append that does not fit blocks up to ``max.block.ms``
(or, with ``block=False``, raises :class:`BufferFull` so an async caller can
wait its own way), then fails with :class:`BufferExhaustedError`. Batches that
stay unsent for ``delivery.timeout.ms`` after their creation are expired by
:meth:`expire`.

Time is passed in (``clock`` returns milliseconds), and blocking waits go
through ``wait(condition, seconds)``, so tests drive it without sleeping.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Container, Iterable, Sequence

from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
)
from kafkette.producer import speedups as producer_speedups
from kafkette.producer.futures import BatchResult, DeliveryCallback, RecordFuture, finish_all
from kafkette.producer.speedups import AccumulatorState, BatchState
from kafkette.protocol.records import NO_COMPRESSION, RecordBatch, speedups
from kafkette.protocol.records.batch_header import TRANSACTIONAL_MASK
from kafkette.protocol.records.default_records import (
    RESERVED_HEADER,
    build_reserved,
    encode_record,
    encode_record_headed,
)

PartitionKey = tuple[str, int]
"""(topic, partition): how the producer keys its queues and sequences (not the public
:class:`~kafkette.structs.TopicPartition`)."""
Waiter = Callable[[threading.Condition, float], object]

RECORD_OVERHEAD = 21
"""Upper bound of a record's framing in a batch (length, attributes, deltas, lengths)."""
BATCH_OVERHEAD = RESERVED_HEADER
"""A batch's header: its buffer keeps these bytes at its front until it is built."""
RESUME_SHARE = 8
"""An append waiting for ``buffer.memory`` is woken once 1/8 of it (at least a batch) is free."""

_encode_plain = speedups.encode_record
"""The C encoder of a record without headers (None without the extension)."""
_build_plain = producer_speedups.build_plain
"""The C :meth:`ProducerBatch.build` of a batch without compression (None without the
extension)."""
_write_header = producer_speedups.write_header
"""The C writer of an uncompressed batch's header (None without the extension): what
:func:`build_reserved` does, without its calls of Python functions per batch."""


def record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """Upper bound of the bytes one record takes in a batch, before compression."""
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers:
        size += 10 + len(hkey) * 3 + (len(hvalue) if hvalue else 0)
    return size


class BufferFull(Exception):
    """``append(block=False)`` found no room in ``buffer.memory``; ``size`` is what it needed."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class ProducerBatch(BatchState, BatchResult):
    """Records for one partition, sent and acknowledged together, and their outcome
    (its :class:`~kafkette.producer.futures.BatchResult` half, which the records'
    futures refer to).

    While open, the batch holds its records encoded in one buffer (``buffer``,
    :data:`BATCH_OVERHEAD` bytes kept for the header, then the records as
    :func:`~kafkette.protocol.records.default_records.encode_record` writes
    them, offset deltas 0, 1, ...) with their count and first and highest
    timestamps; :meth:`build` writes the header and CRC into that buffer once,
    when the batch is drained (or compresses it into a new one), so a sent
    batch is one buffer and no record leaves an object behind. Its fields, and its
    constructor ``ProducerBatch(topic, partition, compression, now_ms, first_timestamp,
    tp=None)``, are its base's (:class:`BatchState`, in C with the extension).
    """

    __slots__ = ()

    @property
    def record_count(self) -> int:
        return self.count

    def add(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> int:
        """Encode and add a record; its offset delta."""
        buffer = self.buffer
        assert buffer is not None
        delta = self.count
        raw = encode_record(timestamp - self.base_timestamp, delta, key, value, headers)
        buffer += raw
        self.count = delta + 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        self.size += len(raw)
        return delta

    def build(self) -> bytearray:
        """The batch's bytes (compressed); built once, on first call."""
        if self.data is None:
            buffer = self.buffer
            assert buffer is not None
            if (
                self.compression == NO_COMPRESSION
                and _write_header is not None
                and _write_header(
                    buffer,
                    self.count,
                    self.base_timestamp,
                    self.max_timestamp,
                    TRANSACTIONAL_MASK if self.transactional else 0,
                    self.producer_id,
                    self.producer_epoch,
                    self.base_sequence,
                )
            ):
                self.data = buffer
                self.buffer = None
                return buffer
            self.data = build_reserved(
                buffer,
                self.count,
                self.base_timestamp,
                self.max_timestamp,
                compression=self.compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                is_transactional=self.transactional,
            )
            self.buffer = None
        return self.data

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} "
            f"seq={self.base_sequence} attempts={self.attempts}>"
        )


class RecordAccumulator(AccumulatorState):
    """Thread-safe queues of batches per partition, with buffer-memory accounting.

    The fields the C append works on are its base's (:class:`AccumulatorState`).
    """

    __slots__ = (
        "_refusal",
        "_resume_room",
        "_space",
        "_wait",
        "_waiting",
        "delivery_timeout_ms",
        "max_block_ms",
        "max_request_size",
        "on_space",
    )

    def __init__(
        self,
        *,
        batch_size: int = 16_384,
        linger_ms: float = 5,
        buffer_memory: int = 33_554_432,
        max_block_ms: float = 60_000,
        compression: int = NO_COMPRESSION,
        delivery_timeout_ms: float = 120_000,
        max_request_size: int = 1_048_576,
        clock: MonotonicClockMs = monotonic_ms,
        wakeup: Callable[[], object] | None = None,
        wait: Waiter | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        self.compression = compression
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_request_size = max_request_size
        self._max_record = min(buffer_memory, max_request_size)
        self.clock = clock
        self.wakeup = wakeup
        self.on_space: Callable[[], object] | None = None
        self.wake_at = None
        """Told, under the lock, the end of a new batch's linger (ms, this clock), instead
        of ``wakeup`` at once: True when it will have the sender look by then (a sync
        producer's :class:`~kafkette.client.linger_alarm.LingerAlarm`), False when the
        sender must be woken now. Not for a batch that is full, or during a flush."""
        self._wait: Waiter = wait or (lambda cond, timeout: cond.wait(timeout))
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._waiting = 0
        """Appends waiting on ``_space`` (a release notifies only when there are some)."""
        self._queues = {}
        self._keys = {}
        self._incomplete = set()
        self._batch_type = ProducerBatch
        self._used = 0
        self._resume_room = min(buffer_memory, max(batch_size, buffer_memory // RESUME_SHARE))
        self._flushes = 0
        self._closed = False
        self._refusal: BaseException | None = None
        self._wake_pending = False

    # ---- the user's side

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        on_delivery: DeliveryCallback | None = None,
        *,
        block: bool = True,
    ) -> RecordFuture:
        """Add a record to its partition's open batch (opening one if needed)."""
        size = record_size(key, value, headers)
        if size + BATCH_OVERHEAD > self._max_record:
            raise MessageTooLargeError(
                f"a record of up to {size + BATCH_OVERHEAD} bytes (in its batch) is larger than "
                f"buffer.memory ({self.buffer_memory}) or max.request.size "
                f"({self.max_request_size})"
            )
        with self._lock:
            if self._closed:
                raise self._refused()
            if self._used + size > self.buffer_memory:
                if not block:
                    raise BufferFull(size)
                self._wait_for_space(size)
            batch, opened = self._open_batch(topic, partition, timestamp, size)
            try:
                delta = batch.add(timestamp, key, value, headers)
            except BaseException:  # e.g. EncodeError: a header value that is not bytes
                self._drop_if_empty(batch)
                raise
            future = RecordFuture(batch, delta, timestamp)
            if on_delivery is not None:
                batch.add_callback(future, on_delivery, True)
            wake = self._reserve(batch, size, opened)
        if wake and self.wakeup is not None:
            self.wakeup()
        return future

    def append_plain(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes | None = None,
        headers_size: int = 0,
    ) -> RecordFuture | None:
        """:meth:`append` of a record without callback, when it fits now.

        The hot path of most sends, kept flat: None when the record is not
        taken (no room in ``buffer.memory``, a record too large, the producer
        closed, a key or value the C encoder leaves to Python), for the caller
        to go through :meth:`append`, which waits or raises the right error.
        A record with headers comes with its headers section encoded (``headers``,
        as the C send encodes it) and the bytes :func:`record_size` counts for them
        (``headers_size``).
        """
        encode = _encode_plain
        if encode is None:
            return None
        size = RECORD_OVERHEAD + headers_size
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        with self._lock:
            if self._closed or self._used + size > self.buffer_memory:
                return None
            queue = self._queues.get((topic, partition))
            batch = queue[-1] if queue else None
            opened = False
            if batch is None or batch.full or batch.size + size > self.batch_size:
                if size + BATCH_OVERHEAD > self._max_record:
                    return None
                batch, opened = self._open_batch(topic, partition, timestamp, size)
            buffer = batch.buffer
            assert buffer is not None
            delta = batch.count
            if headers is None:
                raw = encode(timestamp - batch.base_timestamp, delta, key, value)
            else:
                raw = encode_record_headed(
                    timestamp - batch.base_timestamp, delta, key, value, headers
                )
            if raw is None:  # not bytes, or a timestamp delta past 64 bits
                self._drop_if_empty(batch)
                return None
            buffer += raw
            batch.count = delta + 1
            if timestamp > batch.max_timestamp:
                batch.max_timestamp = timestamp
            batch.size += len(raw)
            wake = self._reserve(batch, size, opened)
        if wake and self.wakeup is not None:
            self.wakeup()
        return RecordFuture(batch, delta, timestamp)

    def _open_batch(
        self, topic: str, partition: int, timestamp: int, size: int
    ) -> tuple[ProducerBatch, bool]:
        """The partition's open batch with room for ``size`` more bytes (a new one if
        needed), and whether the sender must look (a batch was opened); under the lock."""
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = queue[-1] if queue else None
        if (
            batch is not None
            and not batch.full
            and (batch.size + size <= self.batch_size or batch.size == BATCH_OVERHEAD)
        ):
            return batch, False
        if batch is not None:
            batch.full = True
        tp = self._keys.setdefault(tp, tp)
        batch = ProducerBatch(topic, partition, self.compression, self.clock(), timestamp, tp)
        queue.append(batch)
        self._incomplete.add(batch)
        return batch, True

    def _drop_if_empty(self, batch: ProducerBatch) -> None:
        """Take back a batch just opened for a record that could not be added; under the lock."""
        if batch.count:
            return
        queue = self._queues[batch.tp]
        if queue and queue[-1] is batch:
            queue.pop()
            self._incomplete.discard(batch)

    def _reserve(self, batch: ProducerBatch, size: int, wake: bool) -> bool:
        """Account a record of ``size`` added to ``batch``; whether to wake the sender."""
        batch.reserved += size
        self._used += size
        if batch.size >= self.batch_size:
            batch.full = True
            wake = True
        elif (
            wake
            and not self._wake_pending
            and self.wake_at is not None
            and self.linger_ms > 0
            and self._flushes == 0
            and not self._closed
            and len(self._queues[batch.tp]) == 1  # else the one before it is full
            and self.wake_at(batch.created_ms + self.linger_ms)
        ):
            return False  # a new batch needs no look before its linger ends
        if wake:
            wake = not self._wake_pending
            self._wake_pending = True
        return wake

    def _wait_for_space(self, size: int) -> None:
        deadline = self.clock() + self.max_block_ms
        while self._used + size > self.buffer_memory and self._used > 0:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise BufferExhaustedError(
                    f"{self._used} of buffer.memory={self.buffer_memory} bytes stayed in use "
                    f"for max.block.ms={self.max_block_ms:g}; {size} more were needed"
                )
            self._waiting += 1
            try:
                if self._waiting == 1 and self.wakeup is not None:
                    # the lingering batches are ready now (hurried): sent, they free room;
                    # told outside the lock, as after any append
                    self._lock.release()
                    try:
                        self.wakeup()
                    finally:
                        self._lock.acquire()
                self._wait(self._space, remaining / 1000)
            finally:
                self._waiting -= 1
            if self._closed:
                raise self._refused()

    def _refused(self) -> BaseException:
        """The error of an append to a closed accumulator."""
        if self._refusal is not None:
            return self._refusal
        return IllegalStateError("the producer is closed")

    def has_space(self, size: int) -> bool:
        with self._lock:
            return self._used + size <= self.buffer_memory or self._used == 0

    # ---- the sender's side

    def ready(
        self, now_ms: float, muted: Container[PartitionKey] = ()
    ) -> tuple[list[PartitionKey], float | None]:
        """Partitions whose first batch can be sent now, and ms until the next may be."""
        pressing, lingered, next_ms = self.ready_by_cause(now_ms, muted)
        return pressing + lingered, next_ms

    def ready_by_cause(
        self, now_ms: float, muted: Container[PartitionKey] = ()
    ) -> tuple[list[PartitionKey], list[PartitionKey], float | None]:
        """:meth:`ready`'s partitions in two lists: those whose first batch is sendable
        whatever the linger (full, a retry, a batch behind it, a flush or close), and
        those whose batch is sendable only because its linger ended, which a sender may
        hold while the broker is behind; then ms until the next may be sent."""
        pressing: list[PartitionKey] = []
        lingered: list[PartitionKey] = []
        next_ms: float | None = None
        with self._lock:
            self._wake_pending = False
            hurry = self.hurried
            linger_ms = self.linger_ms
            # _head_wait_ms's rule, inlined: this loop runs over every partition at every
            # pass, and the call would double its cost (100 -> 185 us at 1,000 partitions)
            for tp, queue in self._queues.items():
                if not queue or tp in muted:
                    continue
                batch = queue[0]
                if batch.retry_at_ms > now_ms:
                    wait = batch.retry_at_ms - now_ms
                elif hurry or batch.full or len(queue) > 1 or batch.attempts > 0:
                    pressing.append(tp)
                    continue
                else:
                    wait = batch.created_ms + linger_ms - now_ms
                    if wait <= 0:
                        lingered.append(tp)
                        continue
                if next_ms is None or wait < next_ms:
                    next_ms = wait
        return pressing, lingered, next_ms

    def next_ready_ms(self, partitions: Iterable[PartitionKey], now_ms: float) -> float | None:
        """ms until the first batch of one of ``partitions`` can be sent (0: now), as
        :meth:`ready` counts; None when none has a batch. For the heads a drain left:
        the batches behind those it took."""
        next_ms: float | None = None
        with self._lock:
            hurry = self.hurried
            for tp in partitions:
                queue = self._queues.get(tp)
                if not queue:
                    continue
                wait = _head_wait_ms(queue, hurry, self.linger_ms, now_ms)
                if wait == 0.0:
                    return 0.0
                if next_ms is None or wait < next_ms:
                    next_ms = wait
        return next_ms

    def drain(
        self,
        partitions: Iterable[PartitionKey],
        max_size: int,
        now_ms: float | None = None,
        prepare: Callable[[ProducerBatch], object] | None = None,
        *,
        pressing_only: bool = False,
    ) -> list[ProducerBatch]:
        """Take the first batch of each partition, while their sizes fit in ``max_size``.

        The first batch is always taken, whatever its size. With ``now_ms``,
        only batches that are ready at that time are taken, and with ``pressing_only``
        only those ready whatever their linger (see :meth:`ready_by_cause`). Batches are built
        (and compressed) after leaving the lock, each after ``prepare(batch)``
        (which gives it its producer id and sequence, so the batch is written once).
        """
        taken: list[ProducerBatch] = []
        total = 0
        with self._lock:
            hurry = self.hurried
            linger_ms = math.inf if pressing_only else self.linger_ms
            for tp in partitions:
                queue = self._queues.get(tp)
                if not queue:
                    continue
                if now_ms is not None and _head_wait_ms(queue, hurry, linger_ms, now_ms):
                    continue
                batch = queue[0]
                size = len(batch.data) if batch.data is not None else batch.size
                if taken and total + size > max_size:
                    continue
                queue.popleft()
                batch.full = True
                taken.append(batch)
                total += size
        build_plain = _build_plain
        for batch in taken:
            if prepare is not None:
                prepare(batch)
            if build_plain is None or not build_plain(batch):
                batch.build()
        return taken

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: float) -> None:
        """Put a batch back for a retry, ahead of newer ones and in sequence order."""
        batch.retry_at_ms = retry_at_ms
        with self._lock:
            queue = self._queues.setdefault(batch.tp, deque())
            queue.insert(_retry_position(queue, batch.base_sequence), batch)

    def split(self, batch: ProducerBatch) -> list[ProducerBatch]:
        """Cut a batch the broker found too large in two, back in its queue where a retry
        of it would go (ahead of newer batches, behind retries of older ones).

        The records' futures then follow the part they landed in. The halves
        keep the batch's creation time (for ``delivery.timeout.ms``) and, for
        ordering among retries only, its base sequence: they get fresh
        sequences when drained.
        """
        records = list(RecordBatch.from_buffer(bytes(batch.build())))
        half = len(records) // 2
        parts: list[ProducerBatch] = []
        for chunk in (records[:half], records[half:]):
            part = ProducerBatch(
                batch.topic,
                batch.partition,
                self.compression,
                batch.created_ms,
                chunk[0].timestamp,
                batch.tp,
            )
            for record in chunk:
                part.add(record.timestamp, record.key, record.value, record.headers)
            part.full = True
            part.attempts = batch.attempts
            part.base_sequence = batch.base_sequence
            part.last_error = batch.last_error
            parts.append(part)
        parts[0].reserved = batch.reserved // 2
        parts[1].reserved = batch.reserved - parts[0].reserved
        batch.split([(0, parts[0]), (half, parts[1])])
        batch.data = batch.buffer = None  # the parts have the records
        with self._lock:
            self._incomplete.discard(batch)
            self._incomplete.update(parts)
            queue = self._queues.setdefault(batch.tp, deque())
            position = _retry_position(queue, batch.base_sequence)
            queue.insert(position, parts[0])
            queue.insert(position + 1, parts[1])
        return parts

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int = -1) -> None:
        """The broker stored the batch (nothing happens if it was failed already)."""
        self.complete_all(((batch, base_offset, log_append_time),))

    def complete_all(self, stored: Sequence[tuple[ProducerBatch, int, int]]) -> None:
        """:meth:`complete` of each (batch, base offset, log append time), the lock taken
        once for all (an answer stores a batch per partition, up to thousands)."""
        settled: list[ProducerBatch] = []
        with self._lock:
            incomplete = self._incomplete
            freed = 0
            for batch, base_offset, log_append_time in stored:
                if batch not in incomplete:
                    continue  # failed already
                incomplete.discard(batch)
                freed += batch.reserved
                batch.data = batch.buffer = None  # futures held on to keep only the outcome
                batch.base_offset = base_offset
                batch.log_append_time = log_append_time
                settled.append(batch)
            self._used -= freed
            room = self._room_freed()
        if settled and room and self.on_space is not None:
            self.on_space()
        finish_all(settled)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        """The batch will not be stored (nothing happens if it was settled already)."""
        if self._release(batch):
            batch.data = batch.buffer = None
            batch.fail(error)

    def _release(self, batch: ProducerBatch) -> bool:
        """Give back the batch's share of ``buffer.memory``; False if it was settled already."""
        with self._lock:
            if batch not in self._incomplete:
                return False
            self._incomplete.discard(batch)
            self._used -= batch.reserved
            room = self._room_freed()
        if room and self.on_space is not None:
            self.on_space()
        return True

    def _room_freed(self) -> bool:
        """Under the lock, once ``_used`` fell: whether a good share of the buffer is free,
        the waiting appends woken if so. Waiters wake then, not for every batch
        acknowledged: a producer that outruns the broker then appends many batches per
        wake-up instead of one (and a waiter that needs more wakes again at each release
        after this one)."""
        room = self.buffer_memory - self._used >= self._resume_room
        if room and self._waiting:
            self._space.notify_all()
        return room

    def expire(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and fail the queued batches older than ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        limit = now_ms - self.delivery_timeout_ms
        with self._lock:
            for queue in self._queues.values():
                while queue and queue[0].created_ms <= limit:
                    expired.append(queue.popleft())
        for batch in expired:
            last = f"; last error: {batch.last_error}" if batch.last_error is not None else ""
            self.fail(
                batch,
                KafkaTimeoutError(
                    f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} expired: "
                    f"not delivered within delivery.timeout.ms={self.delivery_timeout_ms:g}{last}"
                ),
            )
        return expired

    def next_expiry_ms(self, now_ms: float) -> float | None:
        """Ms until the oldest queued batch expires (None when nothing is queued)."""
        with self._lock:
            oldest = min((q[0].created_ms for q in self._queues.values() if q), default=None)
        if oldest is None:
            return None
        return max(0.0, oldest + self.delivery_timeout_ms - now_ms)

    # ---- flush and close

    def begin_flush(self) -> list[BatchResult]:
        """Make every batch ready at once; returns the results to wait for."""
        with self._lock:
            self._flushes += 1
            results: list[BatchResult] = list(self._incomplete)
            wake = not self._wake_pending
            self._wake_pending = True
        if wake and self.wakeup is not None:
            self.wakeup()
        return results

    @property
    def hurried(self) -> bool:
        """Whether every batch is ready at once, whatever its linger: a flush or a close
        is in progress, or the buffer is :attr:`exhausted` (Java's rule too)."""
        return self._flushes > 0 or self._closed or self.exhausted

    @property
    def exhausted(self) -> bool:
        """Whether sends wait for room in ``buffer.memory``: nothing more joins the
        batches until answers free some, so lingering would only keep them waiting."""
        return self._waiting > 0 or self.on_space is not None

    def rearm_wakeup(self) -> None:
        """Have the next batch opened or filled call ``wakeup`` again, as after :meth:`ready`
        (for a sender that was told and chose to look later).

        Without the lock: one store, whole under the interpreter lock, and an append in
        another thread reading the flag before or after it is right either way (it wakes
        the sender, or the sender was told already)."""
        self._wake_pending = False

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def close(self, error: BaseException | None = None) -> None:
        """Refuse new records; queued ones become ready at once.

        An append then raises ``error`` (the first given), else IllegalStateError.
        """
        with self._lock:
            self._closed = True
            if self._refusal is None:
                self._refusal = error
            self._space.notify_all()
        if self.wakeup is not None:
            self.wakeup()

    def abort(self, error: BaseException) -> list[ProducerBatch]:
        """Fail every batch still queued (not those in flight)."""
        with self._lock:
            queued = [b for q in self._queues.values() for b in q]
            for queue in self._queues.values():
                queue.clear()
        for batch in queued:
            self.fail(batch, error)
        return queued

    def fail_all(self, error: BaseException) -> list[ProducerBatch]:
        """Fail every batch not yet settled with ``error``: queued, in flight, or taken
        by :meth:`drain` and not sent (its build raised). For a producer that can
        send nothing more; a record appended later is failed by a later call."""
        with self._lock:
            for queue in self._queues.values():
                queue.clear()
            unsettled = list(self._incomplete)
        for batch in unsettled:
            self.fail(batch, error)
        return unsettled

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def buffer_used(self) -> int:
        """Bytes of records accepted and not yet acknowledged or failed."""
        return self._used

    @property
    def incomplete(self) -> int:
        """Batches not yet acknowledged or failed (queued or in flight)."""
        return len(self._incomplete)

    def queued(self) -> int:
        """Batches waiting in the queues (not in flight)."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())


if producer_speedups.bind is not None and _encode_plain is not None:
    producer_speedups.bind(RecordFuture)
append_open = producer_speedups.append_open
"""The C :meth:`RecordAccumulator.append_plain` for a partition's open batch with room
(None without the extension): the record's future, or None when that method must take it."""


def _head_wait_ms(
    queue: deque[ProducerBatch], hurry: bool, linger_ms: float, now_ms: float
) -> float:
    """ms until a partition's first batch may be sent (0.0: now): once its retry backoff
    has passed, at once when a flush or close hurries every batch, when it is full, has
    a batch behind it or is a retry, else when its linger ends: the rule of
    ``next_ready_ms`` and ``drain``, and of :meth:`RecordAccumulator.ready`, which has it
    inlined (a test holds the two to the same answers)."""
    batch = queue[0]
    if batch.retry_at_ms > now_ms:
        return batch.retry_at_ms - now_ms
    if hurry or batch.full or len(queue) > 1 or batch.attempts > 0:
        return 0.0
    return max(batch.created_ms + linger_ms - now_ms, 0.0)


def _retry_position(queue: deque[ProducerBatch], base_sequence: int) -> int:
    """Where a batch put back for a retry goes: after the queued batches that were sent
    before it (lower sequences, themselves put back), ahead of everything newer. Without
    a sequence (no idempotence) that is the head."""
    position = 0
    if base_sequence >= 0:
        for queued in queue:
            if queued.base_sequence < 0 or queued.base_sequence > base_sequence:
                break
            position += 1
    return position
