"""Tests for kafkette.protocol.framing: int32 size-prefixed frames."""

from __future__ import annotations

import array
import struct
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol import framing
from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError, ProtocolError
from kafkette.protocol.framing import RECEIVE_ROOM, FrameDecoder, encode_frame, frame_parts


def _size(n: int) -> bytes:
    return struct.pack(">i", n)


def _drain(decoder: FrameDecoder) -> list[bytes]:
    return [bytes(frame) for frame in decoder]


def _next(decoder: FrameDecoder) -> bytes | None:
    frame = decoder.next_frame()
    return None if frame is None else bytes(frame)


# -- encoding ------------------------------------------------------------------


def test_encode_frame_prefixes_the_size() -> None:
    """encode_frame writes the big-endian int32 length, then the body."""
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(bytearray(b"\x01\x02")) == b"\x00\x00\x00\x02\x01\x02"
    assert encode_frame(memoryview(b"xyz")[1:]) == b"\x00\x00\x00\x02yz"
    assert encode_frame(b"x" * 300) == b"\x00\x00\x01\x2c" + b"x" * 300


def test_frame_parts_puts_the_size_first_without_copying() -> None:
    """frame_parts returns [size, *parts], the parts being the very objects given."""
    body = memoryview(b"hello")
    tail = bytearray(b"!!")
    parts = frame_parts([b"ab", body, tail])
    assert parts[0] == b"\x00\x00\x00\x09"
    assert parts[1:] == [b"ab", body, tail]
    assert parts[2] is body
    assert parts[3] is tail
    assert b"".join(parts) == encode_frame(b"abhello!!")
    assert frame_parts([]) == [b"\x00\x00\x00\x00"]


def test_frame_parts_counts_bytes_not_items() -> None:
    """A memoryview with multi-byte items counts its bytes, not its items."""
    ints = memoryview(array.array("i", [1, 2, 3]))
    assert ints.nbytes == 3 * ints.itemsize
    assert frame_parts([ints])[0] == _size(ints.nbytes)
    assert encode_frame(ints) == _size(ints.nbytes) + ints.tobytes()


# -- decoding ------------------------------------------------------------------


def test_decodes_frames_fed_whole() -> None:
    """Several frames in one chunk come out in order, without their size prefix."""
    decoder = FrameDecoder(max_frame_size=1024)
    decoder.feed(encode_frame(b"first") + encode_frame(b"") + encode_frame(b"third!"))
    assert decoder.buffered == 9 + 4 + 10
    assert _drain(decoder) == [b"first", b"", b"third!"]
    assert decoder.next_frame() is None
    assert decoder.buffered == 0
    assert not decoder.has_partial_frame


def test_one_byte_at_a_time() -> None:
    """Bytes fed one by one yield each frame exactly when its last byte arrives."""
    frames = [b"hello", b"", b"x" * 70, b"\x00\x00\x00\x05"]
    stream = b"".join(encode_frame(f) for f in frames)
    ends = []
    position = 0
    for frame in frames:
        position += 4 + len(frame)
        ends.append(position)
    decoder = FrameDecoder(max_frame_size=100)
    out: list[tuple[int, bytes]] = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        out.extend((i + 1, bytes(frame)) for frame in decoder)
        assert decoder.has_partial_frame == ((i + 1) not in ends)
    assert out == list(zip(ends, frames, strict=True))
    assert decoder.buffered == 0


@settings(max_examples=60, deadline=None)
@given(
    frames=st.lists(st.binary(max_size=300), max_size=12),
    data=st.data(),
)
def test_arbitrary_chunking(frames: list[bytes], data: st.DataObject) -> None:
    """Any split of the stream into chunks yields the same frames, in order."""
    stream = b"".join(encode_frame(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=20)))
    chunk_kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    decoder = FrameDecoder(max_frame_size=300)
    out: list[bytes] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        decoder.feed(chunk_kind(stream[start:cut]))
        start = cut
        out.extend(_drain(decoder))
    assert out == frames
    assert decoder.buffered == 0
    assert not decoder.has_partial_frame


