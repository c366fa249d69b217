"""MemoryLog: segments of immutable batches held in memory.

Each batch is copied once, as stored (base offset, length and leader epoch
rewritten): into a ``bytes`` of its own, or, once a segment holds
:data:`ARENA_FROM` bytes, into a pre-populated arena shared with the batches
appended after it (see :meth:`MemorySegment._arena_copy`). Reads return
read-only memoryviews of the stored batches (no copy). Segments, rolls,
retention, DeleteRecords and compaction behave as on disk; nothing survives
the process.
"""

from __future__ import annotations

import bisect
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
partitions keep exact-size allocations, and an arena's unused tail is at most a
quarter of what the segment holds)."""
ARENA_MIN = 1 << 20
ARENA_MAX = 16 << 20
"""Sizes of the arenas (an eighth of the segment's size, within these bounds)."""
ARENA_BATCH_MAX = 256 << 10
"""Larger batches get an allocation of their own."""

_POPULATE: int | None = (
    mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
    if hasattr(mmap, "MAP_POPULATE") and hasattr(mmap, "MAP_ANONYMOUS")
    else None
)

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
        self._arena: memoryview | None = None
        self._arena_pos = 0

    def append_batch(
        self, parts: Sequence[BufferLike], header: tuple[int, ...], base_offset: int
    ) -> None:
        data: bytes | bytearray
        if len(parts) == 1:
            data = parts[0] if isinstance(parts[0], bytearray) else bytes(parts[0])
        else:
            data = b"".join(parts)
        # ``header`` predates the log's rewrite of base offset and leader epoch: the
        # fields kept are read from the bytes kept.
        stored = parse_header(data)
        self._add(
            memoryview(data), stored.base_offset, stored.last_offset_delta, stored.max_timestamp
        )

    append_fields = append_batch  # the header passed in is not used

    def append_single(
        self, data: BufferLike, header: tuple[int, ...], base_offset: int, leader_epoch: int
    ) -> None:
        size = len(data)
        stored: memoryview | None = None
        if self.size >= ARENA_FROM and size <= ARENA_BATCH_MAX:
            stored = self._arena_copy(data, size, base_offset, leader_epoch)
        if stored is None:
            stored = memoryview(
                b"".join(
                    (
                        STORED_PREFIX.pack(base_offset, size - LOG_OVERHEAD, leader_epoch),
                        memoryview(data)[STORED_PREFIX_SIZE:],
                    )
                )
            )
        self._add(stored, base_offset, header[_LAST_OFFSET_DELTA], header[_MAX_TIMESTAMP])

    def _arena_copy(
        self, data: BufferLike, size: int, base_offset: int, leader_epoch: int
    ) -> memoryview | None:
        """The batch copied as stored into the segment's arena (None: no arena to be had).

        An arena is a region mapped with its pages already in place (``MAP_POPULATE``):
        one system call for them all costs about half of what the page faults of
        copying into fresh memory do, which dominate the cost of keeping a batch.
        Regions once handed out are never written again (reads return views of them).
        """
        arena = self._arena
        pos = self._arena_pos
        if arena is None or pos + size > len(arena):
            arena = self._new_arena()
            if arena is None:
                return None
            pos = 0
        end = pos + size
        STORED_PREFIX.pack_into(arena, pos, base_offset, size - LOG_OVERHEAD, leader_epoch)
        arena[pos + STORED_PREFIX_SIZE : end] = memoryview(data)[STORED_PREFIX_SIZE:]
        self._arena_pos = end
        return arena[pos:end].toreadonly()

    def _new_arena(self) -> memoryview | None:
        if _POPULATE is None:
            return None
        # Growing with the segment (an eighth of it) bounds the tail left unused when
        # it is sealed, and keeps the number of mappings of a large log small.
        size = min(max(ARENA_MIN, self.size // 8 // ARENA_MIN * ARENA_MIN), ARENA_MAX)
        try:
            region = mmap.mmap(-1, size, flags=_POPULATE)
        except (OSError, ValueError):
            return None
        self._arena = memoryview(region)
        self._arena_pos = 0
        return self._arena

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
        index = bisect.bisect_left(lasts, offset)
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
        return LogSlice(total, tuple(views))

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
        self._arena = None  # its regions live on in the batches kept


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
