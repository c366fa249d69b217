"""The Log logic both backends share, over a list of segments.

Offsets, reads, timestamps, rolls, truncation, retention, DeleteRecords,
producer state and the leader epoch cache live here; a backend supplies its
segments (:class:`~kafkette.backends.segment.Segment`) and, through a few
hooks, how snapshots and checkpoints are kept.
"""

from __future__ import annotations

import abc
import bisect
import struct
from collections.abc import Callable, Iterator, Sequence

import attrs
from crc32c import crc32c

from kafkette.backends.batches import batch_info, split_batches
from kafkette.backends.config import LONG_MAX, LogConfig
from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.log import BlockingWork, Log, Steps, run_steps
from kafkette.backends.producer_state import ProducerStateTable
from kafkette.backends.records import control_marker, first_record_at_or_after, require_keys
from kafkette.backends.segment import BufferLike, Segment
from kafkette.backends.speedups import check_batch as _check_batch
from kafkette.backends.types import (
    AbortedTxn,
    AppendInfo,
    BatchInfo,
    CleanerStats,
    LogSlice,
    TimestampOffset,
)
from kafkette.clocks import LogClockMs
from kafkette.errors import KafkaStorageError, OffsetOutOfRangeError
from kafkette.protocol.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    set_log_append_time,
    set_partition_leader_epoch,
)

"""Milliseconds since the epoch."""

MAX_RELATIVE_OFFSET = 2**31 - 1
_BASE_OFFSET = struct.Struct(">q")
_STORED_PREFIX = struct.Struct(">qii")
"""Base offset, batch length and partition leader epoch: what a log rewrites."""
_STORED_PREFIX_SIZE = _STORED_PREFIX.size
_unpack_header = HEADER_STRUCT.unpack_from
_new_header = _new_tuple = tuple.__new__
# Header fields by index: on the append path a tuple index is cheaper than a property.
_BATCH_LENGTH = 1
_LEADER_EPOCH = 2
_MAGIC = 3
_CRC = 4
_ATTRIBUTES = 5
_LAST_OFFSET_DELTA = 6
_MAX_TIMESTAMP = 8
_PRODUCER_ID = 9
_RECORD_COUNT = 12


@attrs.frozen(slots=True)
class EpochEntry:
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class SegmentedLog(Log):
    """A :class:`Log` made of segments; subclasses provide storage."""

    __slots__ = (
        "_flush_threshold",
        "_log_start",
        "_next_offset",
        "_roll_ms",
        "_segment_bytes",
        "_segments",
        "_unflushed_messages",
    )

    def __init__(self, topic: str, partition: int, config: LogConfig, clock: LogClockMs) -> None:
        self.topic = topic
        self.partition = partition
        self._config = config
        self._cache_config()
        self._clock = clock
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._next_offset = 0
        self._high_watermark = 0
        self._producers = ProducerStateTable()
        self._epochs: list[EpochEntry] = []
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._first_dirty_offset = 0
        self._closed = False
        self._log_start_deferred: bool | None = None
        """While retention runs in steps: False, and True once the log start moved (its
        snapshot and checkpoint then wait for :meth:`_log_start_work`)."""

    # -- hooks -----------------------------------------------------------------

    @abc.abstractmethod
    def _new_segment(self, base_offset: int) -> Segment:
        """Create an empty segment at ``base_offset``."""

    @abc.abstractmethod
    def _save_snapshot(self, offset: int, table: ProducerStateTable) -> None:
        """Keep ``table`` as the producer state before ``offset``."""

    @abc.abstractmethod
    def _latest_snapshot(self, at_most: int) -> tuple[int, ProducerStateTable] | None:
        """The newest kept snapshot whose offset is <= ``at_most``."""

    @abc.abstractmethod
    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Forget snapshots with offset < ``below`` (keeping the newest such) or > ``above``."""

    @abc.abstractmethod
    def _replace_segment(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Segment:
        """A segment with ``old``'s base offset and ``batches`` that takes its place."""

    def _checkpoint(self) -> None:
        """Make log start, leader epochs and cleaner state durable (no-op in memory).

        Called when the log start, the cleaner state or the epochs change, except
        for a new epoch on the append path: that one waits for the next flush,
        whose :meth:`_sync` persists it before the recovery point passes its
        first batch (recovery re-derives it from the stamped batches until then).
        """

    def _sync(self, segments: Sequence[Segment]) -> None:
        """Make ``segments`` durable and advance the recovery point (no-op in memory)."""

    # -- properties ------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        self._cache_config()

    def _cache_config(self) -> None:
        """Copy what every append reads out of the config."""
        config = self._config
        self._max_message_bytes = config.max_message_bytes
        self._compacted = config.compact
        self._log_append_time = config.log_append_time
        self._segment_bytes = config.segment_bytes
        self._roll_ms = config.segment_ms - config.segment_jitter_ms
        self._flush_messages = config.flush_messages
        self._flush_ms = config.flush_ms if config.flush_ms < LONG_MAX else None
        # Unflushed messages from which an append looks at flushing (0: on every append).
        self._flush_threshold = config.flush_messages if self._flush_ms is None else 0
        # Batches the append fast path takes (0: none, the general path does the work).
        fast = not (config.compact or config.log_append_time)
        self._single_batch_limit = config.max_message_bytes if fast else 0

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        self._high_watermark = min(max(offset, self._log_start), self._next_offset)
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        unstable = self._producers.first_unstable_offset()
        if unstable is None:
            return self._high_watermark
        return min(unstable, self._high_watermark)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> Sequence[Segment]:
        """The segments, oldest first (the last one is active)."""
        return tuple(self._segments)

    @property
    def leader_epochs(self) -> Sequence[EpochEntry]:
        """Leader epochs and their start offsets, oldest first."""
        return tuple(self._epochs)

    @property
    def first_dirty_offset(self) -> int:
        """Where the next compaction pass starts reading new data (cleaner checkpoint)."""
        return self._first_dirty_offset

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    # -- append ----------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = -1,
        check_crc: bool = True,
    ) -> AppendInfo:
        if self._closed:
            self._check_open()
        size = len(records)
        # Fast path for what producers send: one whole batch, not a control batch, on a
        # log that neither stamps LogAppendTime nor compacts. It is inline (a call costs
        # as much as the checks) and reads the header tuple by index; the C accelerator,
        # when built, makes the same checks (and the CRC) in one call. Whatever it does
        # not take (several batches, a bad length, magic, count or CRC, ...) goes the
        # general way, which also says what is wrong.
        if RECORD_BATCH_OVERHEAD <= size <= self._single_batch_limit:
            fields: tuple[int, ...] | None
            if _check_batch is not None:
                fields = _check_batch(records, check_crc)
            else:
                fields = _unpack_header(records)
                if not (
                    fields[_BATCH_LENGTH] == size - LOG_OVERHEAD
                    and fields[_MAGIC] == 2
                    and fields[_LAST_OFFSET_DELTA] >= 0
                    and fields[_RECORD_COUNT] >= 0
                    and not fields[_ATTRIBUTES] & CONTROL_MASK
                    and (
                        not check_crc
                        or crc32c(memoryview(records)[ATTRIBUTES_OFFSET:]) == fields[_CRC]
                    )
                ):
                    fields = None
            if fields is not None:
                offset = self._next_offset
                epoch = fields[_LEADER_EPOCH]
                if leader_epoch >= 0:
                    epoch = leader_epoch
                    if not self._epochs or leader_epoch > self._epochs[-1].epoch:
                        self._new_epoch(leader_epoch, offset)
                segment = self._segments[-1]
                if segment.size and (  # _must_roll, inlined
                    segment.size + size > self._segment_bytes
                    or segment.is_full
                    or (
                        segment.first_timestamp >= 0
                        and fields[_MAX_TIMESTAMP] - segment.first_timestamp > self._roll_ms
                    )
                    or offset + fields[_LAST_OFFSET_DELTA] - segment.base_offset
                    > MAX_RELATIVE_OFFSET
                ):
                    self._roll_at(offset)
                    segment = self._segments[-1]
                try:
                    segment.append_single(records, fields, offset, epoch)
                except OSError as exc:
                    raise self._storage_error(exc) from exc
                infos: tuple[BatchInfo, ...] = ()
                if fields[_PRODUCER_ID] >= 0:
                    header: StoredHeader = _new_header(StoredHeader, fields)
                    infos = (batch_info(header, None, base_offset=offset),)
                    self._track(segment, infos[0])
                last = offset + fields[_LAST_OFFSET_DELTA]
                self._next_offset = last + 1
                self._unflushed_messages += fields[_RECORD_COUNT]
                if self._unflushed_messages >= self._flush_threshold:
                    self._maybe_flush()
                return _new_tuple(AppendInfo, (offset, last, -1, self._log_start, infos))
        return self._append_batches(records, leader_epoch, check_crc)

    def _append_batches(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, check_crc: bool
    ) -> AppendInfo:
        """Append any sequence of batches (validated here first)."""
        batches = split_batches(
            records, check_crc=check_crc, max_batch_bytes=self._max_message_bytes
        )
        view = memoryview(records)
        if self._compacted:
            require_keys(view, batches)
        append_time = self._clock() if self._log_append_time else -1
        offset = self._next_offset
        first = offset
        infos: list[BatchInfo] = []
        messages = 0
        if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1].epoch):
            self._new_epoch(leader_epoch, offset)
        try:
            for pos, header in batches:
                size = LOG_OVERHEAD + header.batch_length
                parts: tuple[BufferLike, ...]
                if append_time >= 0:
                    # The timestamp is inside the CRC: this batch is copied and rewritten.
                    whole = bytearray(view[pos : pos + size])
                    _BASE_OFFSET.pack_into(whole, 0, offset)
                    if leader_epoch >= 0:
                        set_partition_leader_epoch(whole, 0, leader_epoch)
                    set_log_append_time(whole, 0, append_time)
                    header = parse_header(whole)
                    parts = (whole,)
                else:
                    epoch = header.partition_leader_epoch if leader_epoch < 0 else leader_epoch
                    parts = (
                        _STORED_PREFIX.pack(offset, size - LOG_OVERHEAD, epoch),
                        view[pos + _STORED_PREFIX_SIZE : pos + size],
                    )
                segment = self._segments[-1]
                if segment.size and self._must_roll(segment, size, header, offset):
                    self._roll_at(offset)
                    segment = self._segments[-1]
                segment.append_batch(parts, header, offset)
                if header.producer_id >= 0 or header.is_control:
                    control = control_marker(view, pos, header) if header.is_control else None
                    info = batch_info(header, control, base_offset=offset)
                    self._track(segment, info)
                    infos.append(info)
                messages += header.record_count
                offset += header.last_offset_delta + 1
                self._next_offset = offset
        except OSError as exc:
            raise self._storage_error(exc) from exc
        self._unflushed_messages += messages
        if self._unflushed_messages >= self._flush_messages or self._flush_ms is not None:
            self._maybe_flush()
        return AppendInfo(first, offset - 1, append_time, self._log_start, tuple(infos))

    def _new_epoch(self, leader_epoch: int, offset: int) -> None:
        # Nothing is written here (the first append of every new partition passes
        # by): see _checkpoint for when the entry becomes durable.
        self._epochs.append(EpochEntry(leader_epoch, offset))

    def _storage_error(self, exc: OSError) -> KafkaStorageError:
        return KafkaStorageError(f"cannot append to {self.topic}-{self.partition}: {exc}")

    def _must_roll(self, segment: Segment, size: int, header: StoredHeader, offset: int) -> bool:
        """Whether a batch of ``size`` bytes written at ``offset`` needs a new segment
        (``segment``, the active one, is not empty)."""
        return (
            segment.size + size > self._segment_bytes
            or segment.is_full
            or (
                segment.first_timestamp >= 0
                and header.max_timestamp - segment.first_timestamp > self._roll_ms
            )
            or offset + header.last_offset_delta - segment.base_offset > MAX_RELATIVE_OFFSET
        )

    def _track(self, segment: Segment, info: BatchInfo) -> None:
        completed = self._producers.update(info)
        if completed is not None and completed.aborted:
            unstable = self._producers.first_unstable_offset()
            lso = info.last_offset + 1 if unstable is None else unstable
            segment.add_aborted(
                AbortedTxn(
                    completed.producer_id, completed.first_offset, completed.last_offset, lso
                )
            )

    def roll(self) -> None:
        self._check_open()
        if self._active.size > 0:
            self._roll_at(self._next_offset)

    def _roll_at(self, offset: int) -> None:
        self._active.seal()
        self._save_snapshot(offset, self._producers)
        self._drop_snapshots(below=self._log_start)
        segment = self._new_segment(offset)
        self._segments.append(segment)
        self._bases.append(offset)

    def _maybe_flush(self) -> None:
        if self._unflushed_messages >= self._flush_messages or (
            self._flush_ms is not None and self._clock() - self._last_flush_ms >= self._flush_ms
        ):
            self.flush()

    def flush(self) -> None:
        self._check_open()
        self._sync(self._segments)
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()

    def tick(self) -> None:
        self._check_open()
        if self._unflushed_messages:
            self._maybe_flush()

    # -- reads -----------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> LogSlice:
        self._check_open()
        self._check_range(offset)
        upper = self._next_offset if upper_bound is None else min(upper_bound, self._next_offset)
        empty = LogSlice(0)
        if offset >= upper:
            return empty
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[index:]:
            if segment.base_offset >= upper:
                break
            result = segment.read(offset, max_bytes, upper)
            if result is not None:
                return result
        return empty

    def _check_range(self, offset: int) -> None:
        if not self._log_start <= offset <= self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start}, {self._next_offset}] "
                f"of {self.topic}-{self.partition}"
            )

    def _segments_from(self, offset: int) -> list[Segment]:
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return self._segments[index:]

    def iter_batch_infos(self, start_offset: int | None = None) -> Iterator[BatchInfo]:
        self._check_open()
        start = self._log_start if start_offset is None else start_offset
        for segment in self._segments_from(start):
            for position, header in segment.headers(start):
                control = None
                if header.is_control:
                    control = control_marker(segment.batch_bytes(position, header.size), 0, header)
                yield batch_info(header, control)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        self._check_open()
        for index, segment in enumerate(self._segments):
            if segment.max_timestamp < timestamp or segment.next_offset <= self._log_start:
                continue
            start = max(segment.timestamp_scan_start(timestamp), self._log_start)
            for later in self._segments[index:]:
                found = self._scan_for_timestamp(later, start, timestamp)
                if found is not None:
                    return found
            return None
        return None

    def _scan_for_timestamp(
        self, segment: Segment, start: int, timestamp: int
    ) -> TimestampOffset | None:
        for position, header in segment.headers(start):
            if header.max_timestamp < timestamp or header.record_count == 0:
                continue
            found = first_record_at_or_after(
                segment.batch_bytes(position, header.size), header, timestamp, self._log_start
            )
            if found is not None:
                return TimestampOffset(found[0], found[1], header.partition_leader_epoch)
        return None

    def max_timestamp(self) -> TimestampOffset | None:
        self._check_open()
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None:
            return None
        return self._scan_for_timestamp(
            best, max(best.base_offset, self._log_start), best.max_timestamp
        )

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        self._check_open()
        return [
            txn
            for segment in self._segments
            for txn in segment.aborted
            if txn.last_offset >= start_offset and txn.first_offset < upper_bound
        ]

    def producer_state(self) -> ProducerStateTable:
        return self._producers

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as OffsetForLeaderEpoch answers, ``(-1, -1)`` when unknown."""
        if not self._epochs or epoch < self._epochs[0].epoch:
            return -1, -1
        for index, entry in enumerate(self._epochs):
            if entry.epoch > epoch:
                previous = self._epochs[index - 1]
                return previous.epoch, entry.start_offset
        return self._epochs[-1].epoch, self._next_offset

    # -- removal ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        self._check_open()
        if offset >= self._next_offset:
            return
        if offset < self._segments[0].base_offset:
            self._truncate_fully(offset)
            return
        # As Kafka: below the first segment the log starts afresh; otherwise the batches
        # before ``offset`` stay (those under the log start too: with the snapshots they
        # rebuild the producer state at ``offset``) and the log start is at most ``offset``.
        self._log_start = min(self._log_start, offset)
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._bases.pop()
            self._segments.pop().delete()
        self._active.truncate_to(offset)
        if not any(s.size for s in self._segments):
            self._truncate_fully(offset)  # nothing left: start afresh at ``offset``
            return
        self._next_offset = offset
        self._after_truncation()
        active = self._active
        if active.next_offset < offset:
            # The data now ends before the new log end (a batch straddling ``offset`` went,
            # or compaction had left a gap): an empty segment named by it keeps it on disk.
            if active.size:
                self._roll_at(offset)
            elif len(self._segments) > 1:
                self._segments.pop().delete()
                self._bases.pop()
                self._segments.append(self._new_segment(offset))
                self._bases.append(offset)

    def _truncate_fully(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments = [self._new_segment(offset)]
        self._bases = [offset]
        self._log_start = self._next_offset = offset
        self._after_truncation()

    def _after_truncation(self) -> None:
        end = self._next_offset
        self._high_watermark = min(self._high_watermark, end)
        self._first_dirty_offset = min(self._first_dirty_offset, end)
        self._epochs = [e for e in self._epochs if e.start_offset < end]
        self._drop_snapshots(above=end)
        self._rebuild_producer_state()
        self._checkpoint()

    def _rebuild_producer_state(self, *, from_scratch: bool = False) -> None:
        """Producer state from the newest snapshot at or below the log end plus a scan
        (or from a scan of the whole log), re-deriving the aborted transactions after it."""
        snapshot = None if from_scratch else self._latest_snapshot(self._next_offset)
        if snapshot is None:
            table, start = ProducerStateTable(), self._segments[0].base_offset
        else:
            start, table = snapshot[0], snapshot[1].copy()
        self._producers = table
        for segment in self._segments_from(start):
            segment.drop_aborted_from(start)
            for position, header in segment.headers(start):
                if header.last_offset < start:
                    continue
                control = None
                if header.is_control:
                    control = control_marker(segment.batch_bytes(position, header.size), 0, header)
                self._track(segment, batch_info(header, control))

    def delete_records_before(self, offset: int) -> int:
        self._check_open()
        if offset == -1:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: "
                f"the high watermark is {self._high_watermark}"
            )
        if offset > self._log_start:
            self._set_log_start(offset)
            self._delete_prefix(lambda segment, following: following.base_offset <= self._log_start)
        return self._log_start

    def delete_records_steps(self, offset: int) -> Steps[int]:
        # As retention_steps: the log start moves now, its snapshot and checkpoints are
        # written (and synced) in the yielded work, which the caller awaits before it
        # answers, so an acknowledged deletion survives a crash.
        self._log_start_deferred = False
        try:
            start = self.delete_records_before(offset)
            moved = self._log_start_deferred
        finally:
            self._log_start_deferred = None
        if moved:
            work = self._log_start_work()
            if work is not None:
                yield work
        return start

    def _set_log_start(self, offset: int) -> None:
        self._log_start = offset
        self._first_dirty_offset = max(self._first_dirty_offset, offset)
        if self._epochs:
            kept = [e for e in self._epochs if e.start_offset > offset]
            covering = [e for e in self._epochs if e.start_offset <= offset]
            if covering:
                kept.insert(0, EpochEntry(covering[-1].epoch, offset))
            self._epochs = kept
        if self._log_start_deferred is not None:
            self._log_start_deferred = True
            return
        # The batches below the new start can no longer rebuild producer state: keep it.
        self._save_snapshot(self._next_offset, self._producers)
        self._checkpoint()

    def _log_start_work(self) -> BlockingWork | None:
        """Keep the producer state and the checkpoints after the log start moved: now
        (None returned), or in the returned work."""
        self._save_snapshot(self._next_offset, self._producers)
        self._checkpoint()
        return None

    def _delete_prefix(self, predicate: Callable[[Segment, Segment], bool]) -> int:
        """Delete leading non-active segments while ``predicate(segment, next)`` holds."""
        deleted = 0
        while len(self._segments) > 1:
            segment, following = self._segments[0], self._segments[1]
            if following.base_offset > self._high_watermark or not predicate(segment, following):
                break
            self._segments.pop(0)
            self._bases.pop(0)
            segment.delete()
            deleted += 1
            if following.base_offset > self._log_start:
                self._set_log_start(following.base_offset)
        if deleted:
            self._drop_snapshots(below=self._log_start)
        return deleted

    def retention_steps(self) -> Steps[int]:
        # The segments go at once (their files' blocks are freed by the storage's reap);
        # the snapshot and checkpoints of the new log start are written after, as when
        # a segment is deleted at once, but in the yielded work.
        self._log_start_deferred = False
        try:
            deleted = self.enforce_retention()
            moved = self._log_start_deferred
        finally:
            self._log_start_deferred = None
        if moved:
            work = self._log_start_work()
            if work is not None:
                yield work
        return deleted

    def enforce_retention(self) -> int:
        self._check_open()
        deleted = self._delete_prefix(lambda s, f: f.base_offset <= self._log_start)
        config = self._config
        if not config.delete:
            return deleted
        if config.retention_ms >= 0:
            now = self._clock()
            deleted += self._delete_prefix(
                lambda s, f: s.max_timestamp >= 0 and now - s.max_timestamp > config.retention_ms
            )
        if config.retention_bytes >= 0:
            excess = self.size_in_bytes - config.retention_bytes

            def over(segment: Segment, following: Segment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_prefix(over)
        return deleted

    # -- compaction ------------------------------------------------------------
    # A pass runs in steps (see compaction.py): what it changes is changed here, on the
    # owner's thread, and the file work that may block (fsyncs, file creation) is yielded
    # for the driver to run; the log may change meanwhile (appends, rolls, retention,
    # deletion), so each change first checks that its segment is still there.

    def _checkpoint_work(self) -> BlockingWork | None:
        """Make the checkpoints durable: now (None returned), or in the returned work."""
        self._checkpoint()
        return None

    def _write_replacement(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Steps[Segment]:
        """A segment with ``old``'s base offset and ``batches``, made durable, not yet
        in the log (its files, if any, under a temporary name)."""
        return self._replace_segment(old, batches)
        yield  # a generator: this backend has no step to yield

    def _install_replacement(self, old: Segment, new: Segment) -> BlockingWork | None:
        """Give ``new`` (from :meth:`_write_replacement`) ``old``'s place on storage;
        returns the work that makes that durable, if any."""
        return None

    def _discard_replacement(self, new: Segment) -> None:
        """Forget a replacement that will not be installed."""

    def _holds(self, segment: Segment) -> bool:
        return not self._closed and any(s is segment for s in self._segments)

    def _swap_segment(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Steps[bool]:
        """Put a compacted copy of ``old`` (same base offset) in its place; False (nothing
        changed) when ``old`` left the log meanwhile."""
        if old is self._active:
            raise AssertionError("the active segment is never compacted")
        work = self._checkpoint_work()  # epochs first: the batches they could come from go
        if work is not None:
            yield work
        new = yield from self._write_replacement(old, batches)
        if not self._holds(old):
            self._discard_replacement(new)
            return False
        durable = self._install_replacement(old, new)
        self._segments[self._segments.index(old)] = new
        if durable is not None:
            yield durable
        return True

    def _drop_segment(self, segment: Segment) -> Steps[bool]:
        """Delete a non-active, non-first segment that compaction emptied; False when it
        left the log (or became its first segment) meanwhile."""
        if segment is self._active:
            raise AssertionError("the active segment is never dropped")
        if not self._holds(segment) or segment is self._segments[0]:
            return False
        work = self._checkpoint_work()  # epochs first: the batches they could come from go
        if work is not None:
            yield work
        if not self._holds(segment) or segment is self._segments[0]:
            return False
        index = self._segments.index(segment)
        del self._segments[index], self._bases[index]
        segment.delete()
        return True

    def _set_first_dirty_offset(self, offset: int) -> Steps[None]:
        if self._closed:
            return
        self._first_dirty_offset = offset
        work = self._checkpoint_work()
        if work is not None:
            yield work

    def compact(self, *, force: bool = False) -> CleanerStats | None:
        return run_steps(self.compaction_steps(force=force))

    def compaction_steps(self, *, force: bool = False) -> Steps[CleanerStats | None]:
        self._check_open()
        from kafkette.backends.compaction import clean_steps

        return clean_steps(self, self._clock(), force=force)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
