"""Size-prefixed framing of the Kafka wire protocol, without I/O.

Every request and every response travels as a frame: an int32 big-endian size
followed by that many bytes (the header and body of the message). The caller
owns the socket; it hands received bytes to a ``FrameDecoder`` and takes whole
frame bodies out::

    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    decoder.feed(sock.recv(65536))
    while (frame := decoder.next_frame()) is not None:
        handle(frame)

and writes ``encode_frame(body)`` (or ``frame_parts(parts)`` with a vectored
write) for the other direction.

A caller that can receive into a buffer (``socket.recv_into``, asyncio's
``BufferedProtocol``) asks where the next bytes go instead: ``receive_buffer()``
gives a view of the decoder's buffer (of a large frame's own buffer once its size
is known), the caller receives into it and reports the count with
``received(n)``; a large frame is then handed out without being copied::

    while True:
        target = decoder.receive_buffer()
        if target is not None:
            decoder.received(sock.recv_into(target))
        else:
            decoder.feed(sock.recv(65536))
        while (frame := decoder.next_frame()) is not None:
            handle(frame)

A peer controls the size prefix, so the decoder checks it before it buffers
any of the body: as soon as four size bytes are known, a negative size raises
``InvalidLengthError`` and a size over the limit raises ``FrameTooLargeError``
(an HTTP request's ``GET `` reads as 1,195,725,856 bytes, a TLS ClientHello's
``\\x16\\x03\\x01`` as more than 369 MB). Memory grows only with the bytes
actually received, never with a declared size, except that ``receive_buffer``
reserves a frame of up to 64 MiB whole once it has begun to arrive.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator, Sequence

from kafkette.protocol.errors import EncodeError, FrameTooLargeError, InvalidLengthError

__all__ = ["RECEIVE_ROOM", "SIZE_PREFIX_LENGTH", "FrameDecoder", "encode_frame", "frame_parts"]

Buffer = bytes | bytearray | memoryview

SIZE_PREFIX_LENGTH = 4
"""Length of the int32 size that starts every frame."""

_MAX_INT32 = 2**31 - 1
_SIZE = struct.Struct(">i")

# Consumed bytes at the front of the buffer are dropped once they are at least
# this many and at least half the buffer, so the memmove is amortised.
_COMPACT_THRESHOLD = 64 * 1024

# Buffers handed over with a frame that are kept to receive later frames into
# (spare_buffers): from this size on (smaller ones come from the allocator's
# reused memory anyway), up to the largest worth keeping: a fetch at the default
# fetch.max.bytes (50 MiB), which a consumer of many partitions gets while it catches
# up (at 1,000 partitions of 1 KiB records, 50 MiB fetches read 0.65M records/s with a
# 16 MiB limit here, 0.96M with this one). At most _SPARE_BYTES are kept in all.
_SPARE_MIN = 64 * 1024
_SPARE_MAX = 64 * 1024 * 1024
_SPARE_BYTES = 128 * 1024 * 1024

# Frames received into their own buffer (receive_buffer): from this size on (a smaller
# one comes in one read anyway), up to the largest reserved before it has arrived.
_DIRECT_MIN = _SPARE_MIN
_DIRECT_MAX = _SPARE_MAX

RECEIVE_ROOM = 256 * 1024
"""Room receive_buffer gives at least at the end of the decoder's buffer."""


