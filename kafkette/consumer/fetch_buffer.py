"""Fetched data waiting for ``poll``: :class:`CompletedFetch` and :class:`FetchBuffer`.

The fetcher (in the event loop) adds one :class:`CompletedFetch` per
partition per fetch response: the raw record bytes as the broker sent them,
not parsed. ``poll`` (in the application's thread for the sync consumer)
drains them: batches are parsed lazily as they are reached, records below the
position are skipped, aborted transactions and control batches are dropped,
and the partition's position advances as records are handed out. Nothing
crosses threads per record: the buffer's lock is taken a few times per
``poll``, and the fetcher is woken once per used-up completed fetch.

At most two completed fetches per partition wait here besides the one ``poll``
has begun to read, and the fetcher chains the next fetch's offset on the last
one's end (:meth:`FetchBuffer.next_offset`), so a fetch is in flight while the
application works on the previous records.
"""

from __future__ import annotations

import heapq
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import dropwhile, islice, repeat
from operator import add
from typing import Any, NamedTuple

import anyio
from crc32c import crc32c

from kafkette.consumer.record import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, ConsumerRecord
from kafkette.consumer.subscription import PartitionState
from kafkette.errors import CorruptMessageError, KafkaError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.records import (
    ControlRecordType,
    LegacyBatch,
    Record,
    RecordBatch,
    iter_batches,
    parse_control_record,
    speedups,
)
from kafkette.protocol.records.batch_header import (
    LAST_OFFSET_DELTA_OFFSET,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    iter_entries,
)
from kafkette.structs import TopicPartition

MAX_BUFFERED_PER_PARTITION = 2

_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_new = tuple.__new__
_INT64_MAX = (1 << 63) - 1
_TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)

Deserializer = Callable[[Any], Any]


def end_offset(records: Any) -> int | None:
    """The offset after the last complete batch in ``records``, or None if there is none.

    Reads only the batch headers; a partial trailing batch is not counted.
    """
    if speedups.fetch_end_offset is not None:
        return speedups.fetch_end_offset(records)
    end = None
    try:
        for pos, size in iter_entries(records, allow_partial=True):
            (base,) = _OFFSET.unpack_from(records, pos)
            if size > MAGIC_OFFSET and records[pos + MAGIC_OFFSET] == 2:
                if size < LAST_OFFSET_DELTA_OFFSET + 4:
                    return end
                (delta,) = _INT32.unpack_from(records, pos + LAST_OFFSET_DELTA_OFFSET)
                end = base + delta + 1
            else:
                end = base + 1  # a legacy entry's offset is its (last inner) record's
    except ProtocolError:
        # A damaged length: the batches before it are still usable; the drain reports the rest.
        return end if end is not None else None
    return end


class FetchedBatch(NamedTuple):
    """A record batch handed out whole (:meth:`Consumer.poll_batches
    <kafkette.consumer.Consumer.poll_batches>`): its records from ``position`` on are
    the partition's next ones (those below were consumed already)."""

    batch: RecordBatch | LegacyBatch
    position: int

    @property
    def timestamp_type(self) -> int:
        """The records' :attr:`ConsumerRecord.timestamp_type
        <kafkette.consumer.ConsumerRecord.timestamp_type>`."""
        return timestamp_type(self.batch)


def timestamp_type(batch: RecordBatch | LegacyBatch) -> int:
    """:data:`CREATE_TIME`, :data:`LOG_APPEND_TIME` or (magic 0) :data:`NO_TIMESTAMP_TYPE`."""
    if isinstance(batch, RecordBatch):
        return LOG_APPEND_TIME if batch.header.is_log_append_time else CREATE_TIME
    if batch.magic == 1:
        return LOG_APPEND_TIME if batch.is_log_append_time else CREATE_TIME
    return NO_TIMESTAMP_TYPE


