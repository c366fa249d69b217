"""Storage backends: one :class:`Log` per partition, in memory or on disk.

The broker core talks to a :class:`Storage` (open, list and delete partition
logs) and to each partition's :class:`Log`: ``append`` (assigns offsets by
rewriting each batch's baseOffset, stamps LogAppendTime), ``read`` (whole
stored batches, never parsed, as a :class:`LogSlice`: memoryviews in memory,
a file region for ``os.sendfile`` on disk), offsets bookkeeping (log start,
log end, high watermark, last stable offset), ``offset_for_timestamp``,
``truncate_to``, ``delete_records_before``, retention, compaction, producer
state and aborted transactions. :class:`MemoryLog` and :class:`DiskLog` share
all of that through :class:`~kafkette.backends.segmented.SegmentedLog`; they
differ only in their segments.

On-disk layout (one directory per partition, ``<topic>-<partition>``)::

    00000000000000000000.log        batches as received, offsets rewritten; a
                                    segment is named by its base offset (20 digits)
    00000000000000000000.index      sparse offset index: relative offset int32,
                                    position int32; one entry for the first batch
                                    after more than index.interval.bytes
    00000000000000000000.timeindex  largest timestamp so far int64, relative offset
                                    int32; added with offset entries and at roll
    00000000000000000000.txnindex   aborted transactions whose marker is in the
                                    segment (34-byte entries, as Kafka's)
    00000000000000004096.snapshot   producer state before that offset (format in
                                    producer_state.py); written at roll (synced by
                                    the next flush or checkpoint write), when the
                                    log start moves, and at close
    leader-epoch-checkpoint         "0", count, then "epoch start_offset" lines
    recovery-point-offset-checkpoint   offset up to which everything was fsynced
    log-start-offset-checkpoint     the log start offset (DeleteRecords, retention)
    cleaner-offset-checkpoint       first offset compaction has not cleaned yet
    clean-shutdown                  present only while the log is closed cleanly

Checkpoints are replaced atomically (temporary file, fsync, rename, fsync
of the directory), each only when its content changed. A new leader epoch is
kept in memory until the next flush, which writes it before moving the
recovery point past its first batch (or until close, a truncation, a log
start move or a compaction rewrite): an append never waits on a checkpoint.
Creating a log makes its directory and first segment file and syncs nothing;
its first flush fsyncs the directory and, once for every log made before,
the storage root.

A segment rolls at ``segment.bytes``, when a batch's timestamp is more than
``segment.ms`` past the segment's first, when an index is full
(``segment.index.bytes``) or when relative offsets would overflow. A lookup
bisects the segment base offsets, then the offset index, then reads batch
headers forward. Index entries reach their files at flush and close (a
segment's index files are made by its first flush; a roll only adds the last
time index entry, and waits for no fsync): entries after the recovery point
are rebuilt on recovery anyway.

Deleting is quick where the caller waits and slow elsewhere: a segment's
files are unlinked at once and its descriptor goes to the storage's
:class:`~kafkette.backends.disk.reaper.FileReaper` (the last close of a large
file frees its blocks, about 0.3 s per GiB); a partition's directory is
renamed to ``<topic>-<partition>.<id>-delete``. :meth:`Storage.reap` frees
them (the broker calls it in a worker thread). Retention and compaction also
run as :data:`~kafkette.backends.log.Steps`, yielding their fsyncs and file
creations as work for a worker thread.

Flushing follows ``flush.messages`` / ``flush.ms`` (by default never: the OS
writes back, as in Kafka); a flush fsyncs the segments past the recovery
point with their indexes, then moves the recovery point to the log end.
``DiskLog(write_buffer_bytes=N)`` may gather appends in memory before writing
them (off by default: an append is in the page cache when it returns).

Opening a log:

- ``-delete`` directories a crash left are removed by the storage's next reap.
- ``.cleaned`` and ``.tmp`` leftovers are deleted; a compaction swap
  (``.swap`` files) found complete is finished (the new segment replaces the
  old one; its indexes are rebuilt if they did not make it).
- After a clean shutdown every segment is trusted (the marker is removed and
  the directory synced before anything is appended); an index that fails its
  checks (size, ordering, bounds, last entry pointing at the right batch,
  tail length, final time entry of a sealed segment) is rebuilt from the log.
- Otherwise (a crash) segments below the one holding the recovery point are
  trusted the same way, and from that segment on every batch is re-read: its
  length, magic, CRC and offsets (above the previous batch's) are checked;
  the segment is truncated at the first invalid byte, every later segment is
  deleted, and the offset and time indexes of the re-read segments are
  rebuilt. Nothing below the recovery point is lost; a damaged batch in an
  older, flushed segment is not looked at (as in Kafka): it is served as
  stored and the reader's CRC check rejects it.
- Leader epochs are the checkpoint's entries below the log end, then the
  epochs newer than its last that the re-read batches are stamped with (a
  crash can lose only checkpoint entries that start after the recovery
  point).
- Producer state comes from the newest snapshot at or below the log end plus
  a scan of the batches after it, which also rebuilds the ``.txnindex``
  entries from there (from the log start if any ``.txnindex`` was unreadable).
  Producer id, epoch and sequences of every batch stay in the log, so
  :meth:`Log.iter_batch_infos` can always rebuild it.
- Every re-read segment is then fsynced and the recovery point moved to the
  log end.

``DiskStorage(root, read_only=True)`` opens every log as a
:class:`~kafkette.backends.disk.read_only.ReadOnlyDiskLog`: the same steps, in
memory only (nothing under the directory is created, written, truncated,
renamed or deleted), and every write refused.
"""

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog, DiskStorage
from kafkette.backends.log import Log, Storage
from kafkette.backends.memory import MemoryLog, MemoryStorage
from kafkette.backends.producer_state import ProducerEntry, ProducerStateTable
from kafkette.backends.types import (
    AbortedTxn,
    AppendInfo,
    BatchInfo,
    CleanerStats,
    LogSlice,
    TimestampOffset,
)

__all__ = [
    "AbortedTxn",
    "AppendInfo",
    "BatchInfo",
    "CleanerStats",
    "DiskLog",
    "DiskStorage",
    "Log",
    "LogConfig",
    "LogSlice",
    "MemoryLog",
    "MemoryStorage",
    "ProducerEntry",
    "ProducerStateTable",
    "Storage",
    "TimestampOffset",
]