def test_frames_are_not_changed_by_later_feeds() -> None:
    """A returned frame keeps its bytes whatever the decoder receives afterwards."""
    decoder = FrameDecoder(max_frame_size=1 << 20)
    decoder.feed(encode_frame(b"small") + encode_frame(b"A" * 1000)[:10])
    small = decoder.next_frame()
    assert small is not None
    assert small.tobytes() == b"small"
    decoder.feed(encode_frame(b"A" * 1000)[10:])
    large = decoder.next_frame()  # the tail of the buffer: handed over, not copied
    assert large is not None
    assert large.tobytes() == b"A" * 1000
    decoder.feed(encode_frame(b"B" * 1000) + encode_frame(b"C" * 5))
    assert _drain(decoder) == [b"B" * 1000, b"C" * 5]
    assert small.tobytes() == b"small"
    assert large.tobytes() == b"A" * 1000


def test_buffered_and_partial_frame_tracking() -> None:
    """buffered counts held bytes; has_partial_frame is true only for an incomplete frame."""
    decoder = FrameDecoder(max_frame_size=100)
    assert (decoder.buffered, decoder.has_partial_frame) == (0, False)
    decoder.feed(b"\x00\x00")
    assert (decoder.buffered, decoder.has_partial_frame) == (2, True)
    decoder.feed(b"\x00\x03ab")
    assert (decoder.buffered, decoder.has_partial_frame) == (6, True)
    assert decoder.next_frame() is None
    decoder.feed(b"c")
    # complete but not yet taken: nothing is missing
    assert (decoder.buffered, decoder.has_partial_frame) == (7, False)
    assert _next(decoder) == b"abc"
    assert (decoder.buffered, decoder.has_partial_frame) == (0, False)
    decoder.feed(b"")
    assert (decoder.buffered, decoder.has_partial_frame) == (0, False)


def test_empty_frames() -> None:
    """A size of 0 is a valid, empty frame, even with a limit of 0."""
    decoder = FrameDecoder(max_frame_size=0)
    decoder.feed(_size(0) * 3)
    frames = list(decoder)
    assert [bytes(f) for f in frames] == [b"", b"", b""]
    with pytest.raises(FrameTooLargeError):
        decoder.feed(_size(1))


# -- limits ------------------------------------------------------------------


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    """A body of exactly max_frame_size bytes is a frame; one more byte is refused."""
    decoder = FrameDecoder(max_frame_size=10)
    decoder.feed(encode_frame(b"0123456789"))
    assert _next(decoder) == b"0123456789"
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(_size(11))
    assert (info.value.size, info.value.limit) == (11, 10)


def test_oversized_declared_size_is_refused_on_its_fourth_byte() -> None:
    """A declared 2 GiB frame raises as soon as the four size bytes are known."""
    decoder = FrameDecoder(max_frame_size=1 << 20)
    header = _size(2**31 - 1)
    for byte in header[:3]:
        decoder.feed(bytes([byte]))
    assert decoder.buffered == 3
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(header[3:])
    assert (info.value.size, info.value.limit) == (2**31 - 1, 1 << 20)
    assert decoder.buffered == 4


def test_http_request_is_refused() -> None:
    """An HTTP request sent to a Kafka port reads as a 1,195,725,856-byte frame."""
    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(b"GET / HTTP/1.1\r\nHost: localhost:9092\r\n\r\n")
    assert info.value.size == 1_195_725_856
    assert str(info.value) == ("frame of 1195725856 bytes exceeds the limit of 104857600 bytes")


def test_tls_client_hello_is_refused() -> None:
    """A TLS ClientHello (record type 0x16, version 3.1) reads as a 369 MB frame."""
    client_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 32
    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(client_hello)
    assert info.value.size == 0x16030102 == 369_295_618


def test_negative_size_is_an_invalid_length() -> None:
    """A size with the sign bit set is an InvalidLengthError, not a huge frame."""
    decoder = FrameDecoder(max_frame_size=1 << 30)
    with pytest.raises(InvalidLengthError, match="negative frame size -2147483648"):
        decoder.feed(b"\x80\x00\x00\x00")
    decoder = FrameDecoder(max_frame_size=1 << 30)
    with pytest.raises(InvalidLengthError, match="negative frame size -1"):
        decoder.feed(b"\xff\xff\xff\xff")


def test_error_is_raised_after_the_frames_before_it() -> None:
    """A bad size behind good frames raises only once those frames are taken."""
    decoder = FrameDecoder(max_frame_size=10)
    decoder.feed(encode_frame(b"ok") + encode_frame(b"fine") + _size(11) + b"x" * 11)
    assert _next(decoder) == b"ok"
    assert _next(decoder) == b"fine"
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()