class FrameDecoder:
    """Reassembles frames from bytes received in chunks of any size.

    ``feed`` takes bytes as they arrive; ``next_frame`` returns the body of the
    next complete frame (the size prefix removed) or None. An invalid size
    prefix raises from ``feed`` or ``next_frame``, whichever first sees it,
    after every frame before it has been returned; the stream cannot be
    resynchronised, so the decoder then keeps raising the same error.

    With ``spare_buffers``, up to that many buffers handed over with large
    frames are kept, and one whose every view has been released (the caller
    dropped the frame and everything sliced from it) receives a later frame:
    fresh memory costs a page fault per 4 KiB on first touch, which for a
    consumer reading 1 MiB fetches costs as much as parsing them.
    """

    __slots__ = (
        "_buf",
        "_direct",
        "_direct_got",
        "_end",
        "_error",
        "_max_frame_size",
        "_pos",
        "_received_into",
        "_size",
        "_spare_buffers",
        "_spares",
    )

    def __init__(self, max_frame_size: int, *, spare_buffers: int = 0) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._buf = bytearray()
        self._end = 0  # bytes of _buf received; a reused buffer has room after them
        self._pos = 0  # start of the first unconsumed byte in _buf
        self._size: int | None = None  # body size of the frame at _pos, once known
        self._error: FrameTooLargeError | InvalidLengthError | None = None
        self._spare_buffers = spare_buffers
        self._spares: list[bytearray] = []
        # The frame at the front, received into its own buffer (receive_buffer): its size
        # is _size, its bytes before _direct_got have arrived; _buf holds what follows it.
        self._direct: bytearray | None = None
        self._direct_got = 0
        self._received_into = False  # receive_buffer was used: the buffer's room is kept

    @property
    def max_frame_size(self) -> int:
        """The largest frame body accepted, in bytes."""
        return self._max_frame_size

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as part of a frame."""
        pending = self._end - self._pos
        if self._direct is not None:
            pending += SIZE_PREFIX_LENGTH + self._direct_got
        return pending

    @property
    def has_partial_frame(self) -> bool:
        """Whether bytes are held that do not (yet) make a complete frame.

        After ``next_frame`` has returned None, this tells at end of stream
        whether the peer went away in the middle of a frame.
        """
        if self._direct is not None:
            return True  # its frame is handed out once complete, by next_frame
        available = self._end - self._pos
        if available == 0:
            return False
        if self._size is None:
            return True  # fewer than four bytes, or a size not yet read
        return available < SIZE_PREFIX_LENGTH + self._size

    def feed(self, data: Buffer) -> None:
        """Add received bytes; raise at once if they complete an invalid size prefix."""
        if self._error is not None:
            raise self._error
        size = _nbytes(data)
        direct = self._direct
        if direct is not None and size:
            got = self._direct_got
            take = min(size, self._size_of_direct() - got)
            if take:
                view = data if isinstance(data, memoryview) else memoryview(data)
                direct[got : got + take] = view[:take]
                self._direct_got = got + take
                data = view[take:]
                size -= take
        if size:
            buf = self._buf
            end = self._end
            if end == len(buf):
                buf += data
            elif end + size <= len(buf):  # room left in a reused buffer
                buf[end : end + size] = data
            else:
                del buf[end:]
                buf += data
            self._end = end + size
        self._read_size()

    def next_frame(self) -> memoryview | None:
        """Return the body of the next complete frame, or None if it has not all arrived.

        The body is a memoryview of bytes that belong to the caller; the decoder
        never writes to them again while a view of them is alive.
        """
        if self._error is not None:
            raise self._error
        direct = self._direct
        if direct is not None:
            whole = self._size_of_direct()
            if self._direct_got < whole:
                return None
            self._direct = None
            self._direct_got = 0
            self._size = None
            frame = memoryview(direct)[:whole]  # first: a viewed buffer is no free spare
            if self._spare_buffers:
                self._keep(direct)
                if self._end == self._pos:
                    self._take_larger_spare()
            return frame
        self._read_size()
        size = self._size
        if size is None:
            return None
        start = self._pos + SIZE_PREFIX_LENGTH
        end = start + size
        buf = self._buf
        if end > self._end:
            return None
        if end == self._end and size * 2 >= end:
            # The frame is the tail and most of the buffer (a large frame, typically):
            # hand the buffer over instead of copying it.
            frame = memoryview(buf)[start:end]
            self._buf = self._spare(buf) if self._spare_buffers else bytearray()
            self._end = self._pos = 0
        else:
            frame = memoryview(buf[start:end])  # slicing a bytearray copies
            self._consume(end)
        self._size = None
        return frame

    def __iter__(self) -> Iterator[memoryview]:
        """Yield the complete frames available now, in order."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def receive_buffer(self, room: int = RECEIVE_ROOM) -> memoryview | None:
        """Where to receive the next bytes: a writable view to receive into, then call
        :meth:`received` with the count; or None (then receive anywhere and :meth:`feed`).

        Once a frame of 64 KiB to 64 MiB has begun to arrive, the view is the
        part of it still missing, in the buffer it will be handed out in: the
        decoder's own when that has room for it (a kept spare, typically; one a
        little short grows), else one of the frame's size, to which the bytes of
        it already here move once. Otherwise the view is at least ``room`` bytes
        at the end of the decoder's buffer (more when the buffer is larger),
        never sized by a declared size. None after an invalid size (:meth:`feed`
        raises it).
        """
        if self._error is not None:
            return None
        self._received_into = True
        direct = self._direct
        buf = self._buf
        if direct is None:
            size = self._size
            if size is not None and _DIRECT_MIN <= size <= _DIRECT_MAX:
                start = self._pos + SIZE_PREFIX_LENGTH
                if self._end - start >= size:
                    return None  # whole already: next_frame hands it out
                short = start + size - len(buf)
                if 0 < short <= len(buf) // 8:  # nearly fits (a spare a bit small): grow it
                    with contextlib.suppress(BufferError):  # a reader's view: not here
                        buf += bytes(short)
                if start + size <= len(buf):
                    return memoryview(buf)[self._end : start + size]
                direct = self._direct = self._frame_buffer(size)
                have = self._end - start
                direct[:have] = memoryview(buf)[start : self._end]
                self._direct_got = have
                self._consume(self._end)
            else:
                short = room - (len(buf) - self._end)
                if short > 0:
                    try:
                        buf += bytes(short)
                    except BufferError:  # still viewed by a reader (it never is, normally)
                        return None
                return memoryview(buf)[self._end :]
        got = self._direct_got
        size = self._size_of_direct()
        if got >= size:
            return None
        return memoryview(direct)[got:size]

    def received(self, nbytes: int) -> None:
        """Count ``nbytes`` received into the view :meth:`receive_buffer` gave last;
        raise at once if they complete an invalid size prefix."""
        if self._direct is not None:
            if not 0 <= nbytes <= self._size_of_direct() - self._direct_got:
                raise ValueError(f"{nbytes} bytes received into a view of fewer")
            self._direct_got += nbytes
            return
        if not 0 <= nbytes <= len(self._buf) - self._end:
            raise ValueError(f"{nbytes} bytes received into a view of fewer")
        self._end += nbytes
        self._read_size()

    def _size_of_direct(self) -> int:
        size = self._size
        assert size is not None  # set while a frame is received into its own buffer
        return size

    def _frame_buffer(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes for a frame: a free spare, else new; with
        room for a slightly larger next frame and its size prefix, should it become the
        decoder's buffer (:meth:`_take_larger_spare`)."""
        want = size + SIZE_PREFIX_LENGTH + size // 16
        free = self._take_free() if self._spare_buffers else None
        if free is None:
            return bytearray(want)
        if len(free) < size:
            free.extend(bytes(want - len(free)))
        return free

    def _spare(self, handed_over: bytearray) -> bytearray:
        """A kept buffer nothing views any more, for the next frames (else a new one);
        ``handed_over`` is kept in its place, or beside it, if it is worth keeping."""
        free = self._take_free()
        self._keep(handed_over)
        return free if free is not None else bytearray()

    def _take_larger_spare(self) -> None:
        """With nothing buffered, receive into a free spare larger than the buffer: the
        next large frame then comes whole into the buffer it is handed out in (a
        consumer's next fetch, typically), not into a small buffer it outgrows."""
        free = self._take_free()
        if free is None:
            return
        if len(free) > len(self._buf):
            self._buf = free
            self._end = self._pos = 0
        else:
            self._keep(free)

    def _take_free(self) -> bytearray | None:
        """The largest kept buffer nothing views any more, taken out of the spares."""
        spares = self._spares
        free: bytearray | None = None
        for spare in spares:
            try:  # a buffer with live views (exports) cannot be resized
                last = spare.pop()
            except BufferError:
                continue
            spare.append(last)  # no reallocation: the room was there
            if free is None or len(spare) > len(free):
                free = spare
        if free is not None:
            spares.remove(free)
        return free

    def _keep(self, handed_over: bytearray) -> None:
        """Keep a buffer handed over with a frame, if it is worth keeping, in place of the
        oldest kept ones it needs the room (count or bytes) of."""
        size = len(handed_over)
        if _SPARE_MIN <= size <= _SPARE_MAX:
            spares = self._spares
            while spares and (
                len(spares) >= self._spare_buffers or sum(map(len, spares)) + size > _SPARE_BYTES
            ):
                spares.pop(0)
            spares.append(handed_over)

    def _read_size(self) -> None:
        if self._size is not None or self._end - self._pos < SIZE_PREFIX_LENGTH:
            return
        (size,) = _SIZE.unpack_from(self._buf, self._pos)
        if size < 0:
            self._error = InvalidLengthError(f"negative frame size {size}")
        elif size > self._max_frame_size:
            self._error = FrameTooLargeError(size, self._max_frame_size)
        else:
            self._size = size
            return
        raise self._error

    def _consume(self, end: int) -> None:
        # A reader's view of the buffer (received into) may still be alive: then it
        # cannot be resized, and keeps its room or is compacted later.
        if end == self._end:
            if end == len(self._buf) and not self._received_into:  # fed: no room to keep
                with contextlib.suppress(BufferError):  # a reader's view: keep it as room
                    self._buf.clear()
            self._end = self._pos = 0  # a buffer received into keeps its room
        elif end >= _COMPACT_THRESHOLD and end * 2 >= self._end:
            try:
                del self._buf[:end]
            except BufferError:
                self._pos = end
                return
            self._end -= end
            self._pos = 0
        else:
            self._pos = end


def _nbytes(part: Buffer) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def encode_frame(body: Buffer) -> bytes:
    """Return ``body`` prefixed with its int32 size."""
    size = _nbytes(body)
    if size > _MAX_INT32:
        raise EncodeError(f"frame body of {size} bytes does not fit an int32 size")
    return _SIZE.pack(size) + body


def frame_parts(parts: Sequence[Buffer]) -> list[Buffer]:
    """Return the size prefix of the frame made of ``parts``, followed by the parts.

    For a vectored write (``socket.sendmsg``, ``writelines``): the parts are
    not copied.
    """
    size = sum(_nbytes(part) for part in parts)
    if size > _MAX_INT32:
        raise EncodeError(f"frame body of {size} bytes does not fit an int32 size")
    return [_SIZE.pack(size), *parts]
