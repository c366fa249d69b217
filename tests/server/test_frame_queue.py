"""FrameQueue: the frames, errors and bookkeeping of FrameDecoder, one copy per frame."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError, ProtocolError
from kafkette.protocol.framing import FrameDecoder
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