def test_errors_are_sticky() -> None:
    """Once the stream is broken, every later call raises the same error."""
    decoder = FrameDecoder(max_frame_size=10)
    with pytest.raises(InvalidLengthError) as first:
        decoder.feed(b"\xff\xff\xff\xfe" + encode_frame(b"later"))
    with pytest.raises(InvalidLengthError) as again:
        decoder.next_frame()
    assert again.value is first.value
    with pytest.raises(InvalidLengthError) as fed:
        decoder.feed(encode_frame(b"more"))
    assert fed.value is first.value
    assert isinstance(first.value, ProtocolError)


def test_negative_limit_is_rejected() -> None:
    """max_frame_size must not be negative."""
    with pytest.raises(ValueError, match="max_frame_size"):
        FrameDecoder(max_frame_size=-1)
    assert FrameDecoder(max_frame_size=7).max_frame_size == 7


def test_declared_size_is_never_allocated_up_front() -> None:
    """Announcing a 1 GB frame and sending a few bytes allocates about those bytes."""
    decoder = FrameDecoder(max_frame_size=2**31 - 1)
    tracemalloc.start()
    try:
        decoder.feed(_size(1_000_000_000) + b"x" * 100)
        assert decoder.next_frame() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 104
    assert decoder.has_partial_frame
    assert peak < 64 * 1024


# -- spare buffers -------------------------------------------------------------


