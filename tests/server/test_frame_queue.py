"""FrameQueue: the frames, errors and bookkeeping of FrameDecoder, one copy per frame."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.pages.arenas import ArenaPool
from kafkette.backends.pages.landing import Landing, landed_arena
from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError, ProtocolError
from kafkette.protocol.framing import FrameDecoder
from kafkette.server.net import frame_queue
from kafkette.server.net.frame_queue import FrameQueue

LIMIT = 200


def run(decoder: FrameDecoder | FrameQueue, chunks: list[bytes]) -> list[object]:
    """What a connection sees feeding ``chunks`` one by one and taking every whole frame."""
    events: list[object] = []
    scratch = bytearray(1024)
    for chunk in chunks:
        scratch[: len(chunk)] = chunk
        try:
            decoder.feed(memoryview(scratch)[: len(chunk)])
        except ProtocolError as exc:
            events.append(("feed raised", type(exc), str(exc)))
            return events
        scratch[:] = b"\xee" * len(scratch)  # the buffer is reused by the next read
        while True:
            try:
                frame = decoder.next_frame()
            except ProtocolError as exc:
                events.append(("next_frame raised", type(exc), str(exc)))
                return events
            if frame is None:
                break
            events.append(bytes(frame))
        events.append(("held", decoder.buffered, decoder.has_partial_frame))
    return events


bodies = st.lists(st.binary(max_size=LIMIT), max_size=8)
bad_sizes = st.sampled_from([None, -1, -(2**31), LIMIT + 1, 2**31 - 1])


@settings(max_examples=300, deadline=None)
@given(bodies=bodies, bad=bad_sizes, cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_same_frames_and_errors_as_frame_decoder(
    bodies: list[bytes], bad: int | None, cuts: list[int]
) -> None:
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    if bad is not None:
        stream += struct.pack(">i", bad) + b"\x00" * 10
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(points) if b > a]
    expected = run(FrameDecoder(LIMIT), chunks)
    assert run(FrameQueue(LIMIT), chunks) == expected
    frames = [e for e in expected if isinstance(e, bytes)]
    assert frames == bodies


def test_frames_are_writable_copies() -> None:
    queue = FrameQueue(100)
    data = bytearray(struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"de")
    queue.feed(memoryview(data)[:9])
    data[:] = b"x" * len(data)
    first = queue.next_frame()
    assert first is not None and bytes(first) == b"abc" and not first.readonly
    assert (queue.has_whole_frame, queue.has_partial_frame, queue.buffered) == (False, True, 2)
    queue.feed(memoryview(b"\x00\x02d"))  # the rest of the prefix, half the body
    assert (queue.next_frame(), queue.buffered, queue.has_partial_frame) == (None, 5, True)
    queue.feed(memoryview(b"e"))
    second = queue.next_frame()
    assert second is not None and bytes(second) == b"de"
    assert (queue.next_frame(), queue.buffered, queue.has_partial_frame) == (None, 0, False)


def test_an_error_behind_frames_waits_for_them_and_then_stays() -> None:
    queue = FrameQueue(10)
    queue.feed(memoryview(struct.pack(">i", 1) + b"a" + struct.pack(">i", 11)))
    assert queue.failed
    frame = queue.next_frame()
    assert frame is not None and bytes(frame) == b"a"
    for call in (queue.next_frame, lambda: queue.feed(memoryview(b"more"))):
        with pytest.raises(FrameTooLargeError, match="11"):
            call()
    negative = FrameQueue(10)
    with pytest.raises(InvalidLengthError, match="-2"):
        negative.feed(memoryview(struct.pack(">i", -2)))


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_frame_size"):
        FrameQueue(-1)


def test_a_declared_size_allocates_nothing_before_the_bytes_arrive() -> None:
    """Memory follows the bytes received, never the size a peer declares."""
    import tracemalloc

    queue = FrameQueue(2**31 - 1)
    tracemalloc.start()
    try:
        queue.feed(memoryview(struct.pack(">i", 1 << 30) + b"x" * 1000))
        for _ in range(10):
            queue.feed(memoryview(b"y" * 1000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert (queue.buffered, queue.has_partial_frame, queue.next_frame()) == (11_004, True, None)


def run_landing(queue: FrameQueue, stream: bytes, cuts: list[int]) -> list[object]:
    """What an asyncio connection with a landing sees: each read goes into the rest of a
    frame being received in place when the queue offers it, else into the shared buffer
    (fed); a read takes at most the next cut's size. The frames and errors, then where
    the queue stands at the end."""
    events: list[object] = []
    scratch = bytearray(1024)
    pos = 0
    sizes = iter(cuts)
    while pos < len(stream):
        want = max(1, next(sizes, len(stream)))
        into = queue.receive_buffer()
        try:
            if into is not None:
                n = min(want, len(into), len(stream) - pos)
                into[:n] = stream[pos : pos + n]
                queue.received(n)
            else:
                n = min(want, len(scratch), len(stream) - pos)
                scratch[:n] = stream[pos : pos + n]
                queue.feed(memoryview(scratch)[:n])
                scratch[:] = b"\xee" * len(scratch)
        except ProtocolError as exc:
            events.append(("feed raised", type(exc), str(exc)))
            return events
        pos += n
        while True:
            try:
                frame = queue.next_frame()
            except ProtocolError as exc:
                events.append(("next_frame raised", type(exc), str(exc)))
                return events
            if frame is None:
                break
            landed = landed_arena(frame) is not None
            assert landed == (len(frame) >= LANDED_FROM), "landed by its size"
            events.append(bytes(frame))
    events.append(("held", queue.buffered, queue.has_partial_frame))
    return events


LANDED_FROM = 20


@settings(max_examples=300, deadline=None)
@given(bodies=bodies, bad=bad_sizes, cuts=st.lists(st.integers(0, 300), max_size=40))
def test_landing_frames_are_the_frame_decoders(
    bodies: list[bytes], bad: int | None, cuts: list[int]
) -> None:
    """Frames from LAND_FROM bytes on are received into a landing arena, partly in place;
    the frames, errors and what is held at the end are the decoder's all the same."""
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    if bad is not None:
        stream += struct.pack(">i", bad) + b"\x00" * 10
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_queue, "LAND_FROM", LANDED_FROM)
        landed = run_landing(FrameQueue(LIMIT, Landing(ArenaPool())), stream, cuts)
    expected = run(FrameDecoder(LIMIT), [stream])
    if not isinstance(expected[-1], tuple) or expected[-1][0] != "held":
        expected.append(("held", 0, False))  # (an error: run_landing's last read)

    def outcome(events: list[object]) -> list[object]:
        # (which call raises depends on how the bytes were cut, not on landing)
        return [
            e if isinstance(e, bytes) else ("raised", *e[1:])  # type: ignore[index]
            for e in events
            if not (isinstance(e, tuple) and e[0] == "held")
        ]

    frames_and_errors = outcome(landed)
    assert frames_and_errors == outcome(expected)
    if bad is None:
        assert landed[-1] == expected[-1]
    assert [e for e in landed if isinstance(e, bytes)] == bodies[: len(frames_and_errors)]


def test_a_landing_frame_is_received_in_place() -> None:
    """The bytes after the first read of a large frame are received straight into its
    region (no copy), whose pages are allocated as they come."""
    place = Landing(ArenaPool())
    queue = FrameQueue(1 << 30, place)
    size = 3 << 20
    queue.feed(memoryview(struct.pack(">i", size) + b"a" * 1000))
    into = queue.receive_buffer()
    assert into is not None and len(into) == size - 1000 and not into.readonly
    arena = landed_arena(into)
    assert arena is not None and arena.populated == 2 << 20  # (one 2 MiB step, not 3 MiB)
    into[: size - 1000] = b"b" * (size - 1000)
    queue.received(size - 1000)
    assert queue.receive_buffer() is None
    frame = queue.next_frame()
    assert frame is not None and landed_arena(frame) is arena
    assert bytes(frame) == b"a" * 1000 + b"b" * (size - 1000)
    assert (queue.buffered, queue.has_partial_frame) == (0, False)
    queue.close()
    assert arena.pooled
