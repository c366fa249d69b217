"""The segment contract shared by the memory and disk backends."""

from __future__ import annotations

import abc
import struct
from collections.abc import Iterator, Sequence

from kafkette.backends.header import StoredHeader
from kafkette.backends.types import AbortedTxn, LogSlice
from kafkette.protocol.records.batch_header import LOG_OVERHEAD

BufferLike = bytes | bytearray | memoryview

_new_header = tuple.__new__
STORED_PREFIX = struct.Struct(">qii")
"""Base offset, batch length and partition leader epoch: what a log rewrites."""
STORED_PREFIX_SIZE = STORED_PREFIX.size


class Segment(abc.ABC):
    """A run of batches starting at ``base_offset``; only the last segment of a log grows.

    A *position* is whatever the segment uses to find a batch again (a byte
    position on disk, a list index in memory); the log only passes it back.
    """

    base_offset: int
    next_offset: int
    """Offset after the segment's last batch (``base_offset`` when empty)."""
    size: int
    max_timestamp: int
    """Largest batch max timestamp in the segment, -1 when none."""
    offset_of_max_timestamp: int
    first_timestamp: int
    """Max timestamp of the first batch (what ``segment.ms`` measures from), -1 when empty."""
    is_full: bool
    """Whether its indexes can take no more entries (forces a roll)."""
    aborted: list[AbortedTxn]
    """Aborted transactions whose marker is in this segment, in offset order."""

    @abc.abstractmethod
    def append_batch(
        self, parts: Sequence[BufferLike], header: StoredHeader, base_offset: int
    ) -> None:
        """Append one batch given as consecutive parts.

        ``header`` is the batch's header as received (its base offset and
        leader epoch may predate the rewrite); ``base_offset`` is the one assigned.
        A single ``bytearray`` part belongs to the log (a fresh copy): the
        segment may keep it without copying.
        """

    def append_fields(
        self, parts: Sequence[BufferLike], header: tuple[int, ...], base_offset: int
    ) -> None:
        """:meth:`append_batch` given the header as a plain tuple of its fields (what
        ``HEADER_STRUCT.unpack_from`` returns): the append fast path calls this, so a
        segment that reads the header by index can skip making a :class:`StoredHeader`."""
        self.append_batch(parts, _new_header(StoredHeader, header), base_offset)

    def append_single(
        self, data: BufferLike, header: tuple[int, ...], base_offset: int, leader_epoch: int
    ) -> None:
        """Append the one whole batch ``data`` holds as a log stores it: ``base_offset``,
        its length and ``leader_epoch`` as the first 16 bytes, then ``data`` after its
        own first 16 (which are outside the CRC). ``header`` is as for
        :meth:`append_fields`."""
        prefix = STORED_PREFIX.pack(base_offset, len(data) - LOG_OVERHEAD, leader_epoch)
        self.append_fields((prefix, memoryview(data)[STORED_PREFIX_SIZE:]), header, base_offset)

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int, upper_bound: int) -> LogSlice | None:
        """Batches from the first one with last offset >= ``offset`` (None if no such batch)."""

    @abc.abstractmethod
    def headers(self, start_offset: int | None = None) -> Iterator[tuple[int, StoredHeader]]:
        """``(position, header)`` of each batch from the one holding ``start_offset``."""

    @abc.abstractmethod
    def batch_bytes(self, position: int, size: int) -> BufferLike:
        """The stored bytes of the batch at ``position``."""

    @abc.abstractmethod
    def timestamp_scan_start(self, timestamp: int) -> int:
        """An offset at or before the first record with a timestamp >= ``timestamp``."""

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= ``offset``."""

    @abc.abstractmethod
    def add_aborted(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose marker was appended here."""

    def drop_aborted_from(self, offset: int) -> None:
        """Forget aborted transactions whose marker is at or after ``offset``."""
        self.aborted[:] = [t for t in self.aborted if t.last_offset < offset]

    @abc.abstractmethod
    def seal(self) -> None:
        """The segment stops being the active one."""

    def flush_buffer(self) -> None:  # noqa: B027 - optional hook
        """Write out appends gathered in memory, if the segment gathers any."""

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Make the segment durable (no-op in memory)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the segment's resources."""

    def delete(self) -> None:  # noqa: B027 - optional hook
        """Remove the segment for good."""
