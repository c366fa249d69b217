"""The state the producer's append works on, in Python.

:class:`FutureState` (the base of ``RecordFuture``), :class:`BatchState` (the
base of ``ProducerBatch``) and :class:`AccumulatorState` (the base of
``RecordAccumulator``) hold the fields that the C append
(:mod:`kafkette.producer._accumulate`) reads and writes; :class:`RouteState`
(held by ``ProducerCore``) is what the common send needs of its producer, and
its :meth:`RouteState.send` is that send. When the extension is
used, its types of the same names, which keep these fields in C, are the bases
instead (:mod:`kafkette.producer.speedups` chooses); these classes are the
fallback and say what each field is. Both forms must behave the same:
``tests/producer/test_append_open.py`` and ``tests/producer/test_append_state.py``
drive them side by side.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkette.protocol.records.default_records import RESERVED_HEADER

if TYPE_CHECKING:
    import anyio

    from kafkette.client.metadata import ClusterMetadata, MetadataCache
    from kafkette.producer.accumulator import ProducerBatch, RecordAccumulator
    from kafkette.producer.futures import BatchResult, RecordFuture
    from kafkette.producer.partitioner import StickyPartitioner

_now = time.time
_MAX_TIMESTAMP = (1 << 63) - 1


class FutureState:
    """What a record's future knows: its batch (as its result), its place in it, its
    timestamp."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: BatchResult, index: int, timestamp: int) -> None:
        self._batch = batch
        """The record's batch, as its BatchResult."""
        self._index = index
        """The record's offset delta in its batch."""
        self._timestamp = timestamp
        """The record's timestamp."""


