"""Request frames cut from bytes read into a reused buffer, with one copy each.

:class:`~kafkette.protocol.framing.FrameDecoder` appends what it is fed to its
own buffer, then copies each frame out of it (unless the frame is the tail):
two copies of every request. The asyncio connection reads into one buffer kept
for the connection's life, so :class:`FrameQueue` copies each frame body once,
from that buffer into the frame's own ``bytearray``, and queues it. Its
contract is the decoder's: the same frames in the same order, a size prefix
checked as soon as its four bytes are known (a negative one raises
:class:`InvalidLengthError`, one over the limit :class:`FrameTooLargeError`,
never buffering the body), the error raised from :meth:`feed` or
:meth:`next_frame` only after every frame before it has been returned, and
raised again on every later call. Memory grows with the bytes received, never
with a declared size.

Given a :class:`~kafkette.backends.pages.landing.Landing`, a frame of at least
:data:`~kafkette.backends.pages.landing.LAND_FROM` bytes goes into a region of the
connection's landing arena instead of a ``bytearray``, and
:meth:`FrameQueue.receive_buffer` hands out the rest of that region, so that
the connection receives the frame's remaining bytes in place (no copy); a
memory log may then keep its batches where they arrived. Pages are allocated
as bytes arrive (a step ahead at most), not from the declared size.
"""

from __future__ import annotations

import struct
from collections import deque

from kafkette.backends.pages.landing import LAND_FROM, Landing
from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError

_SIZE = struct.Struct(">i")
_PREFIX = 4
RECEIVE_AHEAD = 256 * 1024
"""Bytes of a landing region past those received whose pages are allocated before a
receive into it (the receive may bring this many)."""


class _BadSize(Exception):
    """Stops cutting at an invalid size prefix (the error is kept in the queue)."""


class FrameQueue:
    """Whole frame bodies (size prefixes removed) out of bytes received in chunks."""

    __slots__ = (
        "_body",
        "_error",
        "_filled",
        "_frames",
        "_head",
        "_landing",
        "_max_frame_size",
        "_region",
        "_size",
        "buffered",
    )

    def __init__(self, max_frame_size: int, landing: Landing | None = None) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._frames: deque[memoryview] = deque()
        self._head = b""  # up to three bytes of a size prefix
        # The frame being received: its bytes so far (grown as they arrive, never
        # allocated from the declared size, which the peer controls) and its size.
        self._body: bytearray | None = None
        self._size = 0
        # Or a frame being received into a landing region, and its bytes so far.
        self._landing = landing
        self._region: memoryview | None = None
        self._filled = 0
        self._error: FrameTooLargeError | InvalidLengthError | None = None
        self.buffered = 0
        """Bytes received and not yet returned as part of a frame (size prefixes included)."""

    @property
    def max_frame_size(self) -> int:
        """The largest frame body accepted, in bytes (a listener lowers it until a
        client authenticates: ``sasl.server.max.receive.size``)."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {size}")
        self._max_frame_size = size

    @property
    def has_whole_frame(self) -> bool:
        """Whether :meth:`next_frame` has a frame to return."""
        return bool(self._frames)

    @property
    def has_partial_frame(self) -> bool:
        """Whether bytes are held that do not (yet) make a complete frame."""
        return self._body is not None or self._region is not None or bool(self._head)

    @property
    def failed(self) -> bool:
        """Whether an invalid size prefix was seen (raised once the frames before it are)."""
        return self._error is not None

    def feed(self, data: memoryview) -> None:
        """Cut the frames ``data`` completes (copying them); raise at an invalid size prefix
        if no frame before it is waiting (else :meth:`next_frame` raises it after them).

        ``data`` may be reused by the caller once this returns.
        """
        if self._error is not None:
            raise self._error
        try:
            self._feed(data)
        except _BadSize:
            assert self._error is not None
            if not self._frames:
                raise self._error from None

    def _feed(self, data: memoryview) -> None:
        pos = 0
        end = len(data)
        region = self._region
        if region is not None:  # finish the landing frame in progress
            pos = min(self._size - self._filled, end)
            region[self._filled : self._filled + pos] = data[:pos]
            self.received(pos)
            if self._region is not None:
                return
        body = self._body
        if body is not None:  # finish the frame in progress
            pos = min(self._size - len(body), end)
            body += data[:pos]
            self.buffered += pos
            if len(body) < self._size:
                return
            self._frames.append(memoryview(body))
            self._body = None
        elif self._head:  # finish a size prefix split across reads
            pos = min(_PREFIX - len(self._head), end)
            self._head += bytes(data[:pos])
            self.buffered += pos
            if len(self._head) < _PREFIX:
                return
            size = self._check(_SIZE.unpack(self._head)[0])
            self._head = b""
            self.buffered -= _PREFIX  # counted again with the frame
            pos = self._take(data, pos, end, size)
        while pos < end:
            if end - pos < _PREFIX:
                self._head = bytes(data[pos:end])
                self.buffered += end - pos
                return
            size = self._check(_SIZE.unpack_from(data, pos)[0])
            pos = self._take(data, pos + _PREFIX, end, size)

    def _take(self, data: memoryview, start: int, end: int, size: int) -> int:
        """Queue the frame of ``size`` bytes at ``start`` (or begin it); where it ends."""
        stop = start + size
        if size >= LAND_FROM and self._landing is not None:
            region = self._landing.region(size)
            if region is not None:
                got = min(stop, end) - start
                self._landing.reach(region, got)
                region[:got] = data[start : start + got]
                self.buffered += _PREFIX
                self._region, self._filled, self._size = region, 0, size
                self.received(got)
                return start + got
        if stop <= end:
            self._frames.append(memoryview(bytearray(data[start:stop])))
            self.buffered += _PREFIX + size
            return stop
        self._body = bytearray(data[start:end])
        self._size = size
        self.buffered += _PREFIX + end - start
        return end

    def receive_buffer(self) -> memoryview | None:
        """Where the next bytes received should go: the rest of a frame being received
        into a landing region (the caller then reports them with :meth:`received`), or
        None (the caller reads into a buffer of its own and passes that to :meth:`feed`)."""
        region = self._region
        if region is None:
            return None
        assert self._landing is not None
        self._landing.reach(region, min(self._size, self._filled + RECEIVE_AHEAD))
        return region[self._filled :]

    def received(self, nbytes: int) -> None:
        """``nbytes`` more bytes of the landing frame in progress are in its region."""
        self._filled += nbytes
        self.buffered += nbytes
        if self._filled >= self._size and self._region is not None:
            self._frames.append(self._region)
            self._region = None

    def close(self) -> None:
        """The connection is done: its landing arena goes back (the frames already
        returned stay valid)."""
        self._region = None
        if self._landing is not None:
            self._landing.close()

    def _check(self, size: int) -> int:
        if size < 0:
            self._error = InvalidLengthError(f"negative frame size {size}")
        elif size > self._max_frame_size:
            self._error = FrameTooLargeError(size, self._max_frame_size)
        else:
            return size
        raise _BadSize

    def next_frame(self) -> memoryview | None:
        """The body of the next complete frame, or None if it has not all arrived."""
        frames = self._frames
        if frames:
            frame = frames.popleft()
            self.buffered -= _PREFIX + len(frame)
            return frame
        if self._error is not None:
            raise self._error
        return None
