"""DiskLog: a partition log in its own directory of segment files (see the package docstring)."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Generator, Sequence

from kafkette.backends.config import LogConfig
from kafkette.backends.disk.checkpoint import (
    TMP_SUFFIX,
    DirectorySync,
    checkpoint_bytes,
    create_empty,
    fsync_dir,
    fsync_file,
    install_staged,
    read_checkpoint,
    stage,
    write_atomically,
    write_checkpoint,
)
from kafkette.backends.disk.reaper import FileReaper
from kafkette.backends.disk.segment import (
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    FileSegment,
    segment_stem,
)
from kafkette.backends.header import StoredHeader
from kafkette.backends.log import BlockingWork, Steps, run_steps
from kafkette.backends.producer_state import ProducerStateTable, SnapshotError
from kafkette.backends.segment import BufferLike, Segment
from kafkette.backends.segmented import EpochEntry, SegmentedLog
from kafkette.clocks import LogClockMs, wall_ms_int
from kafkette.errors import KafkaStorageError

SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
CHECKPOINT_FILES = (LOG_START_FILE, LEADER_EPOCH_FILE, CLEANER_FILE)
"""The checkpoints of :meth:`DiskLog._checkpoint` (the recovery point is the flush's)."""


class DiskLog(SegmentedLog):
    """A partition log stored in ``directory`` (conventionally ``<topic>-<partition>``)."""

    read_only = False
    """Whether opening leaves every file as it is (see
    :class:`~kafkette.backends.disk.read_only.ReadOnlyDiskLog`)."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        clock: LogClockMs = wall_ms_int,
        write_buffer_bytes: int = 0,
        parent_sync: DirectorySync | None = None,
        reaper: FileReaper | None = None,
        sync_marker_removal: bool = True,
    ) -> None:
        """Open (recovering if needed) or create the log in ``directory``.

        Creating a log writes nothing but its empty segment files, and syncs
        nothing: its directory reaches the disk at its first flush, with one
        fsync of the parent shared through ``parent_sync`` (the storage's, for
        all its logs; without one the parent is synced on its own).

        ``write_buffer_bytes`` > 0 gathers appends in memory and writes them
        to the segment in chunks of that size (or before a read reaches them,
        and on :meth:`tick`, :meth:`flush`, a roll and :meth:`close`): fewer
        system calls for small batches, but a process crash then loses the
        gathered appends as an OS crash loses unflushed ones. 0 (the default)
        writes every append to the file before :meth:`append` returns.

        A ``reaper`` (the storage's) gets the descriptors of the segments retention,
        DeleteRecords and compaction delete, so that freeing their blocks happens in
        its thread (:mod:`~kafkette.backends.disk.reaper`).

        Opening a log a clean shutdown closed removes its clean-shutdown marker and
        syncs its directory; ``sync_marker_removal=False`` leaves that sync to the
        caller, who must sync the file system before anything is appended
        (:meth:`DiskStorage.open_many` does, once for all its logs).
        """
        super().__init__(topic, partition, config or LogConfig(), clock)
        self.directory = directory
        self._write_buffer = write_buffer_bytes
        self._reaper = reaper
        self._unsynced_snapshots: list[str] = []
        """Producer snapshots written since the last checkpoint write (see _save_snapshot)."""
        self._files_lock = threading.RLock()
        """Held while a worker thread writes in the directory (compaction's checkpoints),
        and by the owner's writes of the same files and by closing."""
        self.recovery_point = 0
        self._recovery_point_on_disk: int | None = None
        """The recovery point checkpoint's value as read or last written (not rewritten
        when unchanged: every file written costs a create and a rename)."""
        self._snapshot_on_disk: tuple[int, bytes] | None = None
        """The producer snapshot last written or read, by offset (not written again)."""
        self.recovered_bytes_truncated = 0
        """Bytes dropped by recovery when this log was opened (0 after a clean shutdown)."""
        self.rebuilt_indexes = 0
        """Segments whose indexes were rebuilt when this log was opened."""
        self._directory_dirty = True
        self._parent_sync = parent_sync
        self._parent_ticket = 0
        """Nonzero while the directory, made by this log, may be missing from its
        parent's entries on disk (a ticket of ``parent_sync``)."""
        self._sync_marker_removal = sync_marker_removal
        self._written: dict[str, list[list[int]]] = {}
        """The checkpoint files known to be on disk as they are here, by name: durably
        written, or (absent) meaning what the log holds. Only the others are written."""
        try:
            if not self.read_only:
                self._make_directory()
            self._open()
        except OSError as exc:
            raise KafkaStorageError(f"cannot open log in {directory}: {exc}") from exc

    # -- opening and recovery --------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _segment(self, base_offset: int, suffix: str = "") -> FileSegment:
        return FileSegment(
            self.directory,
            base_offset,
            index_interval=self._config.index_interval_bytes,
            max_index_bytes=self._config.segment_index_bytes,
            suffix=suffix,
            write_buffer=self._write_buffer if not suffix else 0,
            read_only=self.read_only,
            reaper=self._reaper,
        )

    def _make_directory(self) -> None:
        try:
            os.mkdir(self.directory)
        except FileExistsError:
            return
        except FileNotFoundError:
            os.makedirs(self.directory, exist_ok=True)  # its parent is missing too
        self._parent_ticket = self._parent_sync.created() if self._parent_sync else 1

    def _open(self) -> None:
        swapped: set[int] = set()
        if not self.read_only:
            names = os.listdir(self.directory)
            if not names:
                self._open_new()
                return
            names = self._complete_swaps(names)
        else:
            # A compaction swap a crash interrupted is finished in memory: the
            # ``.swap`` files are the segment (_complete_swaps would rename them).
            names = _listdir_if_any(self.directory)
            swapped = {
                int(n[: -len(LOG_SUFFIX + SWAP_SUFFIX)])
                for n in names
                if n.endswith(SWAP_SUFFIX) and _is_segment_log(n[: -len(SWAP_SUFFIX)])
            }
        bases = sorted({int(n[: -len(LOG_SUFFIX)]) for n in names if _is_segment_log(n)} | swapped)
        clean = os.path.exists(self._path(CLEAN_SHUTDOWN_FILE))
        rows = read_checkpoint(self._path(RECOVERY_POINT_FILE))
        recovery_point = rows[0][0] if rows and rows[0] else 0
        if clean and rows and rows[0]:  # (after a crash, what was read may not be on disk)
            self._recovery_point_on_disk = recovery_point
        found = {name: read_checkpoint(self._path(name)) for name in CHECKPOINT_FILES}
        rows = found[LOG_START_FILE]
        log_start = rows[0][0] if rows and rows[0] else None
        if not bases:
            bases = [log_start or 0]
        segments, recovered = self._load_segments(
            [self._segment(b, SWAP_SUFFIX if b in swapped else "") for b in bases],
            clean,
            recovery_point,
        )
        self._segments = list(segments)
        self._bases = [s.base_offset for s in segments]
        self._next_offset = self._active.next_offset
        self._log_start = min(max(log_start or 0, self._bases[0]), self._next_offset)
        self._high_watermark = self._next_offset
        self._load_cleaner_checkpoint(found[CLEANER_FILE])
        self._load_epochs(found[LEADER_EPOCH_FILE], segments[recovered:])
        if not clean:
            self._drop_snapshots(above=self._next_offset)
        if all(s.txn_index_valid for s in segments):
            self._rebuild_producer_state()
        else:
            for segment in segments:
                segment.txn_index.reset([])
            self._rebuild_producer_state(from_scratch=True)
        self.recovery_point = min(recovery_point, self._next_offset)
        if self.read_only:
            return  # what recovery found stays in memory; the files stay as they are
        if clean:
            os.unlink(self._path(CLEAN_SHUTDOWN_FILE))
            # Durably gone before anything is appended: a marker a crash brought back
            # would let the next open trust a torn tail without recovering it.
            if self._sync_marker_removal:
                fsync_dir(self.directory)
            # close() wrote them durably; an absent one means what was loaded from it.
            self._written = self._checkpoint_rows()
            for name, rows in found.items():
                if rows is not None:
                    self._written[name] = rows
        else:
            self.flush()  # also writes every checkpoint: what was read may not be on disk
        self._checkpoint()

    def _open_new(self) -> None:
        """A new log (an empty directory): nothing to recover, nothing to write but the
        segment files. An absent checkpoint means what it would hold: log start and
        cleaner offset 0, no leader epoch, recovery point 0."""
        self._segments = [self._new_segment(0)]
        self._bases = [0]
        self._written = self._checkpoint_rows()

    def _load_segments(
        self, segments: list[FileSegment], clean: bool, recovery_point: int
    ) -> tuple[list[FileSegment], int]:
        """Load trusted segments, recover the rest (Kafka's recovery from the recovery point).

        Returns the segments kept (recovery deletes those after a truncation) and the
        index of the first one recovered (their number after a clean shutdown).
        """
        recover_from = len(segments)
        if not clean:
            recover_from = 0
            for i, segment in enumerate(segments):
                if segment.base_offset <= recovery_point:
                    recover_from = i
        for i, segment in enumerate(segments):
            sealed = i < len(segments) - 1
            if i < recover_from:
                self.rebuilt_indexes += segment.load(sealed=sealed)
                continue
            previous_end = segments[i - 1].next_offset if i else 0
            truncated = segment.recover(sealed=sealed, min_offset=previous_end)
            self.rebuilt_indexes += 1
            self.recovered_bytes_truncated += truncated
            if truncated and sealed:
                for later in segments[i + 1 :]:
                    self.recovered_bytes_truncated += later.size
                    later.close()
                    if not self.read_only:
                        later.delete()
                segment.rebuild_indexes(sealed=False)
                return segments[: i + 1], recover_from
        return segments, recover_from

    def _complete_swaps(self, names: list[str]) -> list[str]:
        """Finish or undo a compaction swap interrupted by a crash, and remove what a
        crash left half-written; the directory's ``names`` after (listed again only
        when something was left: opening thousands of logs lists each once)."""
        leftovers = [n for n in names if n.endswith((CLEANED_SUFFIX, TMP_SUFFIX, SWAP_SUFFIX))]
        if not leftovers:
            return names
        for name in leftovers:
            if name.endswith((CLEANED_SUFFIX, TMP_SUFFIX)):
                os.unlink(self._path(name))
        swaps = [n for n in os.listdir(self.directory) if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        for name in swaps:
            stem = name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
            for suffix in INDEX_SUFFIXES:
                target = self._path(stem + suffix)
                if os.path.exists(target):
                    os.unlink(target)
            for suffix in INDEX_SUFFIXES:
                swap = self._path(stem + suffix + SWAP_SUFFIX)
                if os.path.exists(swap):
                    os.replace(swap, self._path(stem + suffix))
            os.replace(self._path(name), self._path(stem + LOG_SUFFIX))
        for name in os.listdir(self.directory):
            if name.endswith(SWAP_SUFFIX):
                os.unlink(self._path(name))
        return os.listdir(self.directory)

    def _load_cleaner_checkpoint(self, rows: list[list[int]] | None) -> None:
        if not rows or not rows[0]:
            self._first_dirty_offset = self._log_start
            return
        self._first_dirty_offset = min(max(rows[0][0], self._log_start), self._next_offset)

    def _load_epochs(self, rows: list[list[int]] | None, recovered: Sequence[FileSegment]) -> None:
        """The checkpoint's entries below the log end, then the epochs newer than their
        last that the batches re-read by recovery are stamped with.

        A new epoch is kept in memory only until the next flush, which writes it
        before moving the recovery point past its first batch (as do close,
        truncation, log start moves and compaction): what a crash loses of the
        checkpoint starts after the recovery point, in batches recovery re-reads.
        """
        epochs = [
            EpochEntry(row[0], row[1])
            for row in rows or []
            if len(row) == 2 and row[1] < self._next_offset
        ]
        for segment in recovered:
            for epoch, offset in segment.epoch_starts:
                if not epochs or epoch > epochs[-1].epoch:
                    epochs.append(EpochEntry(epoch, offset))
        self._epochs = epochs

    # -- hooks -----------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> Segment:
        self._directory_dirty = True
        segment = self._segment(base_offset)
        # A leftover file of that name (a deleted segment's, say) must not be reused.
        if segment.size:
            os.ftruncate(segment.file.fileno(), 0)
            segment.size = 0
            segment.rebuild_indexes(sealed=False)
        return segment

    def _snapshot_offsets(self) -> list[int]:
        return sorted(
            int(n[: -len(SNAPSHOT_SUFFIX)])
            for n in _listdir_if_any(self.directory)
            if n.endswith(SNAPSHOT_SUFFIX) and n[: -len(SNAPSHOT_SUFFIX)].isdigit()
        )

    def _snapshot_path(self, offset: int) -> str:
        return self._path(segment_stem(offset) + SNAPSHOT_SUFFIX)

    def _save_snapshot(self, offset: int, table: ProducerStateTable) -> None:
        # Not synced here (a roll, on the append path, saves one): the next checkpoint
        # write or flush syncs it before the recovery point can pass it; one a crash
        # damaged fails its CRC when read, and an older one is used.
        path = self._snapshot_path(offset)
        data = table.to_bytes()
        with self._files_lock:  # a retention pass's work may write the same one
            if self._snapshot_on_disk == (offset, data) and os.path.exists(path):
                return  # a close after a clean open, with nothing appended between
            write_atomically(path, data, sync_dir=False, sync_file=False)
            self._unsynced_snapshots.append(path)
            self._snapshot_on_disk = (offset, data)

    def _latest_snapshot(self, at_most: int) -> tuple[int, ProducerStateTable] | None:
        for offset in reversed(self._snapshot_offsets()):
            if offset > at_most:
                continue
            try:
                with open(self._snapshot_path(offset), "rb") as f:
                    data = f.read()
                table = ProducerStateTable.from_bytes(data)
                self._snapshot_on_disk = (offset, data)
                return offset, table
            except (OSError, SnapshotError):
                if not self.read_only:
                    os.unlink(self._snapshot_path(offset))
        return None

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        offsets = self._snapshot_offsets()
        doomed = [o for o in offsets if above is not None and o > above]
        if below is not None:
            doomed += [o for o in offsets if o < below][:-1]
        for offset in doomed:
            _unlink(self._snapshot_path(offset))

    def _replace_segment(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Segment:
        new = run_steps(self._write_replacement(old, batches))
        durable = self._install_replacement(old, new)
        if durable is not None:
            durable()
        return new

    def _checkpoint_work(self) -> BlockingWork | None:
        def write() -> None:
            with self._files_lock:
                if not self._closed:
                    self._write_checkpoints(sync_directory=False)

        return write

    def _log_start_work(self) -> BlockingWork | None:
        offset, state = self._next_offset, self._producers.to_bytes()
        path = self._snapshot_path(offset)

        def write() -> None:
            with self._files_lock:
                if self._closed:
                    return
                write_atomically(path, state, sync_dir=False, sync_file=False)
                self._unsynced_snapshots.append(path)
                self._write_checkpoints(sync_directory=False)

        return write

    def _write_replacement(
        self, old: Segment, batches: Sequence[tuple[Sequence[BufferLike], StoredHeader]]
    ) -> Steps[Segment]:
        """The compacted copy of ``old`` as ``<base>.log.cleaned`` (and its indexes): made
        and made durable in blocking work, written in steps of one batch."""
        assert isinstance(old, FileSegment)
        made: list[FileSegment] = []

        def make() -> None:
            segment = self._segment(old.base_offset, CLEANED_SUFFIX)
            made.append(segment)
            if segment.size:  # a leftover of an interrupted pass
                os.ftruncate(segment.file.fileno(), 0)
                segment.size = 0

        done = False
        try:
            yield make
            new = made[0]
            for parts, header in batches:
                new.append_batch(parts, header, header.base_offset)
                yield None
            aborted = list(old.aborted)

            def seal() -> None:
                new.seal()
                new.txn_index.reset(aborted)
                new.flush()

            yield seal
            done = True
            return new
        finally:
            if not done and made:
                self._discard_replacement(made[0])

    def _install_replacement(self, old: Segment, new: Segment) -> BlockingWork | None:
        assert isinstance(old, FileSegment) and isinstance(new, FileSegment)
        new.rename(SWAP_SUFFIX)  # once the .log is a .swap, the swap is committed
        old.delete()
        new.rename("")

        def sync() -> None:
            with self._files_lock:
                if not self._closed:
                    fsync_dir(self.directory)

        return sync

    def _discard_replacement(self, new: Segment) -> None:
        new.delete()  # its descriptor to the reaper first, if there is one
        new.close()

    def _checkpoint_rows(self) -> dict[str, list[list[int]]]:
        return {
            LOG_START_FILE: [[self._log_start]],
            LEADER_EPOCH_FILE: [[e.epoch, e.start_offset] for e in self._epochs],
            CLEANER_FILE: [[self._first_dirty_offset]],
        }

    def _checkpoint(self) -> None:
        self._write_checkpoints(sync_directory=False)

    def _write_checkpoints(self, *, sync_directory: bool) -> None:
        """Write the checkpoints that changed, then fsync the directory once (also
        when ``sync_directory``, for new segment files)."""
        with self._files_lock:
            if self._unsynced_snapshots:
                for path in self._unsynced_snapshots:
                    fsync_file(path)
                self._unsynced_snapshots.clear()
                sync_directory = True
            changed = [
                (name, rows)
                for name, rows in self._checkpoint_rows().items()
                if self._written.get(name) != rows
            ]
            for name, rows in changed:
                self._written.pop(name, None)  # not known to be on disk until the sync
                write_checkpoint(self._path(name), rows, sync_dir=False)
            if changed or sync_directory:
                self._sync_directory()
                self._written.update(changed)

    def _sync_directory(self) -> None:
        """fsync the directory (its new files, renames), the first time also its parent's
        entry for it."""
        if self._parent_ticket:
            if self._parent_sync is not None:
                self._parent_sync.sync(self._parent_ticket)
            else:
                fsync_dir(os.path.dirname(self.directory) or ".")
            self._parent_ticket = 0
        fsync_dir(self.directory)
        self._directory_dirty = False

    def _sync(self, segments: Sequence[Segment]) -> None:
        end = self._next_offset
        for segment in segments:
            if segment.next_offset > self.recovery_point or segment is self._active:
                segment.flush()
        # New segment files must survive with their data, and the checkpoints (a new
        # leader epoch) must be on disk before the recovery point passes what they cover.
        self._write_checkpoints(sync_directory=self._directory_dirty)
        # An older recovery point survives if this rename is lost: recovery then does more.
        if end != self._recovery_point_on_disk:
            with self._files_lock:
                write_checkpoint(self._path(RECOVERY_POINT_FILE), [[end]], sync_dir=False)
                self._recovery_point_on_disk = end
        self.recovery_point = end

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        if self.recovery_point > self._next_offset:
            self.recovery_point = self._next_offset
            write_checkpoint(self._path(RECOVERY_POINT_FILE), [[self.recovery_point]])
            self._recovery_point_on_disk = self.recovery_point

    def tick(self) -> None:
        """Write out buffered appends, then the base class's time-driven duties."""
        self._check_open()
        self._active.flush_buffer()
        super().tick()

    # -- closing ---------------------------------------------------------------

    def close(self) -> None:
        """Flush, write a producer snapshot and the clean-shutdown marker, release files."""
        if self._closed:
            return
        self._save_snapshot(self._next_offset, self._producers)  # the flush syncs it
        self.flush()
        with self._files_lock:
            self._checkpoint()
            for segment in self._segments:
                segment.close()
            write_atomically(self._path(CLEAN_SHUTDOWN_FILE), b"")
            self._closed = True

    def close_in_steps(self) -> Generator[None, None, None]:
        """:meth:`close` for a storage closing many logs at once, with no fsync of its
        own. At each yield the caller makes everything written so far durable (one
        sync of the file system for all its logs) before resuming:

        1. the segments' buffered bytes and indexes, the producer snapshot, and the
           changed checkpoints staged beside their files, then the files closed;
        2. the staged checkpoints moved into place, but the recovery point's;
        3. the recovery point (only once the leader epochs it passes are on disk,
           as in a flush) and the clean-shutdown marker, which is never on disk
           without what it vouches for; a crash before the caller's last sync
           costs the next open a recovery at most.
        """
        if self._closed:
            return
        with self._files_lock:
            self._save_snapshot(self._next_offset, self._producers)
            for segment in self._segments:
                assert isinstance(segment, FileSegment)
                segment.close_unsynced()
            rows = self._checkpoint_rows()
            staged = [self._path(n) for n, r in rows.items() if self._written.get(n) != r]
            for path in staged:
                stage(path, checkpoint_bytes(rows[os.path.basename(path)]))
            recovery_point = None
            if self._recovery_point_on_disk != self._next_offset:
                recovery_point = self._path(RECOVERY_POINT_FILE)
                stage(recovery_point, checkpoint_bytes([[self._next_offset]]))
            self._unsynced_snapshots.clear()
            self._closed = True
        yield
        for path in staged:
            install_staged(path)
        yield
        if recovery_point is not None:
            install_staged(recovery_point)
        create_empty(self._path(CLEAN_SHUTDOWN_FILE))

    def abandon(self) -> None:
        """Release the files without flushing or marking a clean shutdown (a simulated crash:
        buffered appends are lost)."""
        with self._files_lock:
            for segment in self._segments:
                assert isinstance(segment, FileSegment)
                segment.drop_buffer()
                segment.close()
            self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self.abandon()
        shutil.rmtree(self.directory, ignore_errors=True)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _listdir_if_any(directory: str) -> list[str]:
    """The names in ``directory``; none when it does not exist."""
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _is_segment_log(name: str) -> bool:
    stem = name[: -len(LOG_SUFFIX)]
    return name.endswith(LOG_SUFFIX) and len(stem) == 20 and stem.isdigit()
