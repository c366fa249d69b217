"""Landing arenas: regions a connection receives requests into, kept by memory logs.

A region is handed out once; the arena is received into again from its start
only when nothing sees it (no view, no spliceable read), else it goes to the
pool and the connection takes another. A memory log past ``ARENA_FROM`` keeps
a landed batch where it arrived (its prefix rewritten in place) and reads back
exactly what it was given; anything else it copies, as before.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from kafkette.backends import memory
from kafkette.backends.config import LogConfig
from kafkette.backends.memory import MemoryLog, MemoryStorage
from kafkette.backends.pages import landing
from kafkette.backends.pages.arenas import POPULATE_STEP, ArenaPool
from kafkette.backends.pages.landing import LANDING_SIZE, Landing, landed_arena
from kafkette.backends.pages.populator import POPULATOR
from tests.backends.helpers import FakeClock, sized_batch, stored_form

MiB = 1 << 20


def _land(place: Landing, data: bytes) -> memoryview:
    """``data`` received into a region of ``place``, as a connection does."""
    region = place.region(len(data))
    assert region is not None
    place.reach(region, len(data))
    region[:] = data
    return region


def test_regions_follow_each_other_and_the_arena_is_reused_only_when_unseen() -> None:
    """Consecutive regions of one arena; when the next does not fit, the same arena from
    its start if no view of it lives, else a new one (the old one to the pool)."""
    pool = ArenaPool()
    place = Landing(pool)
    first = place.region(3 * MiB)
    second = place.region(3 * MiB)
    assert first is not None and second is not None
    place.reach(second, 3 * MiB)  # (pages allocated: the pool keeps only such arenas)
    arena = landed_arena(first)
    assert arena is not None and landed_arena(second) is arena
    assert arena.size == LANDING_SIZE and arena.landing
    first[:3] = b"abc"
    second[:3] = b"xyz"
    assert bytes(first[:3]) == b"abc"  # no overlap
    del first, second
    third = place.region(3 * MiB)  # (6 + 3 > 8 MiB)
    assert third is not None and landed_arena(third) is arena  # reused in place
    kept = third[:10].toreadonly()
    place.region(3 * MiB)
    fourth = place.region(3 * MiB)  # does not fit; the arena is still seen
    assert fourth is not None
    other = landed_arena(fourth)
    assert other is not None and other is not arena
    assert arena.pooled and pool.kept == 1
    assert pool.take(MiB) is not arena  # not while the view lives
    del kept, third
    again = pool.take(MiB)
    assert again is arena and not again.landing and landed_arena(memoryview(again.region)) is None


def test_an_exposed_arena_is_not_received_into_again() -> None:
    """The kernel may still hold pages a spliceable read covered: a new arena instead, and
    the pool does not keep it."""
    pool = ArenaPool()
    place = Landing(pool)
    region = place.region(5 * MiB)
    assert region is not None
    arena = landed_arena(region)
    assert arena is not None
    place.reach(region, 5 * MiB)
    arena.exposed = True
    del region
    nxt = place.region(5 * MiB)
    assert nxt is not None and landed_arena(nxt) is not arena
    assert pool.kept == 0


def test_only_views_of_landing_arenas_are_landed() -> None:
    place = Landing(ArenaPool())
    region = place.region(LANDING_SIZE + 1)  # a larger request: an arena of its size
    assert region is not None
    arena = landed_arena(region)
    assert arena is not None and arena.size == LANDING_SIZE + POPULATE_STEP
    assert landed_arena(region[5:9]) is arena
    assert landed_arena(bytes(region[:5])) is None
    assert landed_arena(bytearray(5)) is None
    assert landed_arena(memoryview(bytearray(5))) is None
    assert place.region(landing.LAND_MAX + 1) is None  # received as before


def test_reach_allocates_pages_as_bytes_come_not_for_the_declared_size() -> None:
    place = Landing(ArenaPool())
    region = place.region(40 * MiB)
    assert region is not None
    arena = landed_arena(region)
    assert arena is not None
    place.reach(region, 1000)
    assert arena.populated == POPULATE_STEP
    place.reach(region, 3 * MiB)
    assert arena.populated == 2 * POPULATE_STEP


def _log(pool: ArenaPool, monkeypatch: pytest.MonkeyPatch, **config: int) -> MemoryLog:
    monkeypatch.setattr(memory, "ARENA_FROM", 0)  # arena batches from the first one
    settings_ = {"segment_bytes": 64 * MiB, "max_message_bytes": 8 * MiB, **config}
    return MemoryLog("t", 0, LogConfig(**settings_), clock=FakeClock(), arenas=pool)


def test_a_memory_log_keeps_landed_batches_where_they_arrived(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No copy: the stored batch is the received region, prefix rewritten (base offset,
    length, leader epoch), read-only; reads return exactly the stored bytes, interleaved
    with batches the log copied (the in-process transport's bytes)."""
    pool = ArenaPool()
    log = _log(pool, monkeypatch)
    place = Landing(pool)
    sent = [sized_batch(i, 200_000) for i in range(6)]
    expected: list[bytes] = []
    for i, data in enumerate(sent):
        offset = log.log_end_offset
        if i % 3 == 2:
            log.append(data, leader_epoch=4)  # bytes of its own: copied
        else:
            log.append(_land(place, data), leader_epoch=4)
        expected.append(stored_form(data, offset, 4))
    log.update_high_watermark(log.log_end_offset)
    segment = log.segments[-1]
    stored = [segment.batch_bytes(p, 0) for p, _ in segment.headers()]
    landed = [landed_arena(v) for v in stored]
    assert [a is not None for a in landed] == [True, True, False, True, True, False]
    assert all(isinstance(v, memoryview) and v.readonly for v in stored)
    assert [bytes(v) for v in stored] == expected
    read = log.read(0, 1 << 30)
    assert read.spliceable and read.to_bytes() == b"".join(expected)
    assert landed[0] is not None and landed[0].exposed  # the read covered it


