"""Sparse offset and time indexes and the aborted-transaction index of a segment.

Entries live in memory (arrays, for binary search) and are appended to their
file as they are made; files are big-endian:

- ``.index``: relative offset int32 | position int32 (8 bytes), one entry
  for the first batch written after more than ``index.interval.bytes``
  since the previous entry; the offset is the batch's base offset.
- ``.timeindex``: timestamp int64 | relative offset int32 (12 bytes): the
  largest timestamp so far and the base offset of the first batch reaching
  it, added with each offset index entry when it grew, and when the segment
  stops being active.
- ``.txnindex``: version int16 (0) | producer id int64 | first offset int64 |
  last offset int64 | last stable offset int64 (34 bytes) per aborted
  transaction whose abort marker is in the segment.

All three are disposable: :meth:`load` reports a file that fails its sanity
checks and the segment rebuilds it from the log. An index of a log opened
read-only (``read_only=True``) never touches its file: entries made or rebuilt
are kept in memory only.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import sys
from array import array
from itertools import pairwise

from kafkette.backends.types import AbortedTxn

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_BIG_ENDIAN = sys.byteorder == "big"


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


class _IndexFile:
    """An append-only file of fixed-size entries."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._fd = -1
        self._dirty = False
        self._pending: list[bytes] = []

    def _writer(self) -> int:
        if self.read_only:
            raise PermissionError(f"{self.path} is opened read-only")
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.lseek(self._fd, 0, os.SEEK_END)
        return self._fd

    def create(self) -> None:
        """Create the file (empty) if it does not exist."""
        if self._fd < 0 and not self.read_only:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the end of the file (written by :meth:`write_pending`).

        Entries for unflushed data need not reach the file before a flush:
        recovery rebuilds the indexes of everything after the recovery point.
        """
        self._pending.append(data)

    def _discard_pending(self) -> None:
        self._pending.clear()

    def write_pending(self) -> None:
        """Write the queued entries (read-only: forget them, the memory has them)."""
        if not self._pending:
            return
        if self.read_only:
            self._pending.clear()
            return
        data = b"".join(self._pending)
        self._pending.clear()
        fd = self._writer()
        self._dirty = True
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def replace(self, data: bytes) -> None:
        self._pending.clear()
        if self.read_only:
            return
        fd = self._writer()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        self._pending.append(data)
        self.write_pending()

    def flush(self) -> None:
        self.write_pending()
        if self._dirty:
            if self._fd >= 0:
                os.fsync(self._fd)
            elif not self.read_only:
                # written and closed by close(): synced through a descriptor of its own
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._dirty = False

    def close(self) -> None:
        self.write_pending()
        self._close_fd()

    def release(self) -> None:
        """Write and fsync what is pending, then close the file until the next write
        (a sealed segment keeps no index file open)."""
        self.flush()
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def delete(self) -> None:
        if self.read_only:
            raise PermissionError(f"{self.path} is opened read-only")
        self._discard_pending()
        self._close_fd()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def rename(self, path: str) -> None:
        if self.read_only:
            raise PermissionError(f"{self.path} is opened read-only")
        self.close()
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path


class OffsetIndex(_IndexFile):
    """Relative offset -> file position, sparse."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        super().__init__(path, read_only=read_only)
        self.offsets: array[int] = array("i")
        self.positions: array[int] = array("i")
        self._queued = 0
        """How many entries, from the first, are in the file or queued for it; those
        after them were appended since and :meth:`write_pending` packs them."""

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) when missing or failing its checks."""
        data = _read(self.path)
        self.offsets, self.positions = array("i"), array("i")
        self._queued = 0
        if data is None or len(data) % _OFFSET_ENTRY.size:
            return False
        values = array("i", data)
        if not _BIG_ENDIAN:
            values.byteswap()
        offsets, positions = values[0::2], values[1::2]
        if offsets and (
            offsets[0] < 0
            or positions[0] <= 0
            or positions[-1] >= log_size
            or not _strictly_increasing(offsets)
            or not _strictly_increasing(positions)
        ):
            return False
        self.offsets, self.positions = offsets, positions
        self._queued = len(offsets)
        return True

    def append(self, relative_offset: int, position: int) -> None:
        self.offsets.append(relative_offset)
        self.positions.append(position)

    def _discard_pending(self) -> None:
        self._queued = len(self.offsets)
        super()._discard_pending()

    def write_pending(self) -> None:
        start, self._queued = self._queued, len(self.offsets)
        if start < self._queued:
            self.write(
                b"".join(
                    _OFFSET_ENTRY.pack(o, p)
                    for o, p in zip(self.offsets[start:], self.positions[start:], strict=True)
                )
            )
        super().write_pending()

    def floor(self, relative_offset: int) -> tuple[int, int]:
        """The last entry with an offset <= ``relative_offset`` ((-1, 0) when none)."""
        i = bisect.bisect_right(self.offsets, relative_offset) - 1
        if i < 0:
            return -1, 0
        return self.offsets[i], self.positions[i]

    def floor_position(self, position: int) -> tuple[int, int]:
        """The last entry whose position is <= ``position`` ((-1, 0) when none)."""
        i = bisect.bisect_right(self.positions, position) - 1
        if i < 0:
            return -1, 0
        return self.offsets[i], self.positions[i]

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self._queued = len(entries)
        self.offsets = array("i", (o for o, _ in entries))
        self.positions = array("i", (p for _, p in entries))
        self.replace(b"".join(_OFFSET_ENTRY.pack(o, p) for o, p in entries))

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.offsets, self.positions, strict=True))


class TimeIndex(_IndexFile):
    """Largest timestamp so far -> relative offset of the batch reaching it."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        super().__init__(path, read_only=read_only)
        self.timestamps: array[int] = array("q")
        self.offsets: array[int] = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def load(self, max_relative_offset: int) -> bool:
        """Read the file; False (and empty) when missing or failing its checks."""
        data = _read(self.path)
        self.timestamps, self.offsets = array("q"), array("i")
        if data is None or len(data) % _TIME_ENTRY.size:
            return False
        timestamps, offsets = array("q"), array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if (
                ts < 0
                or not 0 <= rel <= max_relative_offset
                or (timestamps and (ts <= timestamps[-1] or rel < offsets[-1]))
            ):
                return False
            timestamps.append(ts)
            offsets.append(rel)
        self.timestamps, self.offsets = timestamps, offsets
        return True

    def maybe_append(self, timestamp: int, relative_offset: int) -> None:
        """Add an entry when ``timestamp`` is larger than the last one."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        self.timestamps.append(timestamp)
        self.offsets.append(relative_offset)
        self.write(_TIME_ENTRY.pack(timestamp, relative_offset))

    def floor(self, timestamp: int) -> int:
        """Relative offset of the last entry with a timestamp <= ``timestamp`` (-1 when none)."""
        i = bisect.bisect_right(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else -1

    @property
    def last(self) -> tuple[int, int]:
        """The last entry, or (-1, -1)."""
        if not self.offsets:
            return -1, -1
        return self.timestamps[-1], self.offsets[-1]

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self.timestamps = array("q", (t for t, _ in entries))
        self.offsets = array("i", (o for _, o in entries))
        self.replace(b"".join(_TIME_ENTRY.pack(t, o) for t, o in entries))

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.timestamps, self.offsets, strict=True))


class TxnIndex(_IndexFile):
    """Aborted transactions whose markers are in the segment."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        super().__init__(path, read_only=read_only)
        self.aborted: list[AbortedTxn] = []

    def load(self) -> bool:
        """Read the file; an absent file is an empty index. False when malformed."""
        data = _read(self.path)
        self.aborted.clear()
        if data is None:
            return True
        if len(data) % _TXN_ENTRY.size:
            return False
        result = []
        for version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data):
            if version != 0 or first > last:
                return False
            result.append(AbortedTxn(pid, first, last, lso))
        self.aborted[:] = result
        return True

    def append(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)
        self.write(_pack_txn(txn))

    def reset(self, aborted: list[AbortedTxn]) -> None:
        self.aborted[:] = aborted
        if aborted or os.path.exists(self.path):
            self.replace(b"".join(_pack_txn(t) for t in aborted))


def _pack_txn(txn: AbortedTxn) -> bytes:
    return _TXN_ENTRY.pack(
        0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )
