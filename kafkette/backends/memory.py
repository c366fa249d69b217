"""MemoryLog: segments of immutable batches held in memory.

Each batch is copied once, as stored (base offset, length and leader epoch
rewritten): into a ``bytes`` of its own, or, once a segment holds
:data:`ARENA_FROM` bytes, into an arena: an anonymous mapping the segment's
next batches are copied into one after the other (see
:meth:`MemorySegment._arena_copy`). Reads return read-only memoryviews of the
stored batches (no copy). Segments, rolls, retention, DeleteRecords and
compaction behave as on disk; nothing survives the process.

Arena memory is never written again once a batch is in it, nor reused while
any view of it lives: a read of arena batches says so
(:attr:`~kafkette.backends.types.LogSlice.spliceable`), and the TCP server
then hands their pages to the kernel by reference instead of copying them
(:mod:`kafkette.server.net.zero_copy`), as sendfile does for a disk segment.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import mmap
from collections.abc import Iterator, Sequence

from kafkette.backends.config import LogConfig
from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.log import Log, Storage
from kafkette.backends.producer_state import ProducerStateTable
from kafkette.backends.segment import STORED_PREFIX, STORED_PREFIX_SIZE, BufferLike, Segment
from kafkette.backends.segmented import SegmentedLog
from kafkette.backends.types import AbortedTxn, LogSlice
from kafkette.clocks import LogClockMs, wall_ms_int
from kafkette.protocol.records.batch_header import LOG_OVERHEAD

ARENA_FROM = 4 << 20
"""Bytes a segment holds before its batches are copied into arenas (small and quiet
partitions keep exact-size allocations)."""
HUGE_PAGE = 2 << 20
"""Arenas are reserved and populated in steps of this size: a transparent huge page
on x86-64 and arm64, which the kernel hands to a socket as one piece."""
ARENA_MIN = HUGE_PAGE
ARENA_MAX = 64 << 20
"""Address space reserved for one arena: an eighth of the segment's size, within these
bounds (or a larger batch's size). Only what batches fill is populated, one huge page
at a time, so an arena left behind wastes less than one."""

_MADV_POPULATE_WRITE = 23
"""Linux 5.14's ``madvise`` to allocate a range's pages now (Python 3.11's mmap module
does not name it): one system call for 2 MiB costs a fraction of the page faults that
copying into fresh memory takes, which dominate the cost of keeping a batch."""
_ARENAS = hasattr(mmap, "MAP_ANONYMOUS") and hasattr(mmap.mmap, "madvise")
_populate_works = True

# Header fields by index in the tuple the append fast path passes.
_LAST_OFFSET_DELTA = 6
_MAX_TIMESTAMP = 8


class MemorySegment(Segment):
    """Batches as a list of memoryviews; a position is the batch's index in the list.

    Only the batches and their last offsets are kept: a header is read from
    the stored bytes when asked for (reads go by last offset), so an append
    makes no header object.
    """

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_timestamp = -1
        self.is_full = False
        self.aborted: list[AbortedTxn] = []
        self._data: list[memoryview] = []
        self._lasts: list[int] = []
        # The largest max timestamp of the batches up to each one (non-decreasing):
        # where a search by timestamp starts.
        self._max_so_far: list[int] = []
        # The batches from this index on are all in arenas.
        self._arena_batches_from = 0
        self._region: mmap.mmap | None = None
        self._arena: memoryview | None = None
        self._arena_pos = 0
        self._arena_populated = 0

    def append_batch(
        self, parts: Sequence[BufferLike], header: tuple[int, ...], base_offset: int
    ) -> None:
        stored: memoryview | None = None
        if self.size >= ARENA_FROM:
            size = sum(len(part) for part in parts)
            stored = self._arena_copy(parts, size)
        if stored is None:
            data: bytes | bytearray
            if len(parts) == 1:
                data = parts[0] if isinstance(parts[0], bytearray) else bytes(parts[0])
            else:
                data = b"".join(parts)
            stored = self._keep_alone(memoryview(data))
        # ``header`` predates the log's rewrite of base offset and leader epoch: the
        # fields kept are read from the bytes kept.
        kept = parse_header(stored)
        self._add(stored, kept.base_offset, kept.last_offset_delta, kept.max_timestamp)

    append_fields = append_batch  # the header passed in is not used

    def append_single(
        self, data: BufferLike, header: tuple[int, ...], base_offset: int, leader_epoch: int
    ) -> None:
        size = len(data)
        prefix = STORED_PREFIX.pack(base_offset, size - LOG_OVERHEAD, leader_epoch)
        rest = memoryview(data)[STORED_PREFIX_SIZE:]
        stored: memoryview | None = None
        if self.size >= ARENA_FROM:
            stored = self._arena_copy((prefix, rest), size)
        if stored is None:
            stored = self._keep_alone(memoryview(b"".join((prefix, rest))))
        self._add(stored, base_offset, header[_LAST_OFFSET_DELTA], header[_MAX_TIMESTAMP])

    def _keep_alone(self, stored: memoryview) -> memoryview:
        """``stored`` kept in an allocation of its own (it ends the run of arena batches)."""
        self._arena_batches_from = len(self._data) + 1
        return stored

    def _arena_copy(self, parts: Sequence[BufferLike], size: int) -> memoryview | None:
        """The batch (``parts`` joined) copied into the segment's arena (None: no arena
        to be had). Regions once handed out are never written again."""
        arena = self._arena
        pos = self._arena_pos
        if arena is None or pos + size > len(arena):
            arena = self._new_arena(size)
            if arena is None:
                return None
            pos = 0
        end = pos + size
        if end > self._arena_populated:
            self._populate(end)
        at = pos
        for part in parts:
            arena[at : at + len(part)] = part
            at += len(part)
        self._arena_pos = end
        return arena[pos:end].toreadonly()

    def _new_arena(self, batch_size: int) -> memoryview | None:
        if not _ARENAS:
            return None
        # Growing with the segment (an eighth of it) keeps the number of mappings of
        # a large log small without reserving much for a small one.
        size = max(min(max(ARENA_MIN, self.size // 8), ARENA_MAX), batch_size)
        size = -(-size // HUGE_PAGE) * HUGE_PAGE
        try:
            region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (OSError, ValueError):
            return None
        # (not on Linux, or without transparent huge pages, 4 KiB pages serve too)
        with contextlib.suppress(OSError, AttributeError):
            region.madvise(mmap.MADV_HUGEPAGE)
        self._region = region
        self._arena = memoryview(region)
        self._arena_pos = self._arena_populated = 0
        return self._arena

    def _populate(self, end: int) -> None:
        """Allocate the arena's pages up to ``end`` (rounded up to a huge page) now."""
        global _populate_works
        assert self._region is not None
        start = self._arena_populated
        stop = min(-(-end // HUGE_PAGE) * HUGE_PAGE, len(self._region))
        self._arena_populated = stop
        if not _populate_works:
            return  # the copy's page faults allocate them
        try:
            self._region.madvise(_MADV_POPULATE_WRITE, start, stop - start)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # a kernel before 5.14
                _populate_works = False

    def _add(self, data: memoryview, base_offset: int, last_delta: int, max_ts: int) -> None:
        if not self._data:
            self.first_timestamp = max_ts
        self._data.append(data)
        last = base_offset + last_delta
        self._lasts.append(last)
        self.size += len(data)
        self.next_offset = last + 1
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base_offset
        self._max_so_far.append(self.max_timestamp)

    def read(self, offset: int, max_bytes: int, upper_bound: int) -> LogSlice | None:
        lasts = self._lasts
        index = first = bisect.bisect_left(lasts, offset)
        count = len(lasts)
        if index == count:
            return None
        data = self._data
        views: list[memoryview] = []
        total = 0
        while index < count:
            view = data[index]
            if lasts[index] >= upper_bound or (views and total + len(view) > max_bytes):
                break
            views.append(view)
            total += len(view)
            index += 1
        return LogSlice(total, tuple(views), spliceable=first >= self._arena_batches_from)

    def headers(self, start_offset: int | None = None) -> Iterator[tuple[int, StoredHeader]]:
        index = 0 if start_offset is None else bisect.bisect_left(self._lasts, start_offset)
        data = self._data
        for position in range(index, len(data)):
            yield position, parse_header(data[position])

    def batch_bytes(self, position: int, size: int) -> BufferLike:
        return self._data[position]

    def timestamp_scan_start(self, timestamp: int) -> int:
        index = bisect.bisect_left(self._max_so_far, timestamp)
        return self._lasts[index - 1] + 1 if index else self.base_offset

    def truncate_to(self, offset: int) -> None:
        index = bisect.bisect_left(self._lasts, offset)
        # (a running maximum: the entries of the batches kept stay right)
        del self._data[index:], self._lasts[index:], self._max_so_far[index:]
        self._arena_batches_from = min(self._arena_batches_from, index)
        self._recompute()
        self.drop_aborted_from(offset)

    def _recompute(self) -> None:
        data = self._data
        self.size = sum(len(d) for d in data)
        self.next_offset = self._lasts[-1] + 1 if self._lasts else self.base_offset
        self.first_timestamp = self.max_timestamp = self.offset_of_max_timestamp = -1
        if data:
            self.first_timestamp = parse_header(data[0]).max_timestamp
            highest = self._max_so_far[-1]
            if highest >= 0:
                # the first batch reaching the running maximum holds it
                first = bisect.bisect_left(self._max_so_far, highest)
                self.max_timestamp = highest
                self.offset_of_max_timestamp = parse_header(data[first]).base_offset

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)

    def seal(self) -> None:
        self._arena = self._region = None  # its regions live on in the batches kept


class MemoryLog(SegmentedLog):
    """A partition log held in memory."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        clock: LogClockMs = wall_ms_int,
        start_offset: int = 0,
    ) -> None:
        super().__init__(topic, partition, config or LogConfig(), clock)
        self._snapshots: dict[int, bytes] = {}
        self._segments = [MemorySegment(start_offset)]
        self._bases = [start_offset]
        self._log_start = self._next_offset = self._high_watermark = start_offset
        self._first_dirty_offset = start_offset

    def _new_segment(self, base_offset: int) -> Segment:
        return MemorySegment(base_offset)

    def _save_snapshot(self, offset: int, table: ProducerStateTable) -> None:
        self._snapshots[offset] = table.to_bytes()

    def _latest_snapshot(self, at_most: int) -> tuple[int, ProducerStateTable] | None:
        candidates = [o for o in self._snapshots if o <= at_most]
        if not candidates:
            return None
        offset = max(candidates)
        return offset, ProducerStateTable.from_bytes(self._snapshots[offset])

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        offsets = sorted(self._snapshots)
        if above is not None:
            for offset in offsets:
                if offset > above:
                    del self._snapshots[offset]
        if below is not None:
            older = [o for o in offsets if o < below and o in self._snapshots]
            for offset in older[:-1]:
                del self._snapshots[offset]

    def _replace_segment(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Segment:
        segment = MemorySegment(old.base_offset)
        for parts, header in batches:
            segment.append_batch(parts, header, header.base_offset)
        segment.aborted = list(old.aborted)
        return segment


class MemoryStorage(Storage):
    """Logs kept in memory, by topic-partition."""

    def __init__(
        self, *, clock: LogClockMs = wall_ms_int, default_config: LogConfig | None = None
    ) -> None:
        self._clock = clock
        self._default = default_config or LogConfig()
        self._logs: dict[tuple[str, int], MemoryLog] = {}

    def open_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            log = MemoryLog(topic, partition, config or self._default, clock=self._clock)
            self._logs[key] = log
            return log
        log._closed = False  # reopening keeps the data, as a disk log would
        if config is not None:
            log.update_config(config)
        return log

    def list_partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def delete_log(self, topic: str, partition: int) -> None:
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            log.close()

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
