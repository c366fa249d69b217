"""MemoryLog: segments of immutable batches held in memory.

Each batch is copied once, as stored (base offset, length and leader epoch
rewritten): into a ``bytes`` of its own, or, once a segment holds
:data:`ARENA_FROM` bytes, into an arena (:mod:`kafkette.backends.pages.arenas`): a
mapping the segment's next batches are copied into one after the other, taken
from an :class:`~kafkette.backends.pages.arenas.ArenaPool` that reuses the arenas of
deleted segments; a batch that arrived in a connection's landing arena
(:mod:`kafkette.backends.pages.landing`) is kept there instead, not copied. Reads
return read-only memoryviews of the stored batches (no copy). Segments, rolls,
retention, DeleteRecords and compaction behave as on disk; nothing survives
the process.

Arena memory is never written again once a batch is in it, nor reused while
any view of it lives: a read of arena batches says so
(:attr:`~kafkette.backends.types.LogSlice.spliceable`), and the TCP server
then hands their pages to the kernel by reference instead of copying them
(:mod:`kafkette.server.net.zero_copy`), as sendfile does for a disk segment;
the arenas such a read covers are never reused.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from kafkette.backends.config import LogConfig
from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.log import Log, Storage
from kafkette.backends.pages.arenas import ARENA_POOL, Arena, ArenaPool, arena_size
from kafkette.backends.pages.landing import landed_arena
from kafkette.backends.producer_state import ProducerStateTable
from kafkette.backends.segment import STORED_PREFIX, STORED_PREFIX_SIZE, BufferLike, Segment
from kafkette.backends.segmented import SegmentedLog
from kafkette.backends.types import AbortedTxn, LogSlice
from kafkette.clocks import LogClockMs, wall_ms_int
from kafkette.protocol.records.batch_header import LOG_OVERHEAD

ARENA_FROM = 4 << 20
"""Bytes a segment holds before its batches are copied into arenas (small and quiet
partitions keep exact-size allocations)."""

# Header fields by index in the tuple the append fast path passes.
_LAST_OFFSET_DELTA = 6
_MAX_TIMESTAMP = 8


class MemorySegment(Segment):
    """Batches as a list of memoryviews; a position is the batch's index in the list.

    Only the batches and their last offsets are kept: a header is read from
    the stored bytes when asked for (reads go by last offset), so an append
    makes no header object.
    """

    def __init__(self, base_offset: int, arenas: ArenaPool = ARENA_POOL) -> None:
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
        self._pool = arenas
        # The arenas holding batches, oldest first, and the index of each one's first
        # batch (arena k holds batches from _arena_firsts[k] to the next one's first).
        self._arenas: list[Arena] = []
        self._arena_firsts: list[int] = []
        # The arena being filled (the last of _arenas), a writable view of it, and
        # where its next batch goes.
        self._writing: Arena | None = None
        self._arena: memoryview | None = None
        self._arena_pos = 0

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
        stored: memoryview | None = None
        if self.size >= ARENA_FROM:
            landed = landed_arena(data)
            if landed is not None and isinstance(data, memoryview) and not data.readonly:
                # Received into a connection's landing arena: kept where it arrived.
                STORED_PREFIX.pack_into(data, 0, base_offset, size - LOG_OVERHEAD, leader_epoch)
                self._arena_run(landed)
                stored = data.toreadonly()
            else:
                stored = self._arena_copy_single(data, size, base_offset, leader_epoch)
        if stored is None:
            prefix = STORED_PREFIX.pack(base_offset, size - LOG_OVERHEAD, leader_epoch)
            rest = memoryview(data)[STORED_PREFIX_SIZE:]
            stored = self._keep_alone(memoryview(b"".join((prefix, rest))))
        self._add(stored, base_offset, header[_LAST_OFFSET_DELTA], header[_MAX_TIMESTAMP])

    def _keep_alone(self, stored: memoryview) -> memoryview:
        """``stored`` kept in an allocation of its own (it ends the run of arena batches)."""
        self._arena_batches_from = len(self._data) + 1
        return stored

    def _arena_copy(self, parts: Sequence[BufferLike], size: int) -> memoryview | None:
        """The batch (``parts`` joined) copied into the segment's arena (None: no arena
        to be had). Regions once handed out are never written again."""
        place = self._arena_region(size)
        if place is None:
            return None
        arena, pos = place
        at = pos
        for part in parts:
            arena[at : at + len(part)] = part
            at += len(part)
        self._arena_pos = pos + size
        return arena[pos : pos + size].toreadonly()

    def _arena_copy_single(
        self, data: BufferLike, size: int, base_offset: int, leader_epoch: int
    ) -> memoryview | None:
        """:meth:`_arena_copy` of one batch as received: copied whole, then its stored
        prefix (base offset, length, leader epoch) written over in the arena (no
        prefix object, no slices of ``data``: this is every produced batch's way)."""
        place = self._arena_region(size)
        if place is None:
            return None
        arena, pos = place
        end = pos + size
        arena[pos:end] = data
        STORED_PREFIX.pack_into(arena, pos, base_offset, size - LOG_OVERHEAD, leader_epoch)
        self._arena_pos = end
        return arena[pos:end].toreadonly()

    def _arena_region(self, size: int) -> tuple[memoryview, int] | None:
        """The arena and position where the next ``size`` bytes go, populated (None: no
        arena to be had); the caller moves ``_arena_pos`` past what it wrote."""
        arena = self._arena
        pos = self._arena_pos
        if arena is None or pos + size > len(arena):
            arena = self._new_arena(size)
            if arena is None:
                return None
            pos = 0
        end = pos + size
        writing = self._writing
        assert writing is not None
        if not self._arenas or self._arenas[-1] is not writing:  # _arena_run, inlined
            # (a new run if landed batches came in between)
            self._arena_run(writing)
        if end > writing.populated:
            writing.populate(end)
        return arena, pos

    def _arena_run(self, arena: Arena) -> None:
        """The next batch is in ``arena``: a new run unless the last one is in it too."""
        if not self._arenas or self._arenas[-1] is not arena:
            self._arenas.append(arena)
            self._arena_firsts.append(len(self._data))

    def _new_arena(self, batch_size: int) -> memoryview | None:
        taken = self._pool.take(arena_size(self.size, batch_size))
        if taken is None:
            return None
        self._arenas.append(taken)
        self._arena_firsts.append(len(self._data))
        self._writing = taken
        self._arena = memoryview(taken.region)
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
        spliceable = first >= self._arena_batches_from
        if spliceable and views:
            # The kernel may keep these pages: the arenas holding them are never reused.
            firsts = self._arena_firsts
            low = bisect.bisect_right(firsts, first) - 1
            for arena in self._arenas[low : bisect.bisect_right(firsts, index - 1)]:
                arena.exposed = True
        return LogSlice(total, tuple(views), spliceable=spliceable)

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
        self._drop_arenas_from(index)
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

    def _drop_arenas_from(self, index: int) -> None:
        """Retire the arenas all of whose batches (those from ``index`` on) went; the one
        being filled stays, its next batch at ``index`` (the regions handed out are not
        written again)."""
        cut = bisect.bisect_left(self._arena_firsts, index)
        for arena in self._arenas[cut:]:
            if arena is not self._writing:
                self._pool.retire(arena)
        del self._arenas[cut:], self._arena_firsts[cut:]
        if self._writing is not None and (
            not self._arenas or self._arenas[-1] is not self._writing
        ):
            self._arenas.append(self._writing)
            self._arena_firsts.append(index)

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)

    def seal(self) -> None:
        self._arena = self._writing = None  # its arenas live on in the batches kept

    def delete(self) -> None:
        """The segment left its log: its arenas go to the pool, to be reused once no view
        of them lives."""
        self._arena = self._writing = None
        arenas, self._arenas, self._arena_firsts = self._arenas, [], []
        for arena in arenas:
            self._pool.retire(arena)


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
        arenas: ArenaPool = ARENA_POOL,
    ) -> None:
        super().__init__(topic, partition, config or LogConfig(), clock)
        self._arena_pool = arenas
        self._snapshots: dict[int, bytes] = {}
        self._segments = [MemorySegment(start_offset, arenas)]
        self._bases = [start_offset]
        self._log_start = self._next_offset = self._high_watermark = start_offset
        self._first_dirty_offset = start_offset

    def _new_segment(self, base_offset: int) -> Segment:
        return MemorySegment(base_offset, self._arena_pool)

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
        segment = MemorySegment(old.base_offset, self._arena_pool)
        for parts, header in batches:
            segment.append_batch(parts, header, header.base_offset)
        segment.aborted = list(old.aborted)
        return segment


class MemoryStorage(Storage):
    """Logs kept in memory, by topic-partition."""

    def __init__(
        self,
        *,
        clock: LogClockMs = wall_ms_int,
        default_config: LogConfig | None = None,
        arenas: ArenaPool = ARENA_POOL,
    ) -> None:
        self._clock = clock
        self._default = default_config or LogConfig()
        self._arenas = arenas
        self._logs: dict[tuple[str, int], MemoryLog] = {}

    def open_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            log = MemoryLog(
                topic, partition, config or self._default, clock=self._clock, arenas=self._arenas
            )
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
            for segment in log.segments:
                segment.delete()  # (its arenas to the pool)

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