def test_the_landing_arena_of_a_deleted_log_is_reused_once_its_batches_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deleting the log lets its batches go: the connection receives into the same arena
    again (nothing sees it), and what the new log keeps reads back exactly."""
    pool = ArenaPool()
    monkeypatch.setattr(memory, "ARENA_FROM", 0)
    storage = MemoryStorage(
        clock=FakeClock(), default_config=LogConfig(max_message_bytes=8 * MiB), arenas=pool
    )
    place = Landing(pool)
    log = storage.open_log("t", 0)
    first = _land(place, sized_batch(1, 3 * MiB))
    arena = landed_arena(first)
    log.append(first)
    del first
    storage.delete_log("t", 0)
    log = storage.open_log("t", 0)
    _land(place, sized_batch(2, 3 * MiB))  # fills the arena to 6 MiB
    data = sized_batch(3, 3 * MiB)
    again = _land(place, data)  # does not fit: the arena from its start
    assert landed_arena(again) is arena
    log.append(again, leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    assert log.read(0, 1 << 30).to_bytes() == stored_form(data, 0, 1)


def test_truncation_across_landed_batches_keeps_the_rest_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = ArenaPool()
    log = _log(pool, monkeypatch)
    place = Landing(pool)
    kept = []
    for i in range(3):
        data = sized_batch(i, 100_000)
        kept.append(stored_form(data, log.log_end_offset, 0))
        log.append(_land(place, data) if i != 1 else data, leader_epoch=0)
    for i in range(3):
        log.append(_land(place, sized_batch(10 + i, 100_000)), leader_epoch=0)
    log.truncate_to(3)
    new = []
    for i in range(3):
        data = sized_batch(20 + i, 150_000)
        new.append(stored_form(data, log.log_end_offset, 0))
        log.append(_land(place, data) if i else data, leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.read(0, 1 << 30).to_bytes() == b"".join(kept + new)


def test_once_requests_are_kept_the_next_arena_is_taken_and_populated_ahead() -> None:
    """A connection whose full arena is still seen (a memory log keeps what it receives)
    takes its next arena once the current one is half full, and the populator thread
    allocates that arena's first step meanwhile; a connection whose arenas are reused in
    place (nothing kept) takes none ahead."""
    pool = ArenaPool()
    place = Landing(pool)
    first = _land(place, bytes(5 * MiB))
    second = _land(place, bytes(5 * MiB))  # the first is still seen: another arena
    current = landed_arena(second)
    assert current is not None and current is not landed_arena(first)
    spare = place._spare  # type: ignore[attr-defined]
    assert spare is not None and spare is not current and spare.landing
    assert spare.requested == POPULATE_STEP
    assert POPULATOR.wait_idle(30)
    assert spare.ahead_done == POPULATE_STEP
    third = _land(place, bytes(MiB))  # (fits in the current one)
    assert landed_arena(third) is current
    fourth = _land(place, bytes(3 * MiB))
    assert landed_arena(fourth) is spare
    # the thread is asked for AHEAD (two steps) past what is about to be received: up
    # to 7 MiB, rounded to the arena's 8 (one step after the one reached: 6 MiB)
    assert spare.requested == 8 * MiB
    assert bytes(first) == bytes(second) == bytes(5 * MiB)

    reused = Landing(ArenaPool())
    for _ in range(4):
        _land(reused, bytes(5 * MiB))  # (nothing holds the regions)
    assert reused._spare is None  # type: ignore[attr-defined]


def _lazy_free(address: int) -> int:
    """Bytes of the mapping at ``address`` the kernel may take back (``LazyFree`` in
    ``/proc/self/smaps``)."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "LazyFree:":
                return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found")


