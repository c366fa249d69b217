"""Small value types shared by the Log interface and both backends."""

from __future__ import annotations

import os
from typing import NamedTuple

import attrs

NO_TIMESTAMP = -1


class FileRef:
    """An open file descriptor kept alive while anything refers to it.

    A disk segment hands one of these to every :class:`LogSlice` it returns,
    so a slice stays sendable after its segment is deleted by retention or
    compaction: the descriptor is closed when the last reference goes.
    """

    __slots__ = ("_fd", "path")

    def __init__(self, path: str, flags: int = os.O_RDONLY) -> None:
        self.path = path
        self._fd: int = os.open(path, flags, 0o644)

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError(f"{self.path} is closed")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def pread(self, length: int, position: int) -> bytes:
        """Exactly ``length`` bytes from ``position`` (fewer only at end of file)."""
        data = os.pread(self.fileno(), length, position)
        if len(data) == length or not data:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(self._fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def __del__(self) -> None:
        self.close()


@attrs.frozen(slots=True)
class LogSlice:
    """Whole stored batches returned by :meth:`Log.read`, unchanged and uncopied.

    A memory log fills ``buffers``; a disk log fills ``file``, ``position``
    and ``size`` (a region for :func:`os.sendfile`). :meth:`to_bytes` gives
    the bytes for transports that cannot use either directly. An empty slice
    has size 0.
    """

    size: int
    buffers: tuple[memoryview, ...] = ()
    file: FileRef | None = None
    position: int = 0
    spliceable: bool = False
    """Whether every buffer is memory that is never written again nor reused while a
    view of it lives (a memory log's arenas), so that the kernel may send its pages
    by reference (:mod:`kafkette.server.net.zero_copy`)."""

    def __len__(self) -> int:
        return self.size

    @property
    def is_file_region(self) -> bool:
        return self.file is not None

    def to_bytes(self) -> bytes:
        """The slice's bytes (one copy)."""
        if self.file is not None:
            data = self.file.pread(self.size, self.position)
            if len(data) != self.size:
                raise EOFError(f"{self.file.path} is shorter than the slice read from it")
            return data
        if len(self.buffers) == 1:
            return bytes(self.buffers[0])
        return b"".join(self.buffers)

    def views(self) -> tuple[memoryview, ...]:
        """The slice as memoryviews (read from the file for a file region)."""
        if self.file is not None:
            return (memoryview(self.to_bytes()),)
        return self.buffers

    def sendfile(self, out_fd: int) -> int:
        """Write the whole slice to ``out_fd``, a blocking socket or file.

        A server on non-blocking sockets runs its own ``os.sendfile`` loop over
        ``file``, ``position`` and ``size`` instead.
        """
        sent = 0
        if self.file is not None:
            in_fd = self.file.fileno()
            while sent < self.size:
                n = os.sendfile(out_fd, in_fd, self.position + sent, self.size - sent)
                if n == 0:
                    raise EOFError(f"{self.file.path} ended before the slice did")
                sent += n
            return sent
        for view in self.buffers:
            done = 0
            while done < len(view):
                done += os.write(out_fd, view[done:])
            sent += done
        return sent


class BatchInfo(NamedTuple):
    """What the broker's producer state needs from one stored batch.

    A named tuple rather than an attrs class: one is made for every appended
    batch of an idempotent producer, and tuples are several times cheaper.
    """

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    control_type: int = -1
    """For a control batch: 0 abort, 1 commit (-1 otherwise or unknown)."""
    coordinator_epoch: int = -1


class AppendInfo(NamedTuple):
    """Result of :meth:`Log.append`.

    A named tuple, not an attrs class: one is made on every append, and the
    append fast path builds it with ``tuple.__new__``, several times cheaper than
    calling an ``__init__``.
    """

    base_offset: int
    last_offset: int
    log_append_time: int
    """The LogAppendTime stamped on the batches, or -1 for CreateTime logs."""
    log_start_offset: int
    batches: tuple[BatchInfo, ...]
    """The appended batches that carry a producer id or are control batches, in order."""


@attrs.frozen(slots=True)
class TimestampOffset:
    """A record found by timestamp: its timestamp, offset and the batch's leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


@attrs.frozen(slots=True)
class AbortedTxn:
    """An aborted transaction: its producer and offset range (as in Kafka's ``.txnindex``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@attrs.frozen(slots=True)
class CleanerStats:
    """What one compaction pass did."""

    segments: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    first_dirty_offset: int
    first_uncleanable_offset: int