def test_a_released_buffer_receives_a_later_frame() -> None:
    """With spare_buffers, a large frame's buffer whose views are all gone receives a
    later large frame (no fresh memory); one still viewed is left alone. The buffer for
    the next frame is chosen when a frame is handed over."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=2)
    decoder.feed(encode_frame(b"A" * 100_000))
    first = decoder.next_frame()
    assert first is not None
    first_buffer = first.obj
    kept = first[10:20]  # a slice keeps the buffer viewed too
    del first
    decoder.feed(encode_frame(b"B" * 100_000))
    second = decoder.next_frame()  # handed over while the first is viewed
    assert second is not None
    assert second.obj is not first_buffer
    del kept
    decoder.feed(encode_frame(b"C" * 90_000))
    third = decoder.next_frame()  # handed over once the first is free: it is next
    assert third is not None
    assert third.obj is not first_buffer
    decoder.feed(encode_frame(b"D" * 100_000))
    fourth = decoder.next_frame()
    assert fourth is not None
    assert fourth.obj is first_buffer
    assert fourth.tobytes() == b"D" * 100_000
    assert second.tobytes() == b"B" * 100_000
    assert third.tobytes() == b"C" * 90_000


def test_small_frames_keep_no_spares() -> None:
    """Buffers under 64 KiB are not kept: the allocator reuses such memory anyway."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=2)
    decoder.feed(encode_frame(b"a" * 1000))
    first = decoder.next_frame()
    assert first is not None
    buffer = first.obj
    del first
    decoder.feed(encode_frame(b"b" * 1000))
    second = decoder.next_frame()
    assert second is not None
    assert second.obj is not buffer


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 200_000), min_size=1, max_size=8),
    data=st.data(),
)
def test_spare_buffers_give_the_same_frames(sizes: list[int], data: st.DataObject) -> None:
    """Frames of any size in any chunking, some kept and some dropped as they come: the
    same frames as without spares, and a kept frame never changes afterwards."""
    frames = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(encode_frame(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    keep = data.draw(st.lists(st.booleans(), min_size=len(frames), max_size=len(frames)))
    decoder = FrameDecoder(max_frame_size=200_000, spare_buffers=2)
    kept: list[tuple[int, memoryview]] = []
    seen = 0
    start = 0
    for cut in [*cuts, len(stream)]:
        decoder.feed(stream[start:cut])
        start = cut
        while (frame := decoder.next_frame()) is not None:
            assert frame.tobytes() == frames[seen]
            if keep[seen]:
                kept.append((seen, frame))
            del frame
            seen += 1
            for index, view in kept:
                assert view.tobytes() == frames[index]
    assert seen == len(frames)
    assert decoder.buffered == 0 and not decoder.has_partial_frame


# -- efficiency --------------------------------------------------------------


def test_large_frame_in_64k_chunks_is_linear() -> None:
    """A 50 MB frame fed in 64 KiB chunks, polling after each, decodes in well under 2 s."""
    size = 50 * 1024 * 1024
    body = bytes(range(256)) * (size // 256)
    stream = memoryview(encode_frame(body) + encode_frame(b"next"))
    decoder = FrameDecoder(max_frame_size=size)
    chunk = 64 * 1024
    frames: list[memoryview] = []
    started = time.perf_counter()
    for offset in range(0, len(stream), chunk):
        decoder.feed(stream[offset : offset + chunk])
        frames.extend(decoder)
    elapsed = time.perf_counter() - started
    assert len(frames) == 2
    assert frames[0].tobytes() == body
    assert frames[1].tobytes() == b"next"
    assert elapsed < 2.0, f"{elapsed:.2f} s"


def _decode_small_frames(count: int) -> float:
    """Decode ``count`` frames of 100 bytes fed in 1 MiB chunks; the CPU seconds taken."""
    stream = memoryview(b"".join(encode_frame(bytes([i % 256]) * 100) for i in range(count)))
    decoder = FrameDecoder(max_frame_size=100)
    seen = 0
    started = time.process_time()
    for offset in range(0, len(stream), 1 << 20):
        decoder.feed(stream[offset : offset + (1 << 20)])
        for frame in decoder:
            assert frame[0] == seen % 256
            seen += 1
    elapsed = time.process_time() - started
    assert seen == count
    assert decoder.buffered == 0
    return elapsed


def test_many_small_frames_in_large_chunks_is_linear() -> None:
    """Four times the frames take about four times the CPU time, not sixteen: the decoder
    does not copy or rescan what it holds per frame. CPU time and a ratio, so that a
    loaded machine's scheduling moves both sides alike (the best of three of each)."""
    small = min(_decode_small_frames(50_000) for _ in range(3))
    large = min(_decode_small_frames(200_000) for _ in range(3))
    assert large < 8 * max(small, 0.005), f"{small:.3f} s then {large:.3f} s"


# -- receiving into a frame's own buffer -------------------------------------


def _receive(decoder: FrameDecoder, stream: memoryview, chunk: int) -> int:
    """One read of up to ``chunk`` bytes from ``stream``, as a transport does it: into the
    view the decoder gives, else fed. Returns the bytes taken."""
    target = decoder.receive_buffer()
    if target is None:
        decoder.feed(stream[:chunk])
        return min(chunk, len(stream))
    taken = min(chunk, len(target), len(stream))
    target[:taken] = stream[:taken]
    decoder.received(taken)
    return taken


def test_a_large_frame_is_received_into_the_buffer_it_is_handed_out_in() -> None:
    """Bytes are received into the decoder's buffer; once a large frame's size is known
    and it does not fit, the rest of it is received into one buffer of its size, which
    the frame handed out views (no copy); what follows it is decoded as usual."""
    body = bytes(range(256)) * 1000  # 256,000 bytes
    stream = memoryview(encode_frame(body) + encode_frame(b"next"))
    decoder = FrameDecoder(max_frame_size=1 << 20)
    target = decoder.receive_buffer(room=1000)
    assert target is not None and target.nbytes == 1000
    target[:] = stream[:1000]
    del target
    decoder.received(1000)
    target = decoder.receive_buffer()
    assert target is not None and target.nbytes == len(body) - 996
    own = target.obj
    target[:100_000] = stream[1000:101_000]
    decoder.received(100_000)
    assert decoder.next_frame() is None
    assert decoder.buffered == 101_000 and decoder.has_partial_frame
    target = decoder.receive_buffer()
    assert target is not None and target.obj is own and target.nbytes == len(body) - 100_996
    target[:] = stream[101_000 : 4 + len(body)]
    decoder.received(target.nbytes)
    assert decoder.receive_buffer() is None  # whole: it is next_frame's
    decoder.feed(stream[4 + len(body) :])
    frame = decoder.next_frame()
    assert frame is not None and frame.obj is own and frame.tobytes() == body
    last = decoder.next_frame()
    assert last is not None and last.tobytes() == b"next"
    assert decoder.next_frame() is None and decoder.buffered == 0


def test_a_large_frame_that_fits_is_received_where_it_began() -> None:
    """A large frame that fits the decoder's buffer is received there and handed out
    with it; a released one's buffer (a kept spare) then receives a later frame whole,
    in one read."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=2)
    buffers: list[object] = []
    reads: list[int] = []
    for letter in b"ABC":
        stream = memoryview(encode_frame(bytes([letter]) * 200_000))
        taken = count = 0
        while taken < len(stream):
            taken += _receive(decoder, stream[taken:], 1 << 20)
            count += 1
        reads.append(count)
        frame = decoder.next_frame()
        assert frame is not None and frame.tobytes() == bytes([letter]) * 200_000
        buffers.append(frame.obj)
        if letter != ord("B"):
            del frame  # A's buffer is free when B is handed out; B's is kept viewed
        else:
            kept = frame
    assert reads == [1, 1, 1]
    assert buffers[2] is buffers[0] and buffers[1] is not buffers[0]
    assert kept.tobytes() == b"B" * 200_000


def test_a_buffer_a_little_short_of_a_large_frame_grows_for_it() -> None:
    """A large frame a little larger than the decoder's buffer (a kept spare) grows that
    buffer and is handed out in it, rather than moving to a buffer of its own."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=2)
    handed: list[object] = []
    for letter, size in ((b"A", 200_000), (b"B", 200_000), (b"C", RECEIVE_ROOM + 5_000)):
        stream = memoryview(encode_frame(letter * size))
        taken = 0
        while taken < len(stream):
            taken += _receive(decoder, stream[taken:], 1 << 20)
        frame = decoder.next_frame()
        assert frame is not None and frame.tobytes() == letter * size
        handed.append(frame.obj)
        if letter == b"B":
            kept = frame  # A's buffer is free when B is handed out: it is the next one
        del frame
    assert handed[2] is handed[0]
    assert kept.tobytes() == b"B" * 200_000


def test_declared_sizes_reserve_nothing_until_large_frames_begin() -> None:
    """A small frame, one over 64 MiB and a partial size prefix get room for a read, not
    their declared size; an invalid size gets None and raises from feed (and received)."""
    for declared in (60_000, (64 << 20) + 1):
        decoder = FrameDecoder(max_frame_size=1 << 30)
        target = decoder.receive_buffer(room=1000)
        assert target is not None
        target[:5] = _size(declared) + b"x"
        del target  # a reader drops its view before asking again, as transports do
        decoder.received(5)
        target = decoder.receive_buffer(room=1000)
        assert target is not None and 995 <= target.nbytes < 2000
        assert decoder.buffered == 5 and decoder.has_partial_frame
    bad = FrameDecoder(max_frame_size=100)
    target = bad.receive_buffer()
    assert target is not None
    target[:4] = _size(200_000)
    del target
    with pytest.raises(FrameTooLargeError):
        bad.received(4)
    assert bad.receive_buffer() is None
    with pytest.raises(FrameTooLargeError):
        bad.feed(b"x")


def test_received_counts_only_what_the_view_holds() -> None:
    decoder = FrameDecoder(max_frame_size=1 << 20)
    target = decoder.receive_buffer(room=10)
    assert target is not None
    with pytest.raises(ValueError, match="view of fewer"):
        decoder.received(target.nbytes + 1)
    decoder.feed(_size(100_000) + b"x")
    target = decoder.receive_buffer()
    assert target is not None
    with pytest.raises(ValueError, match="view of fewer"):
        decoder.received(target.nbytes + 1)


def test_a_released_frame_buffer_receives_a_later_larger_frame() -> None:
    """With spare_buffers, the buffer a large frame was received into is received into
    again once nothing views it, grown when the next frame is larger."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=2)
    frames: list[memoryview] = []
    for letter, size in ((b"A", 300_000), (b"B", 400_000)):
        stream = memoryview(encode_frame(letter * size))
        taken = 0
        while taken < len(stream):
            taken += _receive(decoder, stream[taken:], 8192)
        frame = decoder.next_frame()
        assert frame is not None and frame.tobytes() == letter * size
        frames.append(frame)
        del frame
        if letter == b"A":
            first_buffer = frames.pop().obj
    assert frames[0].obj is first_buffer


def test_after_a_large_frame_a_free_larger_spare_receives_the_next_whole() -> None:
    """When a frame that had its own buffer is handed out and nothing else is buffered,
    a free spare larger than the decoder's buffer becomes it: the next large frame is
    received whole, in one read, into the buffer it is handed out in."""
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=3)
    size = RECEIVE_ROOM + 50_000  # larger than the room: a buffer of its own
    stream = memoryview(encode_frame(b"A" * size) + encode_frame(b"B" * size))
    taken = 0
    while taken < len(stream) // 2:
        taken += _receive(decoder, stream[taken : len(stream) // 2], 1 << 20)
    first = decoder.next_frame()
    assert first is not None
    first_buffer = first.obj
    while taken < len(stream):
        taken += _receive(decoder, stream[taken:], 1 << 20)
    del first  # free before B is handed out
    second = decoder.next_frame()
    assert second is not None and second.tobytes() == b"B" * size
    target = decoder.receive_buffer()
    assert target is not None and target.obj is first_buffer and target.nbytes >= size + 4
    target[: size + 4] = encode_frame(b"C" * size)
    del target
    decoder.received(size + 4)
    third = decoder.next_frame()
    assert third is not None and third.obj is first_buffer and third.tobytes() == b"C" * size
    assert second.tobytes() == b"B" * size


def test_a_fetch_of_50_mib_is_received_into_its_own_buffer_and_kept() -> None:
    """A frame the size of a fetch at the default fetch.max.bytes (50 MiB, past the 16 MiB
    this once stopped at) is received, once begun, into one buffer of its size, and that
    buffer receives the next such frame once nothing views it (no fresh memory)."""
    size = 50 << 20
    decoder = FrameDecoder(max_frame_size=1 << 30, spare_buffers=3)
    buffers: list[object] = []
    for letter in b"AB":
        target = decoder.receive_buffer(room=1000)
        assert target is not None
        target[:8] = _size(size) + bytes([letter]) * 4
        del target
        decoder.received(8)
        target = decoder.receive_buffer()
        assert target is not None and target.nbytes == size - 4  # the rest, in one view
        target[:] = bytes([letter]) * (size - 4)
        buffers.append(target.obj)
        del target
        decoder.received(size - 4)
        frame = decoder.next_frame()
        assert frame is not None and frame.obj is buffers[-1]
        assert frame.nbytes == size and frame[:4].tobytes() == frame[-4:].tobytes()
        assert frame[-1] == letter
        del frame
    assert buffers[1] is buffers[0]


def test_kept_buffers_stay_within_their_byte_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Released buffers are kept up to spare_buffers and up to a total of bytes: the
    oldest kept give way to a newer one that would pass it."""
    monkeypatch.setattr(framing, "_SPARE_BYTES", 250_000)
    decoder = FrameDecoder(max_frame_size=1 << 20, spare_buffers=3)
    frames = []
    for letter in b"ABC":  # each handed out while the ones before are viewed: three buffers
        decoder.feed(encode_frame(bytes([letter]) * 100_000))
        frame = decoder.next_frame()
        assert frame is not None and frame.tobytes() == bytes([letter]) * 100_000
        frames.append(frame)
        del frame
    owners = [frame.obj for frame in frames]
    assert len({id(owner) for owner in owners}) == 3
    kept = decoder._spares
    assert sum(map(len, kept)) <= 250_000
    assert [any(k is o for k in kept) for o in owners] == [False, True, True]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300_000), min_size=1, max_size=6),
    data=st.data(),
)
def test_receiving_into_frame_buffers_gives_the_same_frames(
    sizes: list[int], data: st.DataObject
) -> None:
    """Frames of any size received in reads of any size, into their own buffers where
    the decoder gives them, some kept and some dropped: the same frames, and a kept
    frame never changes afterwards."""
    frames = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = memoryview(b"".join(encode_frame(f) for f in frames))
    keep = data.draw(st.lists(st.booleans(), min_size=len(frames), max_size=len(frames)))
    decoder = FrameDecoder(max_frame_size=300_000, spare_buffers=2)
    kept: list[tuple[int, memoryview]] = []
    seen = taken = 0
    while taken < len(stream):
        chunk = data.draw(st.sampled_from([1, 3, 4096, 65_536, 200_000, 1 << 20]))
        taken += _receive(decoder, stream[taken:], chunk)
        while (frame := decoder.next_frame()) is not None:
            assert frame.tobytes() == frames[seen]
            if keep[seen]:
                kept.append((seen, frame))
            del frame
            seen += 1
            for index, view in kept:
                assert view.tobytes() == frames[index]
    assert seen == len(frames)
    assert decoder.buffered == 0 and not decoder.has_partial_frame
