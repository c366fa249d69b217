"""The arena pool against a plain model, and memory logs whose arenas are reused.

An arena may be handed out again only once its owner retired it, no view of it
lives and no read that the server may splice covered it; whatever is read back
is exactly what was written, never an older batch's bytes.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkette.backends import memory
from kafkette.backends.config import LogConfig
from kafkette.backends.memory import MemoryLog, MemoryStorage
from kafkette.backends.pages import arenas
from kafkette.backends.pages.arenas import POPULATE_STEP, Arena, ArenaPool, arena_size
from kafkette.backends.pages.populator import POPULATOR
from tests.backends.helpers import FakeClock, sized_batch, stored_form

MiB = 1 << 20


def test_arena_sizes_grow_with_the_segment_in_powers_of_two() -> None:
    """An eighth of the segment as a power of two from 2 MiB to 64 MiB, or the batch's
    size in whole populate steps when it is larger."""
    assert arena_size(0, 100) == 2 * MiB
    assert arena_size(16 * MiB, 100) == 2 * MiB
    assert arena_size(17 * MiB, 100) == 4 * MiB
    assert arena_size(100 * MiB, 100) == 16 * MiB
    assert arena_size(1 << 30, 100) == 64 * MiB
    assert arena_size(1 << 40, 100) == 64 * MiB
    assert arena_size(0, 2 * MiB) == 2 * MiB
    assert arena_size(0, 5 * MiB) == 6 * MiB
    assert arena_size(1 << 30, 65 * MiB) == 66 * MiB


def _resident(arena: Arena) -> int:
    """Bytes of the arena's pages present in memory (``/proc/self/pagemap``: a 64-bit
    entry per page, bit 63 set when present)."""
    assert arena.address is not None
    page = mmap.PAGESIZE
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(arena.address // page * 8)
        entries = pagemap.read(arena.size // page * 8)
    present = sum(entry >> 63 for (entry,) in struct.iter_unpack("<Q", entries))
    return present * page


def test_populate_allocates_the_step_reached_and_asks_the_thread_for_the_next() -> None:
    """The writer's first step is allocated before the call returns; the next one by the
    populator thread, and the writer's next call finds it done. Nothing is asked past the
    arena's end."""
    arena = arenas.new_arena(3 * POPULATE_STEP)
    assert arena is not None
    assert _resident(arena) == 0
    arena.populate(1)
    assert (arena.populated, arena.requested) == (POPULATE_STEP, 2 * POPULATE_STEP)
    assert POPULATOR.wait_idle(30)
    assert arena.ahead_done == 2 * POPULATE_STEP
    assert _resident(arena) == 2 * POPULATE_STEP
    arena.populate(POPULATE_STEP + 1)
    assert (arena.populated, arena.requested) == (2 * POPULATE_STEP, 3 * POPULATE_STEP)
    arena.populate(10 * POPULATE_STEP)
    assert (arena.populated, arena.requested) == (3 * POPULATE_STEP, 3 * POPULATE_STEP)
    assert POPULATOR.wait_idle(30)
    assert _resident(arena) == 3 * POPULATE_STEP
    arena.settle()
    assert arena.populated == 3 * POPULATE_STEP


