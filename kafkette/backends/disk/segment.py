"""A segment on disk: ``<base>.log`` plus its offset, time and transaction indexes.

A segment opened ``read_only`` has its ``.log`` open for reading only and never
writes an index file: recovery's truncation and index rebuilds happen in memory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import attrs

from kafkette.backends.disk.index import OffsetIndex, TimeIndex, TxnIndex
from kafkette.backends.disk.reaper import FileReaper
from kafkette.backends.header import StoredHeader, parse_header, verify_batch
from kafkette.backends.segment import STORED_PREFIX, STORED_PREFIX_SIZE, BufferLike, Segment
from kafkette.backends.speedups import write_batch as _write_batch
from kafkette.backends.types import AbortedTxn, FileRef, LogSlice
from kafkette.errors import KafkaStorageError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.records.batch_header import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

SCAN_CHUNK = 1 << 20
HEADER_CHUNK = 1 << 16
MAX_RELATIVE_OFFSET = 2**31 - 1
# Header fields by index: on the append path a tuple index is cheaper than a property.
_BATCH_LENGTH = 1
_LAST_OFFSET_DELTA = 6
_MAX_TIMESTAMP = 8


_DELETED: list[FileRef] = []


def _deleted_file() -> FileRef:
    """What a deleted segment reads from once its descriptor went to the reaper:
    an empty file (one ``/dev/null`` descriptor shared by all)."""
    if not _DELETED:
        _DELETED.append(FileRef(os.devnull))
    return _DELETED[0]


def segment_stem(base_offset: int) -> str:
    """The 20-digit zero-padded file name stem of a segment."""
    return f"{base_offset:020d}"


@attrs.define(slots=True)
class IndexTracker:
    """Index bookkeeping of a growing segment, shared by appends and rebuilds."""

    interval: int
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    first_timestamp: int = -1
    bytes_since_entry: int = 0

    def observe(self, position: int, base_offset: int, max_timestamp: int, size: int) -> bool:
        """Account for the batch at ``position``; True when it gets an index entry."""
        if position == 0:
            self.first_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        due = self.bytes_since_entry > self.interval
        if due:
            self.bytes_since_entry = 0
        self.bytes_since_entry += size
        return due


class FileSegment(Segment):
    """One segment's files. Positions are byte positions in the ``.log`` file."""

    __slots__ = (
        "_buffer",
        "_buffer_limit",
        "_buffered",
        "_dirty",
        "_fd",
        "_index_files",
        "_indexes_missing",
        "_max_index_entries",
        "_tracker",
        "_written",
        "aborted",
        "base_offset",
        "directory",
        "epoch_starts",
        "file",
        "first_timestamp",
        "index",
        "is_full",
        "log_path",
        "next_offset",
        "read_only",
        "reaper",
        "sealed",
        "size",
        "time_index",
        "txn_index",
        "txn_index_valid",
    )

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval: int,
        max_index_bytes: int,
        suffix: str = "",
        write_buffer: int = 0,
        read_only: bool = False,
        reaper: FileReaper | None = None,
    ) -> None:
        self.directory = directory
        self.read_only = read_only
        self.reaper = reaper
        """Where :meth:`delete` leaves the log file's descriptor to be closed (its blocks
        freed) off the caller's thread; None: it closes when the segment goes."""
        self.base_offset = base_offset
        self.next_offset = base_offset
        stem = os.path.join(directory, segment_stem(base_offset))
        self.log_path = stem + LOG_SUFFIX + suffix
        self.index = OffsetIndex(stem + INDEX_SUFFIX + suffix, read_only=read_only)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + suffix, read_only=read_only)
        self.txn_index = TxnIndex(stem + TXN_INDEX_SUFFIX + suffix, read_only=read_only)
        self.aborted = self.txn_index.aborted
        self._max_index_entries = max(max_index_bytes // 12, 1)
        self._tracker = IndexTracker(index_interval)
        self.txn_index_valid = True
        self.epoch_starts: list[tuple[int, int]] = []
        """``(leader epoch, base offset)`` of each batch whose stamped epoch is above
        every earlier one's, as the last rescan (recovery, index rebuild) found them."""
        self.first_timestamp = -1
        self.is_full = False
        self._dirty = True
        self.sealed = False
        """Whether the segment has stopped being the active one."""
        """False when the ``.txnindex`` file was unreadable: the log rebuilds it."""
        try:
            if not read_only:
                self.file = FileRef(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
            elif os.path.exists(self.log_path):
                self.file = FileRef(self.log_path)
            else:
                # A log with no segment file (a crash before its first one was made):
                # an empty segment that exists nowhere, since nothing may be created.
                self.file = FileRef(os.devnull)
            self._fd = self.file.fileno()
            """The file's descriptor for appends (-1 once closed: a write then fails)."""
            self.size = os.fstat(self._fd).st_size
            self._written = self.size
            self._buffer = bytearray(write_buffer)
            self._buffered = 0
            self._buffer_limit = write_buffer
            # The index files are made by their first entry, or at the first flush or seal
            # (a new segment is one file creation, not three: each may wait on the journal).
            self._indexes_missing = not (
                os.path.exists(self.index.path) and os.path.exists(self.time_index.path)
            )
            self._index_files = not self._indexes_missing
        except OSError as exc:
            raise KafkaStorageError(f"cannot open {self.log_path}: {exc}") from exc

    # -- tracked state ---------------------------------------------------------

    @property
    def max_timestamp(self) -> int:  # type: ignore[override]
        return self._tracker.max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:  # type: ignore[override]
        return self._tracker.offset_of_max_timestamp

    def _update_full(self) -> None:
        # The time index never has more than one entry more than the offset index.
        self.is_full = len(self.index.offsets) + 1 >= self._max_index_entries

    # -- writes ----------------------------------------------------------------

    def append_batch(
        self, parts: Sequence[BufferLike], header: tuple[int, ...], base_offset: int
    ) -> None:
        position = self.size
        size = LOG_OVERHEAD + header[_BATCH_LENGTH]
        self._dirty = True
        if self._buffer_limit:
            self._gather(parts, size)
        else:
            try:
                written = os.writev(self._fd, parts)
                if written < size:
                    self._write_rest(parts, written)
            except BaseException:
                self._cut_back(position)
                raise
            self.size = self._written = position + size
        self._written_batch(position, size, header, base_offset)

    append_fields = append_batch  # it only reads the header by index

    def append_single(
        self, data: BufferLike, header: tuple[int, ...], base_offset: int, leader_epoch: int
    ) -> None:
        position = self.size
        size = len(data)
        if self._buffer_limit or _write_batch is None:
            prefix = STORED_PREFIX.pack(base_offset, size - LOG_OVERHEAD, leader_epoch)
            self.append_batch((prefix, memoryview(data)[STORED_PREFIX_SIZE:]), header, base_offset)
            return
        self._dirty = True
        try:
            _write_batch(self._fd, data, base_offset, leader_epoch)
        except BaseException:
            self._cut_back(position)
            raise
        self.size = self._written = position + size
        self._written_batch(position, size, header, base_offset)

    def _written_batch(
        self, position: int, size: int, header: tuple[int, ...], base_offset: int
    ) -> None:
        """Bookkeeping after a batch of ``size`` bytes was written at ``position``:
        next offset, tracked timestamps, index entries every ``index.interval.bytes``.
        (IndexTracker.observe and _update_full, inlined; the C append path does the same.)"""
        self.next_offset = base_offset + header[_LAST_OFFSET_DELTA] + 1
        tracker = self._tracker
        max_timestamp = header[_MAX_TIMESTAMP]
        if not position:
            self.first_timestamp = tracker.first_timestamp = max_timestamp
        if max_timestamp > tracker.max_timestamp:
            tracker.max_timestamp = max_timestamp
            tracker.offset_of_max_timestamp = base_offset
        if tracker.bytes_since_entry > tracker.interval:
            tracker.bytes_since_entry = size
            index = self.index
            index.append(base_offset - self.base_offset, position)
            timestamps = self.time_index.timestamps
            if not timestamps or tracker.max_timestamp > timestamps[-1]:
                self.time_index.maybe_append(
                    tracker.max_timestamp, tracker.offset_of_max_timestamp - self.base_offset
                )
            # the time index never has more than one entry more than the offset index
            self.is_full = len(index.offsets) + 1 >= self._max_index_entries
        else:
            tracker.bytes_since_entry += size

    def _gather(self, parts: Sequence[BufferLike], size: int) -> None:
        """Append a batch of ``size`` bytes through the write buffer: copied into it
        (drained first if full), or written after it when larger than the buffer."""
        if self._buffered + size > self._buffer_limit:
            self._drain()
        if size > self._buffer_limit:
            position = self.size
            try:
                written = os.writev(self._fd, parts)
                if written < size:
                    self._write_rest(parts, written)
            except BaseException:
                self._cut_back(position)
                raise
            self.size = self._written = position + size
            return
        buffer, at = self._buffer, self._buffered
        for part in parts:
            end = at + len(part)
            buffer[at:end] = part
            at = end
        self._buffered = at
        self.size += size

    def flush_buffer(self) -> None:
        self._drain()

    def drop_buffer(self) -> None:
        """Forget buffered appends (what a crash does to them)."""
        self.size = self._written
        self._buffered = 0

    def _drain(self) -> None:
        """Write the buffered appends to the file."""
        if self._buffered:
            with memoryview(self._buffer) as whole:
                view = whole[: self._buffered]
                fd = self.file.fileno()
                while view:
                    view = view[os.write(fd, view) :]
                view.release()
            self._buffered = 0
        self._written = self.size

    def _pread(self, length: int, position: int) -> bytes:
        if self._buffered and position + length > self._written:
            self._drain()
        return self.file.pread(length, position)

    def _cut_back(self, size: int) -> None:
        """Drop what a failed write left after ``size`` bytes (the next batch would
        otherwise land after a torn one)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)

    def _write_rest(self, parts: Sequence[BufferLike], written: int) -> None:
        rest = memoryview(b"".join(bytes(p) for p in parts))[written:]
        while rest:
            rest = rest[os.write(self.file.fileno(), rest) :]

    def _make_index_files(self) -> None:
        """Create the index files still missing, for the next open to find (even empty),
        but those of an active segment that has no entry yet: an open finds their
        absence right by scanning the segment (:meth:`load`), and a broker stopping with
        thousands of small new segments would create two files for each."""
        if self._index_files or self.read_only:
            return
        if not self.sealed and not len(self.index) and not len(self.time_index):
            return
        self.index.create()
        self.time_index.create()
        self._index_files = True

    def seal(self) -> None:
        """Stop being the active segment: the last time index entry is added, and what
        its indexes hold reaches their files, made durable, at the next :meth:`flush`
        (a roll, on the append path, waits for no file work; recovery rebuilds the
        indexes of every segment after the recovery point)."""
        self._drain()
        self.sealed = True
        self.time_index.maybe_append(
            self._tracker.max_timestamp, self._tracker.offset_of_max_timestamp - self.base_offset
        )

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    def drop_aborted_from(self, offset: int) -> None:
        if any(t.last_offset >= offset for t in self.aborted):
            self.txn_index.reset([t for t in self.aborted if t.last_offset < offset])

    # -- reads -----------------------------------------------------------------

    def _header_at(self, position: int) -> StoredHeader:
        data = self._pread(RECORD_BATCH_OVERHEAD, position)
        try:
            return parse_header(data)
        except ProtocolError as exc:
            raise KafkaStorageError(
                f"{self.log_path}: unreadable batch header at position {position}: {exc}"
            ) from exc

    def locate(self, offset: int) -> tuple[int, StoredHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        if offset >= self.next_offset:
            return None
        for attempt in range(2):
            relative, position = self.index.floor(offset - self.base_offset)
            try:
                header = self._header_at(position) if position < self.size else None
            except KafkaStorageError:
                if relative < 0:
                    raise
                header = None
            if relative >= 0 and (
                header is None or header.base_offset != self.base_offset + relative
            ):
                if attempt:
                    break
                self.rebuild_indexes(sealed=self.sealed)  # an index entry that lies: rebuild
                continue
            while header is not None:
                if header.last_offset >= offset:
                    return position, header
                position += header.size
                header = self._header_at(position) if position < self.size else None
            return None
        raise KafkaStorageError(f"{self.log_path}: index does not match the log")

    def read(self, offset: int, max_bytes: int, upper_bound: int) -> LogSlice | None:
        found = self.locate(offset)
        if found is None:
            return None
        start, header = found
        if header.last_offset >= upper_bound:
            return LogSlice(0)
        cap = self.size
        if upper_bound < self.next_offset:
            bound = self.locate(upper_bound)
            if bound is not None:
                cap = bound[0]
        limit = min(start + max_bytes, cap)
        end = start + header.size
        if end < limit:
            _, indexed = self.index.floor_position(limit)
            end = max(end, indexed)
            while end + LOG_OVERHEAD <= limit:
                size = LOG_OVERHEAD + int.from_bytes(self._pread(4, end + 8), "big", signed=True)
                if size < RECORD_BATCH_OVERHEAD or end + size > limit:
                    break
                end += size
        if self._buffered and end > self._written:
            self._drain()
        return LogSlice(end - start, file=self.file, position=start)

    def headers(self, start_offset: int | None = None) -> Iterator[tuple[int, StoredHeader]]:
        position = 0
        if start_offset is not None and start_offset > self.base_offset:
            found = self.locate(start_offset)
            if found is None:
                return
            position = found[0]
        buf = b""
        buf_start = position
        while position < self.size:
            at = position - buf_start
            if at + RECORD_BATCH_OVERHEAD > len(buf):
                buf = self._pread(HEADER_CHUNK, position)
                buf_start, at = position, 0
            try:
                header = parse_header(buf, at)
            except ProtocolError as exc:
                raise KafkaStorageError(f"{self.log_path}: bad batch at {position}: {exc}") from exc
            yield position, header
            position += header.size

    def batch_bytes(self, position: int, size: int) -> BufferLike:
        return self._pread(size, position)

    def timestamp_scan_start(self, timestamp: int) -> int:
        relative = self.time_index.floor(timestamp)
        return self.base_offset + relative if relative >= 0 else self.base_offset

    # -- maintenance -----------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        self._drain()
        found = self.locate(offset)
        if found is not None:
            os.ftruncate(self.file.fileno(), found[0])
            self.size = self._written = found[0]
        if found is not None or self.sealed:
            self.rebuild_indexes(sealed=False)  # it is the active segment again
        self.drop_aborted_from(offset)

    def load(self, *, sealed: bool) -> bool:
        """Trust the index files if they pass their checks; else rebuild. True if rebuilt."""
        self.sealed = sealed
        self.txn_index_valid = self.txn_index.load()
        if self._indexes_missing and not sealed and self._restore_tail(-1, 0):
            return False  # an active segment closed before its first index entry
        if not self._indexes_missing and self.index.load(self.size):
            last_relative = self.index.offsets[-1] if len(self.index) else -1
            last_position = self.index.positions[-1] if len(self.index) else 0
            try:
                ok = self.time_index.load(MAX_RELATIVE_OFFSET) and self._restore_tail(
                    last_relative, last_position
                )
                if ok and sealed and self._tracker.max_timestamp >= 0:
                    # Sealing appended the segment's largest timestamp last.
                    ok = self.time_index.last == (
                        self._tracker.max_timestamp,
                        self._tracker.offset_of_max_timestamp - self.base_offset,
                    )
            except KafkaStorageError:
                ok = False
            if ok:
                return False
        self.rebuild_indexes(sealed=sealed)
        return True

    def _restore_tail(self, last_relative: int, last_position: int) -> bool:
        """Tracker state from the last index entries and a scan of the batches after them."""
        tracker = IndexTracker(self._tracker.interval)
        tracker.bytes_since_entry = self.size - last_position
        timestamp, relative = self.time_index.last
        tracker.max_timestamp = timestamp
        tracker.offset_of_max_timestamp = self.base_offset + relative if relative >= 0 else -1
        next_offset = self.base_offset
        if self.size:
            tracker.first_timestamp = self._header_at(0).max_timestamp
        position = last_position
        first = True
        while position < self.size:
            header = self._header_at(position)
            if (
                first
                and last_relative >= 0
                and header.base_offset != self.base_offset + last_relative
            ):
                return False
            if not first and position - last_position > tracker.interval:
                return False  # this batch would have had an index entry: the index lost some
            first = False
            if header.max_timestamp > tracker.max_timestamp:
                tracker.max_timestamp = header.max_timestamp
                tracker.offset_of_max_timestamp = header.base_offset
            next_offset = header.next_offset
            position += header.size
        if position != self.size:
            return False
        if len(self.time_index) and self.base_offset + self.time_index.offsets[-1] >= next_offset:
            return False
        self._tracker = tracker
        self.first_timestamp = tracker.first_timestamp
        self.next_offset = next_offset
        self._update_full()
        return True

    def rebuild_indexes(self, *, sealed: bool) -> None:
        """Rebuild the offset and time indexes from the log (the txn index is the log's)."""
        self._rescan(sealed=sealed, validate=False)

    def recover(self, *, sealed: bool, min_offset: int) -> int:
        """Validate every batch, truncate at the first invalid byte, rebuild the indexes.

        Returns the number of bytes truncated.
        """
        self.txn_index_valid = self.txn_index.load()
        return self._rescan(sealed=sealed, validate=True, min_offset=min_offset)

    def _rescan(self, *, sealed: bool, validate: bool, min_offset: int = 0) -> int:
        self._drain()
        self.sealed = sealed
        tracker = IndexTracker(self._tracker.interval)
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        expected = max(self.base_offset, min_offset)
        position = 0
        next_offset = self.base_offset
        epoch_starts: list[tuple[int, int]] = []
        last_epoch = -1
        buf = b""
        buf_start = 0
        while position < self.size:
            at = position - buf_start
            if at + RECORD_BATCH_OVERHEAD > len(buf):
                buf = self._pread(SCAN_CHUNK, position)
                buf_start, at = position, 0
            try:
                header = parse_header(buf, at)
                if validate:
                    if at + header.size > len(buf):
                        buf = self._pread(max(SCAN_CHUNK, header.size), position)
                        buf_start, at = position, 0
                    verify_batch(buf, at)
                    if (
                        header.last_offset_delta < 0
                        or header.base_offset < expected
                        or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET
                    ):
                        raise ProtocolError(f"batch at {position} has bad offsets")
            except ProtocolError:
                if not validate:
                    raise KafkaStorageError(
                        f"{self.log_path}: unreadable batch at {position}"
                    ) from None
                break
            if header.partition_leader_epoch > last_epoch:
                last_epoch = header.partition_leader_epoch
                epoch_starts.append((last_epoch, header.base_offset))
            if tracker.observe(position, header.base_offset, header.max_timestamp, header.size):
                offsets.append((header.base_offset - self.base_offset, position))
                if tracker.max_timestamp > (times[-1][0] if times else -1):
                    times.append(
                        (tracker.max_timestamp, tracker.offset_of_max_timestamp - self.base_offset)
                    )
            expected = next_offset = header.next_offset
            position += header.size
        truncated = self.size - position
        self._dirty = True
        if truncated:
            if not self.read_only:  # read-only: the bytes after ``position`` are ignored
                os.ftruncate(self.file.fileno(), position)
            self.size = self._written = position
        if sealed and tracker.max_timestamp > (times[-1][0] if times else -1):
            times.append(
                (tracker.max_timestamp, tracker.offset_of_max_timestamp - self.base_offset)
            )
        self.index.reset(offsets)
        self.time_index.reset(times)
        self.epoch_starts = epoch_starts
        self._tracker = tracker
        self.first_timestamp = tracker.first_timestamp
        self.next_offset = next_offset
        self._update_full()
        return truncated

    def flush(self) -> None:
        if self.read_only:
            return
        self._drain()
        if self._dirty:
            os.fsync(self.file.fileno())
            self._dirty = False
        self._make_index_files()
        if self.sealed:  # durable, then closed until the next write: sealed keeps none open
            self.index.release()
            self.time_index.release()
            self.txn_index.release()
        else:
            self.index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close_unsynced(self) -> None:
        """:meth:`close`, having written everything :meth:`flush` would (the index files
        too) but synced nothing: the caller syncs the whole file system afterwards."""
        if not self.read_only:
            self._make_index_files()
        self.close()

    def close(self) -> None:
        if not _DELETED or self.file is not _DELETED[0]:  # the shared one stays open
            if not self.file.closed:
                self._drain()
            self.file.close()
        self._fd = -1
        self.index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        """Remove the segment's files. With a reaper, the log file's descriptor goes to
        it: unlinking an open file is quick, its last close frees the blocks (slow for
        a large file), and that close then happens in the reaper's thread."""
        self._buffered = 0
        for index in (self.index, self.time_index, self.txn_index):
            index.delete()  # raises when read-only, before the log file goes
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)
        if self.reaper is not None and not self.file.closed:
            self.reaper.release(self.file)
            self.file = _deleted_file()
            self._fd = -1

    def rename(self, suffix: str) -> None:
        """Move the segment's files to ``<stem><kind><suffix>``."""
        if self.read_only:
            raise PermissionError(f"{self.log_path} is opened read-only")
        self._drain()
        stem = os.path.join(self.directory, segment_stem(self.base_offset))
        new_log = stem + LOG_SUFFIX + suffix
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.file.path = new_log
        self.index.rename(stem + INDEX_SUFFIX + suffix)
        self.time_index.rename(stem + TIME_INDEX_SUFFIX + suffix)
        self.txn_index.rename(stem + TXN_INDEX_SUFFIX + suffix)
