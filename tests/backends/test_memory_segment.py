"""MemorySegment keeps batches and last offsets only: its timestamp lookups (which start
where the running maximum timestamp first reaches the target), truncation and headers
read back from the stored bytes agree with a scan of what was appended."""

from __future__ import annotations

import mmap
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends import memory
from kafkette.backends.config import LogConfig
from kafkette.backends.memory import MemoryLog, MemorySegment
from kafkette.backends.pages import arenas
from kafkette.backends.types import TimestampOffset
from tests.backends.helpers import FakeClock, make_batch

BASE = 1_700_000_000_000

batches = st.lists(
    st.lists(st.integers(0, 50), min_size=1, max_size=3),  # record timestamps - BASE
    min_size=1,
    max_size=12,
)


def _expected(appended: list[list[int]], start: int, target: int) -> TimestampOffset | None:
    offset = 0
    for timestamps in appended:
        for ts in timestamps:
            if offset >= start and BASE + ts >= target:
                return TimestampOffset(BASE + ts, offset, 0)
            offset += 1
    return None


@settings(max_examples=60, deadline=None)
@given(batches, st.integers(0, 12), st.integers(-1, 52), st.integers(100, 400))
def test_offset_for_timestamp_matches_a_scan_of_the_records(
    appended: list[list[int]], cut: int, target: int, segment_bytes: int
) -> None:
    """Timestamps out of order, several segments, a log start moved past some records."""
    log = MemoryLog("t", 0, LogConfig(segment_bytes=segment_bytes), clock=FakeClock())
    for timestamps in appended:
        log.append(make_batch([(BASE + ts, b"k", b"v") for ts in timestamps]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    start = min(cut, log.log_end_offset)
    log.delete_records_before(start)
    assert log.offset_for_timestamp(BASE + target) == _expected(
        appended, log.log_start_offset, BASE + target
    )


def test_scan_start_is_the_first_batch_whose_running_maximum_reaches_the_timestamp() -> None:
    segment = MemorySegment(10)
    for ts, count in ((5, 2), (3, 1), (9, 3), (7, 1)):  # offsets 10-11, 12, 13-15, 16
        data = make_batch([(ts, None, b"v")] * count)
        segment.append_single(data, _fields(data), segment.next_offset, 0)
    starts = [segment.timestamp_scan_start(t) for t in (0, 5, 6, 9, 10)]
    assert starts == [10, 10, 13, 13, 17]
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (9, 13)
    segment.truncate_to(16)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp, segment.size) == (
        9,
        13,
        sum(len(make_batch([(ts, None, b"v")] * n)) for ts, n in ((5, 2), (3, 1), (9, 3))),
    )
    assert (segment.first_timestamp, segment.next_offset) == (5, 16)
    segment.truncate_to(13)
    assert segment.offset_of_max_timestamp == 10
    assert (segment.next_offset, segment.max_timestamp, segment.timestamp_scan_start(6)) == (
        13,
        5,
        13,
    )
    assert [(p, h.base_offset, h.max_timestamp) for p, h in segment.headers()] == [
        (0, 10, 5),
        (1, 12, 3),
    ]


def _fields(data: bytes) -> tuple[int, ...]:
    from kafkette.protocol.records.batch_header import HEADER_STRUCT

    return tuple(HEADER_STRUCT.unpack_from(data, 0))


def _stored_batch(index: int, size: int) -> bytes:
    return make_batch([(BASE + index, b"k%d" % index, bytes([index % 251]) * size)])


def test_batches_past_arena_from_are_kept_in_arenas_unchanged() -> None:
    """Past ARENA_FROM bytes a segment copies batches into arenas; what is read back is
    what an exact-size copy keeps, views handed out never change (not even after a
    truncation and more appends), a batch larger than the arena's rest starts a new
    arena (one larger than an arena's usual size too), and only reads of arena batches are
    spliceable."""
    log = MemoryLog("t", 0, LogConfig(max_message_bytes=8 << 20), clock=FakeClock())
    count = memory.ARENA_FROM // 16_000 + 30
    batches = [_stored_batch(i, 16_000) for i in range(count)]
    batches.append(_stored_batch(count, arenas.ARENA_MIN + 1000))
    batches.append(_stored_batch(count + 1, 16_000))
    for data in batches:
        log.append(data, leader_epoch=3)
    expected = [_as_stored(data, offset, 3) for offset, data in enumerate(batches)]
    whole = log.read(0, 1 << 30)
    views = list(whole.buffers)
    assert [bytes(v) for v in views] == expected
    assert all(v.readonly for v in views)
    owners = [v.obj for v in views]
    first_in_arena = [type(o) for o in owners].index(mmap.mmap)
    assert first_in_arena == -(-memory.ARENA_FROM // len(expected[0]))
    assert {type(o) for o in owners[first_in_arena:]} == {mmap.mmap}
    assert len(owners[-2]) == 2 * arenas.POPULATE_STEP  # its own, in whole steps
    assert owners[-2] is not owners[-3] and owners[-1] is owners[-2]
    assert not whole.spliceable
    assert not log.read(first_in_arena - 1, 1 << 30).spliceable
    assert log.read(first_in_arena, 1 << 30).spliceable
    cut = count - 3
    log.truncate_to(cut)
    for i in range(cut, cut + 5):
        log.append(_stored_batch(i + 100, 16_000), leader_epoch=3)
    assert [bytes(v) for v in views] == expected
    again = log.read(0, 1 << 30)
    assert [bytes(v) for v in again.buffers[:cut]] == expected[:cut]
    assert [bytes(v) for v in again.buffers[cut:]] == [
        _as_stored(_stored_batch(i + 100, 16_000), i, 3) for i in range(cut, cut + 5)
    ]
    assert log.read(first_in_arena, 1 << 30).spliceable


def test_a_read_after_a_batch_kept_alone_is_spliceable_only_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When no arena can be had (mapping refused), the batch is kept in a bytes of its
    own and no read that includes it is spliceable; arena batches after it are."""
    log = MemoryLog("t", 0, LogConfig(max_message_bytes=8 << 20), clock=FakeClock())
    count = memory.ARENA_FROM // 16_000 + 2
    for i in range(count):
        log.append(_stored_batch(i, 16_000), leader_epoch=0)
    first_in_arena = -(-memory.ARENA_FROM // len(_stored_batch(0, 16_000)))
    refused = memory.MemorySegment._new_arena
    monkeypatch.setattr(memory.MemorySegment, "_new_arena", lambda self, size: None)
    log.append(_stored_batch(count, arenas.ARENA_MIN), leader_epoch=0)  # needs a new arena
    monkeypatch.setattr(memory.MemorySegment, "_new_arena", refused)
    log.append(_stored_batch(count + 1, 16_000), leader_epoch=0)
    views = log.read(0, 1 << 30).buffers
    assert [type(v.obj) for v in views[first_in_arena:]] == [mmap.mmap] * (
        count - first_in_arena
    ) + [bytes, mmap.mmap]
    assert log.read(first_in_arena, 1 << 30).spliceable is False
    assert log.read(count, 1 << 30).spliceable is False
    assert log.read(count + 1, 1 << 30).spliceable is True


def _as_stored(data: bytes, offset: int, epoch: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">qii", out, 0, offset, len(data) - 12, epoch)
    return bytes(out)