class BatchState:
    """A batch's records, counters and outcome: what the C append works on, what the
    sender reads and writes, and the result's fields (the C type starts a batch untracked
    by the garbage collector and tracks it once one of the fields through which it can be
    in a reference cycle, ``error`` to ``_parent``, is set to anything but None; the
    others hold atomic values only)."""

    __slots__ = (
        "_async_event",
        "_callbacks",
        "_event",
        "_parent",
        "_parts",
        "_pending_parts",
        "attempts",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "buffer",
        "compression",
        "count",
        "created_ms",
        "data",
        "done",
        "error",
        "full",
        "last_error",
        "log_append_time",
        "max_timestamp",
        "partition",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at_ms",
        "size",
        "topic",
        "tp",
        "transactional",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        compression: int,
        now_ms: float,
        first_timestamp: int,
        tp: tuple[str, int] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.tp = (topic, partition) if tp is None else tp
        self.compression = compression
        self.buffer = bytearray(RESERVED_HEADER)
        self.count = 0
        self.base_timestamp = first_timestamp
        self.max_timestamp = first_timestamp
        self.created_ms = float(now_ms)
        self.reserved = 0
        self.size = RESERVED_HEADER
        self.full = False
        self.data = None
        self.attempts = 0
        self.last_error = None
        self.retry_at_ms = 0.0
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.transactional = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error = None
        self.done = False
        self._event = None
        self._async_event = None
        self._callbacks = None
        self._parts = None
        self._pending_parts = 0
        self._parent = None

    topic: str
    """The batch's topic."""
    partition: int
    """The batch's partition."""
    tp: tuple[str, int]
    """(topic, partition), made once per partition (or given, by the append that looked the
    queue up with it): the sender's per-request bookkeeping reads it."""
    compression: int
    """Its compression codec's id."""
    buffer: bytearray | None
    """The batch's bytes: ``BATCH_OVERHEAD`` bytes reserved for the header, then the
    encoded records (offset deltas 0, 1, ...); None once built."""
    count: int
    """Records in the batch."""
    base_timestamp: int
    """The first record's timestamp (the records' deltas are from it)."""
    max_timestamp: int
    """The highest timestamp of the records."""
    created_ms: float
    """When the batch was opened (ms, the accumulator's clock)."""
    size: int
    """Bytes of the batch if built now, before compression."""
    reserved: int
    """Bytes of ``buffer.memory`` the batch's records hold."""
    full: bool
    """Whether no record may be added."""
    data: bytearray | None
    """The built batch (compressed), or None until built and once settled."""
    attempts: int
    """Retries made."""
    retry_at_ms: float
    """When its retry's backoff ends (ms), 0 before a retry."""
    base_sequence: int
    """Its first sequence number, or -1."""
    producer_id: int
    """The producer id it was sent with, or -1."""
    producer_epoch: int
    """That id's epoch, or -1."""
    transactional: bool
    """Whether it is sent in a transaction."""
    base_offset: int
    """Where it was stored (-1: unknown)."""
    log_append_time: int
    """The broker's append time, or -1."""
    done: bool
    """Whether it was acknowledged or failed."""
    error: BaseException | None
    """Why the batch failed (None unless it did)."""
    last_error: BaseException | None
    """The error of the batch's last attempt, or None."""
    _event: threading.Event | None
    """The event of threads waiting for the outcome, or None."""
    _async_event: anyio.Event | None
    """The event of tasks waiting for the outcome, or None."""
    _callbacks: list[tuple[RecordFuture, Callable[..., object], bool]] | None
    """The records' callbacks not yet run, or None."""
    _parts: list[tuple[int, BatchResult]] | None
    """(first record index, part) of a batch cut in parts, or None."""
    _pending_parts: int
    """Its parts not yet settled."""
    _parent: BatchResult | None
    """The batch this one is a part of, or None."""


class AccumulatorState:
    """The queues of batches and the accounting of ``buffer.memory``, under one lock."""

    __slots__ = (
        "_batch_type",
        "_closed",
        "_flushes",
        "_incomplete",
        "_keys",
        "_lock",
        "_max_record",
        "_queues",
        "_used",
        "_wake_pending",
        "batch_size",
        "buffer_memory",
        "clock",
        "compression",
        "linger_ms",
        "wake_at",
        "wakeup",
    )

    _lock: threading.Lock
    """The lock of the queues and the accounting."""
    _queues: dict[tuple[str, int], deque[ProducerBatch]]
    """(topic, partition) -> its batches, oldest first. A partition's deque, once made,
    is never replaced or removed (the C append remembers the last one it used)."""
    wakeup: Callable[[], object] | None
    """Called (outside the lock) when the sender has something new to look at."""
    _used: int
    """Bytes of records accepted and not yet acknowledged or failed."""
    buffer_memory: int
    """``buffer.memory``: the bound of ``_used``."""
    batch_size: int
    """``batch.size``: a batch this large is full."""
    _closed: bool
    """Whether records are refused."""
    _wake_pending: bool
    """Whether the sender was woken and has not looked yet."""
    clock: Callable[[], float]
    """Now, in ms (the batches' creation times, their lingers)."""
    _keys: dict[tuple[str, int], tuple[str, int]]
    """Each partition's key, made once: the batches opened for it share it (a tuple per
    batch would be one more object for the garbage collector to count while in flight)."""
    _incomplete: set[ProducerBatch]
    """The batches not yet acknowledged or failed (queued, drained or in flight)."""
    wake_at: Callable[[float], bool] | None
    """See ``RecordAccumulator.wake_at``."""
    _batch_type: type[ProducerBatch]
    """The class of the batches opened (``ProducerBatch``; the C append opens them too)."""
    compression: int
    """The batches' compression codec id."""
    linger_ms: float
    """``linger.ms``."""
    _flushes: int
    """Flushes in progress (every batch is ready while there is one)."""
    _max_record: int
    """The largest record, in its batch: min(``buffer.memory``, ``max.request.size``)."""


class RouteState:
    """What the common send of a producer needs of it (held by ``ProducerCore`` as
    ``routes``): the metadata cache, the snapshot the cached partition counts were
    read from and those counts, the partitioners, the accumulator, and whether the
    producer sends plainly and ignores keys."""

    __slots__ = (
        "accumulator",
        "counts",
        "ignore_keys",
        "keyed_partition",
        "metadata",
        "plain",
        "prepared",
        "snapshot",
        "sticky",
        "transaction",
    )

    def __init__(
        self,
        metadata: MetadataCache,
        accumulator: RecordAccumulator,
        sticky: StickyPartitioner,
        keyed_partition: Callable[[bytes, int], int],
        plain: bool,
        ignore_keys: bool,
    ) -> None:
        self.metadata = metadata
        """The client's metadata cache (its snapshot says whether ``counts`` is current)."""
        self.accumulator = accumulator
        """The producer's RecordAccumulator."""
        self.sticky = sticky
        """The sticky partitioner of records without a key (or with keys ignored)."""
        self.keyed_partition = keyed_partition
        """``keyed_partition(key, count)``: the partition of a keyed record."""
        self.plain = plain
        """Whether :meth:`send` may take records (no transactions, serializers or user
        partitioner)."""
        self.ignore_keys = ignore_keys
        """``partitioner.ignore.keys``: keyed records go to the sticky partition too."""
        self.snapshot: ClusterMetadata | None = None
        """The metadata snapshot ``counts`` was read from, or None."""
        self.counts: dict[str, int] = {}
        """topic -> partition count, read from ``snapshot``."""
        self.prepared = False
        """Whether :meth:`send_prepared` may take records (no user partitioner or
        telemetry): those of a producer with serializers or transactions, which its
        caller serialized and whose transaction it checked."""
        self.transaction: set[tuple[str, int]] | None = None
        """The partitions noted for the open transaction of a transactional producer
        (its ``TransactionManager.noted``), the only ones :meth:`send_prepared` appends
        to; None without transactions."""

    def send(
        self,
        topic: str,
        value: Any,
        key: Any,
        timestamp: int | None,
        partition: Any = None,
        on_delivery: Any = None,
        headers: Any = None,
    ) -> RecordFuture | None:
        """Queue a record: the common send, to ``partition`` or, when None, to the one
        the producer's partitioning chooses.

        Returns None (nothing changed) when the general path must take it (a
        producer with serializers, a partitioner or transactions; a key or value
        that is not bytes; a timestamp outside 0..2**63-1; a topic whose
        partition count is not cached for the current snapshot; a partition that
        is not an int the topic has; headers the C form does not encode (a list or
        tuple of (str, bytes | str | None) pairs, or a dict of them) and, here, any
        headers; here, a delivery callback, which only the C form registers): that
        path then does the same, or waits, or raises the right error.
        """
        if not self.plain:
            return None
        return self._send(topic, value, key, timestamp, partition, on_delivery, headers)

    def send_prepared(
        self,
        topic: str,
        value: Any,
        key: Any,
        timestamp: int | None,
        partition: Any,
        on_delivery: Any,
        headers: Any,
    ) -> RecordFuture | None:
        """:meth:`send` for a producer with serializers or transactions (``prepared``):
        its caller serialized the record and checked the transaction. A transactional
        record is taken only for a partition in ``transaction``."""
        if not self.prepared:
            return None
        return self._send(topic, value, key, timestamp, partition, on_delivery, headers, True)

    def _send(
        self,
        topic: str,
        value: Any,
        key: Any,
        timestamp: int | None,
        partition: Any,
        on_delivery: Any,
        headers: Any,
        prepared: bool = False,
    ) -> RecordFuture | None:
        if on_delivery is not None or headers:
            return None
        if (value is not None and type(value) is not bytes) or (
            key is not None and type(key) is not bytes
        ):
            return None
        if timestamp is None:
            timestamp = int(_now() * 1000)
        elif type(timestamp) is not int or not 0 <= timestamp <= _MAX_TIMESTAMP:
            return None
        if self.metadata.snapshot is not self.snapshot:
            return None  # the core's route() refreshes the cached partition counts
        count = self.counts.get(topic)
        if count is None:
            return None
        if partition is not None:
            if type(partition) is not int or not 0 <= partition < count:
                return None
        elif count == 1:
            partition = 0
        elif key is not None and not self.ignore_keys:
            partition = self.keyed_partition(key, count)
        else:
            size = 21 + (len(value) if value is not None else 0)
            partition = self.sticky.partition(topic, count, size)
        if prepared and self.transaction is not None and (topic, partition) not in self.transaction:
            return None
        return self.accumulator.append_plain(topic, partition, timestamp, key, value)