def test_an_arena_received_into_again_may_be_taken_back_until_written() -> None:
    """Reused in place, the arena's pages are given to the kernel to take back under
    memory pressure (MADV_FREE), so a connection gone quiet holds nothing it must keep;
    what is received next reads back exactly."""
    place = Landing(ArenaPool())
    first = _land(place, b"a" * (5 * MiB))
    arena = landed_arena(first)
    assert arena is not None and arena.address is not None
    del first
    assert POPULATOR.wait_idle(30)
    assert _lazy_free(arena.address) == 0
    second = place.region(5 * MiB)
    assert second is not None and landed_arena(second) is arena  # in place
    assert _lazy_free(arena.address) >= 5 * MiB  # (the pages the first request wrote)
    place.reach(second, 5 * MiB)
    second[:] = b"b" * (5 * MiB)
    assert _lazy_free(arena.address) < MiB + 512 * 1024  # written again: kept
    assert bytes(second) == b"b" * (5 * MiB)


def test_deleting_a_log_frees_the_landing_arenas_the_pool_does_not_keep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no room in the pool, a landing arena whose connection closed and whose
    batches a deleted log held is unmapped: nothing refers to it any more."""
    pool = ArenaPool(0)
    monkeypatch.setattr(memory, "ARENA_FROM", 0)
    storage = MemoryStorage(
        clock=FakeClock(), default_config=LogConfig(max_message_bytes=8 * MiB), arenas=pool
    )
    place = Landing(pool)
    log = storage.open_log("t", 0)
    for i in range(3):
        log.append(_land(place, sized_batch(i, MiB)))
    arena = landed_arena(log.segments[-1].batch_bytes(0, 0))  # type: ignore[attr-defined]
    assert arena is not None
    region = weakref.ref(arena.region)
    del arena
    place.close()
    assert region() is not None  # the log's batches hold it
    storage.delete_log("t", 0)
    del log
    assert POPULATOR.wait_idle(30)
    gc.collect()
    assert region() is None