class CompletedFetch:
    """One partition's records from one fetch response, drained by ``poll``."""

    __slots__ = (
        "_aborted",
        "_aborted_pids",
        "_batches",
        "_cursor",
        "_deferred",
        "_pending",
        "_pending_batch",
        "_pending_end",
        "check_crcs",
        "end_offset",
        "error",
        "fetch_offset",
        "position",
        "read_committed",
        "records",
        "size",
        "started",
        "state",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        state: PartitionState,
        fetch_offset: int,
        records: Any,
        end: int,
        *,
        aborted: Sequence[tuple[int, int]] = (),
        read_committed: bool = False,
        check_crcs: bool = True,
        error: KafkaError | None = None,
    ) -> None:
        self.tp = tp
        self.state = state
        self.fetch_offset = fetch_offset
        self.position = fetch_offset
        self.records = records
        self.size = len(records) if records is not None else 0
        self.end_offset = end
        self.read_committed = read_committed
        self.check_crcs = check_crcs
        self.error = error
        self.started = False
        """Whether ``poll`` has begun to read it (then it no longer counts as waiting)."""
        # (first_offset, producer_id) of aborted transactions, smallest first
        self._aborted = sorted(aborted) if read_committed else []
        self._aborted_pids: set[int] = set()
        self._batches: Iterator[RecordBatch | LegacyBatch] | None = None
        self._cursor = 0
        """Where in ``records`` the next batch not yet read begins."""
        self._pending: Iterator[ConsumerRecord] | None = None
        self._pending_batch: RecordBatch | LegacyBatch | None = None
        self._pending_end = 0
        self._deferred: CorruptMessageError | None = None

    @classmethod
    def failed(cls, tp: TopicPartition, state: PartitionState, error: KafkaError) -> CompletedFetch:
        """An entry that raises ``error`` from ``poll`` instead of giving records."""
        return cls(tp, state, state.position or 0, None, state.position or 0, error=error)

    def take(
        self,
        limit: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> tuple[list[ConsumerRecord], bool]:
        """Up to ``limit`` records from the position on; and whether this fetch is used up.

        Advances ``position`` and the partition's position together.
        Raises CorruptMessageError for a damaged batch. Records are made
        ``limit`` at a time from the batch being read, never a whole batch at
        once: fewer live tuples means fewer garbage collector passes.
        """
        self.started = True
        if self._deferred is not None:
            raise self._deferred
        out: list[ConsumerRecord] = []
        state = self.state
        take_records = speedups.take_records
        while limit > 0:
            pending = self._pending
            if pending is None:
                if take_records is not None and self.records is not None:
                    # The C extension takes whole plain batches; Python reads the batch it
                    # stops at (compressed, legacy, partly consumed, damaged...), if any.
                    cursor = self._cursor
                    made, self._cursor, position = take_records(
                        self.records,
                        cursor,
                        self.position,
                        limit,
                        ConsumerRecord,
                        (self.tp.topic, self.tp.partition),
                        _TIMESTAMP_TYPES,
                        crc32c if self.check_crcs else None,
                        self._transactional_below(),
                        not self.read_committed,  # read_committed reads the markers
                    )
                    if self._cursor != cursor:
                        self._batches = None  # the Python walk goes on from the cursor
                        self.position = state.position = position
                        if made:
                            if key_deserializer is not None or value_deserializer is not None:
                                made = _deserialize(made, key_deserializer, value_deserializer)
                            if out:
                                out += made
                            else:
                                out = made
                            limit -= len(made)
                            if limit == 0:
                                break
                try:
                    batch = self._next_batch()
                    if batch is None:
                        return out, True
                    opened = self._open(batch)
                except CorruptMessageError as exc:
                    if not out:
                        raise
                    # The records before the damage are handed out first; the next call raises.
                    self._deferred = exc
                    return out, False
                if opened is None:
                    continue
                if isinstance(opened, list) and len(opened) <= limit:
                    # The whole batch at once (the C extension's records; the common case).
                    if key_deserializer is not None or value_deserializer is not None:
                        opened = _deserialize(opened, key_deserializer, value_deserializer)
                    if out:
                        out += opened
                    else:
                        out = opened  # made for this call alone: no copy
                    limit -= len(opened)
                    self.position = state.position = batch.next_offset
                    continue
                pending = iter(opened)
                self._pending = pending
                self._pending_batch = batch
                self._pending_end = batch.next_offset
            chunk = list(islice(pending, limit))
            if chunk:
                if key_deserializer is not None or value_deserializer is not None:
                    chunk = _deserialize(chunk, key_deserializer, value_deserializer)
                out += chunk
                limit -= len(chunk)
            if limit > 0 or chunk[-1][2] + 1 >= self._pending_end:  # the batch is used up
                self._pending = self._pending_batch = None
                self.position = state.position = self._pending_end
            else:
                self.position = state.position = chunk[-1][2] + 1
        return out, self._pending is None and self.position >= self.end_offset

    def take_batches(self, limit: int) -> tuple[list[FetchedBatch], int, bool]:
        """Whole batches from the position on, until they hold ``limit`` offsets or more;
        how many offsets they advanced the position by; and whether this fetch is used up.

        Control batches and aborted transactions are skipped as :meth:`take`
        skips them; the position (and the partition's) moves past each batch
        handed out. The records are not parsed here: the caller parses them
        (its parse errors are the caller's) and keeps those from the
        :class:`FetchedBatch`'s ``position`` on. A batch :meth:`take` had
        started is handed out whole, with the position reached in it.
        """
        self.started = True
        if self._deferred is not None:
            raise self._deferred
        out: list[FetchedBatch] = []
        state = self.state
        start = self.position
        batch = self._pending_batch
        if batch is not None:
            out.append(FetchedBatch(batch, self.position))
            self._pending = self._pending_batch = None
            self.position = state.position = batch.next_offset
        while self.position - start < limit:
            try:
                batch = self._next_batch()
            except CorruptMessageError as exc:
                if not out:
                    raise
                self._deferred = exc  # the batches before the damage first; the next call raises
                return out, self.position - start, False
            if batch is None:
                return out, self.position - start, True
            if self._skipped(batch):
                continue
            out.append(FetchedBatch(batch, self.position))
            self.position = state.position = batch.next_offset
        return out, self.position - start, self.position >= self.end_offset

    def _next_batch(self) -> RecordBatch | LegacyBatch | None:
        batches = self._batches
        if batches is None:
            batches = self._batches = iter_batches(
                self.records, start=self._cursor, allow_partial=True, check_crc=self.check_crcs
            )
        try:
            batch = next(batches, None)
        except ProtocolError as exc:
            raise CorruptMessageError(
                f"{self.tp} at offset {self.position}: {exc}; seek past it to go on"
            ) from exc
        if batch is not None:
            self._cursor += batch.size
        return batch

    def _transactional_below(self) -> int:
        """Below which last offset the read_committed filter leaves transactional batches
        as they are (no aborted transaction reaches them): the C walk may take those."""
        if not self.read_committed:
            return _INT64_MAX
        if self._aborted_pids:
            return -1
        return self._aborted[0][0] if self._aborted else _INT64_MAX

    def _open(
        self, batch: RecordBatch | LegacyBatch
    ) -> list[ConsumerRecord] | Iterator[ConsumerRecord] | None:
        """The batch's records for the application: all made at once by the C extension (a
        list), else made as they are reached.

        None when the whole batch is skipped (below the position, a control
        batch, an aborted transaction); the position then moves past it.
        """
        if self._skipped(batch):
            return None
        position = self.position
        if isinstance(batch, RecordBatch):
            header = batch.header
            epoch = header.partition_leader_epoch
            suffix = (
                timestamp_type(batch),
                None if epoch == NO_PARTITION_LEADER_EPOCH else epoch,
            )
            first_offset = header.base_offset
        else:
            suffix = (timestamp_type(batch), None)
            first_offset = -1  # unknown before decompressing: always filter
        prefix = (self.tp.topic, self.tp.partition)
        try:  # both parse and validate the whole batch
            made = (  # by the C extension, whole
                batch.records_as(ConsumerRecord, prefix, suffix)
                if isinstance(batch, RecordBatch)
                else None
            )
            if made is None:
                raw: Iterator[Record] = iter(batch)
        except ProtocolError as exc:
            raise CorruptMessageError(
                f"{self.tp} batch at offset {first_offset}: {exc}; seek past it to go on"
            ) from exc
        if made is not None:
            if first_offset < position:
                return list(dropwhile(lambda r: r[2] < position, made))
            return made
        if first_offset < position:
            raw = dropwhile(lambda r: r[0] < position, raw)
        return map(
            _new, repeat(ConsumerRecord), map(add, map(add, repeat(prefix), raw), repeat(suffix))
        )

    def _skipped(self, batch: RecordBatch | LegacyBatch) -> bool:
        """Whether the whole batch is skipped: below the position, a control batch, an
        aborted transaction (the position then moves past it)."""
        next_offset = batch.next_offset
        if next_offset <= self.position:
            return True
        if isinstance(batch, RecordBatch):
            header = batch.header
            if (header.is_transactional and self.read_committed and self._is_aborted(batch)) or (
                header.is_control
            ):
                self.position = self.state.position = next_offset
                return True
        return False

    def _is_aborted(self, batch: RecordBatch) -> bool:
        """Kafka's read_committed filter: is this transactional batch part of an aborted txn?

        Producers whose aborted transaction starts at or before the batch's
        last offset become aborted; an ABORT marker ends that.
        """
        header = batch.header
        aborted = self._aborted
        while aborted and aborted[0][0] <= header.last_offset:
            self._aborted_pids.add(heapq.heappop(aborted)[1])
        if header.is_control:
            try:
                records = list(batch)
            except ProtocolError as exc:  # damage no CRC check caught (check_crcs off)
                raise CorruptMessageError(
                    f"{self.tp} batch at offset {header.base_offset}: {exc}; seek past it to go on"
                ) from exc
            for record in records:
                try:
                    marker = parse_control_record(record[2], record[3])
                except ProtocolError:
                    continue
                if marker.type == ControlRecordType.ABORT:
                    self._aborted_pids.discard(header.producer_id)
            return False
        return header.producer_id in self._aborted_pids


def _deserialize(
    records: list[ConsumerRecord],
    key_deserializer: Deserializer | None,
    value_deserializer: Deserializer | None,
) -> list[ConsumerRecord]:
    kd = key_deserializer
    vd = value_deserializer
    return [
        _new(
            ConsumerRecord,
            (
                t,
                p,
                o,
                ts,
                k if kd is None or k is None else kd(k),
                v if vd is None or v is None else vd(v),
                h,
                tt,
                e,
            ),
        )
        for t, p, o, ts, k, v, h, tt, e in records
    ]


def _full(entries: Sequence[CompletedFetch]) -> bool:
    """Whether a partition's completed fetches leave no room for another: the one
    ``poll`` has begun to read does not count."""
    return len(entries) - int(entries[0].started) >= MAX_BUFFERED_PER_PARTITION


class FetchBuffer:
    """Completed fetches in arrival order, shared by the fetcher and ``poll``.

    ``add`` runs in the event loop; ``poll`` may run in another thread (the
    sync consumer): a lock guards the queue, a condition wakes sync waiters and
    an anyio event async ones.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[CompletedFetch] = deque()
        self._per_partition: dict[TopicPartition, list[CompletedFetch]] = {}
        self._fetching: set[TopicPartition] = set()  # partitions in a fetch in flight
        self._arrived = anyio.Event()
        self.generation = 0  # bumped when waiters are told of adds: sync waiters watch it
        self.async_waiting = 0
        """``poll`` tasks in :meth:`wait_async` (event-loop thread only): a task woken by an
        add counts until it runs, so the fetcher can let it take the records first."""
        self.sync_waiting = 0
        """Threads blocked in :meth:`wait_sync` (``poll`` threads of a sync consumer)."""
        self._woken = 0
        """Threads in :meth:`wait_sync` the last wake-up told, not back yet."""
        self._back = threading.Lock()
        """Released by the last of the woken to come back (a lock, not a condition: one
        call to wait on, one to release, with no Python around them)."""
        self._back.acquire()

    # ---- fetcher side (event loop)

    def next_offset(self, tp: TopicPartition, state: PartitionState) -> int | None:
        """Where the next fetch for ``tp`` starts, or None if enough is buffered already.

        The fetch ``poll`` is reading does not count: were it to, the answer that
        arrives while ``poll`` reads it would leave no fetch in flight, and the next
        one would go out only once ``poll`` has used that fetch up and woken the
        fetcher; for the sync consumer, only once its thread waits and lets the
        loop's thread have the interpreter lock, so ``poll`` would then wait a
        whole round trip.
        """
        with self._lock:
            entries = self._per_partition.get(tp)
            if not entries:
                return state.position
            last = entries[-1]
            if _full(entries) or last.error is not None:
                return None
            if last.state is not state:
                return None
            return last.end_offset

    def fetching(self, partitions: Iterable[TopicPartition]) -> None:
        """A fetch for ``partitions`` is in flight: when it ends (:meth:`fetched`), the
        fetcher plans again, so a :meth:`remove` meanwhile needs no wake-up."""
        with self._lock:
            self._fetching.update(partitions)

    def fetched(self, partitions: Iterable[TopicPartition]) -> None:
        """The fetch for ``partitions`` ended; the fetcher plans next (after this)."""
        with self._lock:
            self._fetching.difference_update(partitions)

    def add(self, entry: CompletedFetch) -> None:
        """Queue ``entry`` for ``poll`` and wake the waiters at once.

        At once, not after the fetcher has written its next request: a sync ``poll``
        thread woken now parses these records while that write's system call lets go
        of the interpreter lock, and while the broker, woken by the request, answers
        it (on two cores, it often takes the loop thread's core until its answer is
        written). Told after the write, ``poll`` waited that long with nothing to do.
        For a small answer the fetcher lets the woken thread run first
        (:meth:`yield_to_woken`).
        """
        with self._lock:
            self._queue.append(entry)
            self._per_partition.setdefault(entry.tp, []).append(entry)
        self.wake_waiters()

    def drop(self, tp: TopicPartition) -> None:
        """Forget what is buffered for ``tp`` (after a seek or an unassignment)."""
        with self._lock:
            entries = self._per_partition.pop(tp, None)
            if entries:
                self._queue = deque(e for e in self._queue if e.tp != tp)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._per_partition.clear()

    def buffered(self, tp: TopicPartition) -> int:
        with self._lock:
            return len(self._per_partition.get(tp, ()))

    # ---- poll side (any thread)

    def first_ready(self, skip: Callable[[CompletedFetch], bool]) -> CompletedFetch | None:
        """The oldest entry that ``skip`` does not reject (paused partitions are skipped)."""
        with self._lock:
            for entry in self._queue:
                if not skip(entry):
                    return entry
            return None

    def remove(self, entry: CompletedFetch) -> bool:
        """Drop ``entry``; whether the fetcher must be woken to fetch in its place (not
        when a fetch for its partition is in flight: the fetcher plans after that; nor
        while two more fetches of it wait: :meth:`next_offset` would plan none)."""
        with self._lock:
            try:
                self._queue.remove(entry)
            except ValueError:
                return True
            entries = self._per_partition.get(entry.tp)
            if entries is not None:
                if entry in entries:
                    entries.remove(entry)
                if not entries:
                    del self._per_partition[entry.tp]
                elif _full(entries):
                    return False
            return entry.tp not in self._fetching

    def replace(self, old: CompletedFetch, new: CompletedFetch) -> None:
        """Put ``new`` where ``old`` was (a fetch that turned out corrupt becomes its error)."""
        with self._lock:
            try:
                index = self._queue.index(old)
            except ValueError:
                return
            self._queue[index] = new
            entries = self._per_partition.get(old.tp)
            if entries is not None and old in entries:
                entries[entries.index(old)] = new

    def __len__(self) -> int:
        return len(self._queue)

    def wait_sync(self, seen_generation: int, timeout_s: float) -> None:
        """Block until something arrives after ``seen_generation``, or ``timeout_s`` passes."""
        with self._cond:
            if self.generation == seen_generation:
                self.sync_waiting += 1
                try:
                    self._cond.wait(timeout_s)
                finally:
                    self.sync_waiting -= 1
                    if self._woken:
                        self._woken -= 1
                        if not self._woken:
                            self._back.release()

    def yield_to_woken(self, timeout_s: float) -> bool:
        """Block until the threads the last wake-up told in :meth:`wait_sync` are back (have
        run), or ``timeout_s`` passes; whether there were any (event-loop thread only).

        The sync consumer's loop thread calls it after buffering a small answer, before it
        writes the next FetchRequest: waiting, it lets go of the interpreter lock and of
        its core, and ``poll``'s thread hands the records over at once. Written first,
        that request (planned and encoded: 30-80 µs of Python) held ``poll``'s thread
        back, and its send woke the broker, which on two cores often took the core
        ``poll``'s thread was to run on. The request then goes out once ``poll``'s thread
        lets go of the interpreter lock: at its next wait, at the application's next
        blocking call, or after the switch interval (5 ms) if the application computes
        in Python meanwhile.
        """
        with self._lock:
            if not self._woken:
                return False
        if self._back.acquire(timeout=timeout_s):
            return True
        with self._lock:
            if self._woken:  # not all back: none of them opens it now
                self._woken = 0
                return True
        self._back.acquire()  # the last came back meanwhile and opened it: closed again
        return True

    async def wait_async(self, seen_generation: int, timeout_s: float) -> None:
        """Wait in the event loop until something arrives after ``seen_generation``, or
        ``timeout_s`` passes."""
        if self.generation != seen_generation:
            return
        if self._arrived.is_set():
            self._arrived = anyio.Event()
        self.async_waiting += 1
        try:
            with anyio.move_on_after(timeout_s):
                await self._arrived.wait()
        finally:
            self.async_waiting -= 1

    def wake_waiters(self) -> None:
        """Wake every waiter (on adds, on close, on news from the group); event-loop
        thread only."""
        with self._lock:
            self.generation += 1
            self._back.acquire(blocking=False)  # closed, if the last woken left it open
            self._woken = self.sync_waiting
            self._cond.notify_all()
        self._arrived.set()