def test_a_step_asked_of_the_thread_is_left_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer does not allocate a step the thread was asked for (while the thread is
    late, the copy's own page faults allocate what it touches), and what it writes there
    reads back."""
    asked: list[tuple[int, int]] = []

    def late(target: object, start: int, stop: int) -> bool:
        asked.append((start, stop))
        return True  # and never done

    monkeypatch.setattr(POPULATOR, "request", late)
    arena = arenas.new_arena(3 * POPULATE_STEP)
    assert arena is not None
    arena.populate(1)
    assert asked == [(POPULATE_STEP, 2 * POPULATE_STEP)]
    assert _resident(arena) == POPULATE_STEP  # the first step, by the writer
    arena.populate(POPULATE_STEP + 1)
    assert asked[1:] == [(2 * POPULATE_STEP, 3 * POPULATE_STEP)]
    assert _resident(arena) == POPULATE_STEP  # the second left to the (late) thread
    view = memoryview(arena.region)
    view[POPULATE_STEP : POPULATE_STEP + 5] = b"hello"
    assert _resident(arena) == POPULATE_STEP + mmap.PAGESIZE
    assert bytes(view[POPULATE_STEP : POPULATE_STEP + 6]) == b"hello\x00"


def test_the_populator_leaves_bytes_already_written_as_they_are() -> None:
    """Allocating pages that hold batches (the thread and the writer may overlap) changes
    none of their bytes."""
    arena = arenas.new_arena(2 * POPULATE_STEP)
    assert arena is not None
    view = memoryview(arena.region)
    payload = bytes(range(256)) * (POPULATE_STEP // 256 + 7)
    arena.populate(len(payload))
    view[: len(payload)] = payload
    assert POPULATOR.request(arena, 0, 2 * POPULATE_STEP)
    assert POPULATOR.wait_idle(30)
    assert bytes(view[: len(payload)]) == payload
    assert bytes(view[len(payload) :]) == bytes(2 * POPULATE_STEP - len(payload))


def test_in_use_tells_whether_any_view_of_the_mapping_lives() -> None:
    arena = arenas.new_arena(POPULATE_STEP)
    assert arena is not None
    assert not arena.in_use()
    whole = memoryview(arena.region)
    part = whole[10:20].toreadonly()
    assert arena.in_use()
    del whole
    assert arena.in_use()  # a slice keeps the mapping's buffer exported
    copied = bytes(part)
    del part
    assert not arena.in_use()
    assert copied == bytes(10)


def test_a_pool_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError, match="max_bytes must be >= 0, got -1"):
        ArenaPool(-1)


@dataclass
class _Owned:
    """An arena taken from the pool, as the model sees it."""

    arena: Arena
    size: int
    pos: int = 0
    exposed: bool = False
    views: list[tuple[memoryview, bytes]] = field(default_factory=list)

    @property
    def populated(self) -> int:
        return min(-(-self.pos // POPULATE_STEP) * POPULATE_STEP, self.size)


class PoolMachine(RuleBasedStateMachine):
    """An :class:`ArenaPool` driven by takes, writes, reads that expose, retirements and
    views let go, against a model: a list of retired arenas with their allocated bytes
    and live views."""

    def __init__(self) -> None:
        super().__init__()
        self.limit = 3 * POPULATE_STEP
        self.pool = ArenaPool(self.limit)
        self.owned: list[_Owned] = []
        self.retired: list[_Owned] = []  # kept by the pool, as the model says
        self.let_go: list[_Owned] = []  # retired and not kept: views may still live
        self.counter = 0

    def _live(self) -> list[_Owned]:
        return self.owned + self.retired + self.let_go

    @rule(size=st.sampled_from([POPULATE_STEP, 2 * POPULATE_STEP]))
    def take(self, size: int) -> None:
        candidates = [o for o in self.retired if o.size >= size and not o.views and not o.exposed]
        arena = self.pool.take(size)
        assert arena is not None
        if candidates:
            smallest = min(o.size for o in candidates)
            chosen = [o for o in candidates if o.arena is arena]
            assert chosen and chosen[0].size == smallest, "not the smallest free arena"
            owned = chosen[0]
            self.retired.remove(owned)
            owned.pos = 0  # old bytes stay, but no view covers them
        else:
            assert all(o.arena is not arena for o in self._live()), "an arena handed out twice"
            assert arena.populated == 0 and not arena.exposed
            owned = _Owned(arena, size)
        assert arena.size == owned.size >= size
        self.owned.append(owned)

    @precondition(lambda self: self.owned)
    @rule(data=st.data(), length=st.integers(1, POPULATE_STEP // 2))
    def write(self, data: st.DataObject, length: int) -> None:
        owned = data.draw(st.sampled_from(self.owned))
        if owned.pos + length > owned.size:
            return
        self.counter += 1
        payload = struct.pack(">I", self.counter) * (-(-length // 4))
        payload = payload[:length]
        start, end = owned.pos, owned.pos + length
        owned.arena.populate(end)
        # (a reused arena may have more pages already)
        assert owned.arena.populated >= min(-(-end // POPULATE_STEP) * POPULATE_STEP, owned.size)
        assert POPULATOR.wait_idle(30)  # (what the pool counts is then the same every run)
        writable = memoryview(owned.arena.region)
        writable[start:end] = payload
        owned.views.append((writable[start:end].toreadonly(), payload))
        del writable
        owned.pos = end

    @precondition(lambda self: self.owned)
    @rule(data=st.data())
    def expose(self, data: st.DataObject) -> None:
        """A read the server may splice covered it."""
        owned = data.draw(st.sampled_from(self.owned))
        owned.arena.exposed = owned.exposed = True

    @precondition(lambda self: self.owned)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        owned = data.draw(st.sampled_from(self.owned))
        self.owned.remove(owned)
        kept = sum(o.arena.populated for o in self.retired)
        self.pool.retire(owned.arena)
        populated = owned.arena.populated
        if owned.exposed or not populated or kept + populated > self.limit:
            self.let_go.append(owned)
        else:
            self.retired.append(owned)

    @precondition(lambda self: any(o.views for o in self._live()))
    @rule(data=st.data())
    def drop_view(self, data: st.DataObject) -> None:
        owned = data.draw(st.sampled_from([o for o in self._live() if o.views]))
        owned.views.pop(data.draw(st.integers(0, len(owned.views) - 1)))

    @invariant()
    def views_read_what_was_written(self) -> None:
        for owned in self._live():
            for view, payload in owned.views:
                assert bytes(view) == payload

    @invariant()
    def kept_bytes_match_the_model(self) -> None:
        assert self.pool.kept == len(self.retired)
        assert self.pool.kept_bytes == sum(o.arena.populated for o in self.retired)
        assert self.pool.kept_bytes <= self.limit


PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_pool_against_a_model = PoolMachine.TestCase


# -- memory logs reusing arenas -------------------------------------------------------


def _log(pool: ArenaPool, monkeypatch: pytest.MonkeyPatch, **config: int) -> MemoryLog:
    monkeypatch.setattr(memory, "ARENA_FROM", 0)  # every batch into an arena
    settings_ = {"segment_bytes": 3 * MiB, "max_message_bytes": 8 * MiB, **config}
    return MemoryLog("t", 0, LogConfig(**settings_), clock=FakeClock(), arenas=pool)


def _stored_views(log: MemoryLog) -> list[memoryview]:
    """The log's batches from its start, as stored, without a read (a read of arena
    batches is spliceable: it would keep their arenas from reuse)."""
    return [
        memoryview(segment.batch_bytes(position, header.size))
        for segment in log.segments
        for position, header in segment.headers()
        if header.last_offset >= log.log_start_offset
    ]


def _regions(log: MemoryLog) -> list[object]:
    return [view.obj for view in _stored_views(log)]


def _read_all(log: MemoryLog, start: int) -> list[bytes]:
    """Every batch from ``start`` on, through reads as a fetch makes them."""
    out: list[bytes] = []
    offset = start
    while offset < log.log_end_offset:
        views = log.read(offset, 1 << 40).buffers
        out += [bytes(v) for v in views]
        (base,) = struct.unpack_from(">q", views[-1])
        (delta,) = struct.unpack_from(">i", views[-1], 23)
        offset = base + delta + 1
    return out


def _append(log: MemoryLog, batches: list[bytes]) -> list[bytes]:
    """Append ``batches``; what the log must hold for them."""
    stored = []
    for data in batches:
        offset = log.log_end_offset
        log.append(data, leader_epoch=2)
        stored.append(stored_form(data, offset, 2))
    log.update_high_watermark(log.log_end_offset)
    return stored


def test_deleted_segments_arenas_are_reused_and_read_back_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeleteRecords drops the first segments; once nothing sees their arenas, the next
    segments are written into them (the same mappings, pages allocated), and reads return
    exactly the new batches: shorter ones than before, so an old batch's tail lies past
    each new one in the arena, and none of it is read."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch)
    old = _append(log, [sized_batch(i, 300_000) for i in range(25)])  # 10 a segment, 6 an arena
    old_regions = {id(r): r for r in _regions(log)}
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    assert len(old_regions) == 5
    log.delete_records_before(20)
    assert pool.kept == 4  # the active segment's arena stays in use
    assert pool.kept_bytes == 4 * 2 * MiB
    start = log.log_start_offset
    new = _append(log, [sized_batch(100 + i, 100_000 + 7 * i) for i in range(40)])
    reused = [r for r in _regions(log) if id(r) in old_regions]
    assert reused, "no arena of the deleted segments was reused"
    assert _read_all(log, start) == old[start:] + new
    last = log.read(log.segments[-1].base_offset, 1 << 40)
    expected = new[log.segments[-1].base_offset - log.log_end_offset :]
    assert last.to_bytes() == b"".join(expected)
    assert last.size == sum(len(b) for b in expected)


def test_a_view_still_held_keeps_its_arena_from_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch answer (or a record an in-process consumer kept) still holding a view of a
    deleted segment's batch: its arena is not written again, the view keeps its bytes."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch)
    old = _append(log, [sized_batch(i, 300_000) for i in range(12)])
    held = _stored_views(log)[0]
    held_region = held.obj
    log.delete_records_before(10)
    assert pool.kept == 2
    new = _append(log, [sized_batch(100 + i, 300_000) for i in range(12)])
    regions = _regions(log)
    assert all(r is not held_region for r in regions)
    assert pool.kept == 1  # the other arena of segment 0 was reused
    assert bytes(held) == old[0]
    assert _read_all(log, 10) == old[10:] + new


def test_an_arena_a_spliceable_read_covered_is_never_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel may hold spliced pages until the peer reads them: the arenas a
    spliceable read covered are let go, not reused, while an unread one is."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch)
    _append(log, [sized_batch(i, 300_000) for i in range(11)])  # segment 0: 2 arenas
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert len({id(r) for r in _regions(log)[:10]}) == 2
    read = log.read(0, 1, upper_bound=2)  # the first batch only
    assert read.spliceable and len(read.buffers) == 1
    exposed_region = read.buffers[0].obj
    del read
    log.delete_records_before(10)
    assert pool.kept == 1  # the exposed arena was let go
    new = _append(log, [sized_batch(100 + i, 300_000) for i in range(30)])
    assert all(r is not exposed_region for r in _regions(log))
    assert pool.kept == 0
    assert _read_all(log, 11) == new


def test_truncation_retires_the_arenas_it_empties(monkeypatch: pytest.MonkeyPatch) -> None:
    """Truncating the active segment back across an arena retires the arenas left with no
    batch (not the one being filled, whose regions handed out are not written again);
    later batches read back exactly."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch, segment_bytes=64 * MiB)
    kept = _append(log, [sized_batch(i, 500_000) for i in range(4)])  # arena 1 (2 MiB)
    _append(log, [sized_batch(10 + i, 500_000) for i in range(12)])  # arenas 2, 3, ...
    arenas_before = len(log.segments[-1]._arenas)  # type: ignore[attr-defined]
    assert arenas_before >= 3
    log.truncate_to(len(kept))
    assert pool.kept == arenas_before - 2  # all but the first and the one being filled
    new = _append(log, [sized_batch(50 + i, 400_000) for i in range(12)])
    assert _read_all(log, 0) == kept + new


