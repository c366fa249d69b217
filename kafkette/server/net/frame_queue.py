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
"""

from __future__ import annotations

import struct
from collections import deque

from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError

_SIZE = struct.Struct(">i")
_PREFIX = 4


class _BadSize(Exception):
    """Stops cutting at an invalid size prefix (the error is kept in the queue)."""


class FrameQueue:
    """Whole frame bodies (size prefixes removed) out of bytes received in chunks."""

    __slots__ = ("_body", "_error", "_frames", "_head", "_max_frame_size", "_size", "buffered")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._frames: deque[memoryview] = deque()
        self._head = b""  # up to three bytes of a size prefix
        # The frame being received: its bytes so far (grown as they arrive, never
        # allocated from the declared size, which the peer controls) and its size.
        self._body: bytearray | None = None
        self._size = 0
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
        return self._body is not None or bool(self._head)

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
        if stop <= end:
            self._frames.append(memoryview(bytearray(data[start:stop])))
            self.buffered += _PREFIX + size
            return stop
        self._body = bytearray(data[start:end])
        self._size = size
        self.buffered += _PREFIX + end - start
        return end

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
