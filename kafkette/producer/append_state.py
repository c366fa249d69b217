"""The state the producer's append works on, in Python.

:class:`FutureState` (the base of ``RecordFuture``), :class:`BatchState` (the
base of ``ProducerBatch``) and :class:`AccumulatorState` (the base of
``RecordAccumulator``) hold the fields that the C append
(:mod:`kafkette.producer._accumulate`) reads and writes. When the extension is
used, its types of the same names, which keep these fields in C, are the bases
instead (:mod:`kafkette.producer.speedups` chooses); these classes are the
fallback and say what each field is. Both forms must behave the same:
``tests/producer/test_append_open.py`` drives them side by side.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkette.producer.accumulator import ProducerBatch
    from kafkette.producer.futures import BatchResult


class FutureState:
    """What a record's future knows: its batch's result, its place in it, its timestamp."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: BatchResult, index: int, timestamp: int) -> None:
        self._batch = batch
        """The record's BatchResult."""
        self._index = index
        """The record's offset delta in its batch."""
        self._timestamp = timestamp
        """The record's timestamp."""


class BatchState:
    """An open batch's records and counters."""

    __slots__ = ("base_timestamp", "full", "max_timestamp", "records", "reserved", "result", "size")

    records: list[bytes] | None
    """The encoded records (offset deltas 0, 1, ...), or None once built."""
    result: BatchResult
    """The batch's BatchResult."""
    base_timestamp: int
    """The first record's timestamp (the records' deltas are from it)."""
    max_timestamp: int
    """The highest timestamp of the records."""
    size: int
    """Bytes of the batch if built now, before compression."""
    reserved: int
    """Bytes of ``buffer.memory`` the batch's records hold."""
    full: bool
    """Whether no record may be added."""


class AccumulatorState:
    """The queues of batches and the accounting of ``buffer.memory``, under one lock."""

    __slots__ = (
        "_closed",
        "_lock",
        "_queues",
        "_used",
        "_wake_pending",
        "batch_size",
        "buffer_memory",
        "wakeup",
    )

    _lock: threading.Lock
    """The lock of the queues and the accounting."""
    _queues: dict[tuple[str, int], deque[ProducerBatch]]
    """(topic, partition) -> its batches, oldest first."""
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