def test_retention_reuses_arenas_when_no_one_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log kept to a size by retention.bytes, written for many segments: after the
    first deletions, new arenas come from the pool; every read is exact."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch, retention_bytes=6 * MiB)
    seen: set[int] = set()
    reused = 0
    written: list[bytes] = []
    for round_ in range(8):
        batches = [sized_batch(round_ * 100 + i, 250_000) for i in range(12)]  # a segment each
        written += _append(log, batches)
        assert log.enforce_retention() == (1 if round_ >= 3 else 0)
        fresh = {id(r) for r in _regions(log)[-len(batches) :]}
        reused += len(fresh & seen)
        seen |= fresh
        assert [bytes(v) for v in _stored_views(log)] == written[log.log_start_offset :]
    assert reused >= 6
    assert _read_all(log, log.log_start_offset) == written[log.log_start_offset :]


def test_a_deleted_memory_log_gives_its_arenas_to_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deleting a topic's log retires its arenas; a new log of the same name starts
    empty and reads back exactly what it is given."""
    pool = ArenaPool()
    monkeypatch.setattr(memory, "ARENA_FROM", 0)
    storage = MemoryStorage(
        clock=FakeClock(), default_config=LogConfig(max_message_bytes=8 * MiB), arenas=pool
    )
    log = storage.open_log("t", 0)
    for i in range(8):
        log.append(sized_batch(i, 300_000), leader_epoch=0)
    storage.delete_log("t", 0)
    assert pool.kept == 2  # 6 batches in the first arena, 2 in the second
    again = storage.open_log("t", 0)
    assert again.log_end_offset == 0
    data = sized_batch(99, 123_456)
    again.append(data, leader_epoch=0)
    assert pool.kept == 2  # the deleted log's batches are still seen through ``log``
    del log
    more = sized_batch(98, 2 * MiB - 100_000)  # needs a new arena: one of the deleted log's
    again.append(more, leader_epoch=0)
    assert pool.kept == 1
    assert again.read(0, 1 << 40).to_bytes() == stored_form(data, 0, 0) + stored_form(more, 1, 0)
