"""The Log interface (one per partition) and the Storage interface that makes logs."""

from __future__ import annotations

import abc
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TypeAlias, TypeVar

from kafkette.backends.config import LogConfig
from kafkette.backends.producer_state import ProducerStateTable
from kafkette.backends.types import (
    AbortedTxn,
    AppendInfo,
    BatchInfo,
    CleanerStats,
    LogSlice,
    TimestampOffset,
)

_T = TypeVar("_T")

BlockingWork: TypeAlias = Callable[[], object]
"""File work that may block for milliseconds (an fsync, creating a file)."""

Steps: TypeAlias = Generator[BlockingWork | None, None, _T]
"""Work done in steps: the generator yields None where its driver may let others run,
or :data:`BlockingWork` for the driver to run before the next step (an event loop runs
it in a worker thread, where it may overlap other uses of the log: the steps after it
check what changed); its return value is the result. :func:`run_steps` drives one at
once; ``server/maintenance.py`` drives them on the broker's event loop."""


def run_steps(steps: Steps[_T]) -> _T:
    """Run ``steps`` to its end in this thread (blocking work included); its result."""
    try:
        item = next(steps)
        while True:
            if item is not None:
                try:
                    item()
                except Exception as exc:
                    item = steps.throw(exc)
                    continue
            item = next(steps)
    except StopIteration as stop:
        result: _T = stop.value
        return result


class Log(abc.ABC):
    """One partition's log: an append-only sequence of magic 2 record batches.

    Offsets are assigned by :meth:`append`; reads return whole stored batches
    unchanged. Below the log start offset nothing can be read; the high
    watermark and the last stable offset bound what consumers may see and are
    set by the broker (the log only keeps them within ``[log start, log end]``).
    A log is used by one owner at a time (no internal locking).
    """

    topic: str
    partition: int

    @property
    @abc.abstractmethod
    def config(self) -> LogConfig:
        """The log's current configuration."""

    @abc.abstractmethod
    def update_config(self, config: LogConfig) -> None:
        """Apply a new configuration (effective for the next append, roll, retention, clean)."""

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int:
        """First offset that can be read."""

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int:
        """Offset the next appended record will get."""

    @property
    @abc.abstractmethod
    def high_watermark(self) -> int:
        """Offset up to which records are committed (set by the broker)."""

    @abc.abstractmethod
    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[log start, log end]``; returns the value set."""

    @property
    @abc.abstractmethod
    def last_stable_offset(self) -> int:
        """First offset of an open transaction, or the high watermark when none is open."""

    @property
    @abc.abstractmethod
    def size_in_bytes(self) -> int:
        """Bytes of stored batches."""

    @abc.abstractmethod
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = -1,
        check_crc: bool = True,
    ) -> AppendInfo:
        """Append one or more whole magic 2 batches, assigning their offsets.

        Each batch's baseOffset is rewritten to the log end offset (and, for a
        ``LogAppendTime`` log, its timestamp to the clock's time, recomputing
        the CRC). A ``leader_epoch`` >= 0 is stamped as partitionLeaderEpoch.
        Raises ``CorruptMessageError`` for malformed batches,
        ``RecordListTooLargeError`` for a batch over ``max.message.bytes`` and
        ``InvalidRecordError`` for a keyless record on a compacted log.
        """

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> LogSlice:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        At least one batch is returned when one lies below ``upper_bound``
        (default: the log end offset), even if it is larger than
        ``max_bytes``; batches at or past ``upper_bound`` are never returned.
        Raises ``OffsetOutOfRangeError`` outside ``[log start, log end]``.
        """

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record (in offset order) with a timestamp >= ``timestamp``, if any."""

    @abc.abstractmethod
    def max_timestamp(self) -> TimestampOffset | None:
        """The record with the largest timestamp (the first one reaching it), if any."""

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset``; the log end becomes ``offset``."""

    @abc.abstractmethod
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset to ``offset`` (DeleteRecords); returns the new log start.

        ``offset`` must not exceed the high watermark (``OffsetOutOfRangeError``).
        Whole segments below the new start are deleted.
        """

    def delete_records_steps(self, offset: int) -> Steps[int]:
        """:meth:`delete_records_before` as :data:`Steps`, its file work (the producer
        snapshot and checkpoints of the new log start, with their fsyncs) yielded as
        blocking work; done when the steps end (the default: all in one step)."""
        return self.delete_records_before(offset)
        yield  # a generator

    @abc.abstractmethod
    def enforce_retention(self) -> int:
        """Delete whole non-active segments past ``retention.ms``/``retention.bytes``
        or below the log start offset; returns the number of segments deleted."""

    def retention_steps(self) -> Steps[int]:
        """:meth:`enforce_retention` as :data:`Steps` (the default: all in one step)."""
        return self.enforce_retention()
        yield  # a generator

    @abc.abstractmethod
    def compact(self, *, force: bool = False) -> CleanerStats | None:
        """Run one compaction pass if the log is compacted and dirty enough
        (``force`` ignores ``min.cleanable.dirty.ratio``); None when nothing was cleaned."""

    def compaction_steps(self, *, force: bool = False) -> Steps[CleanerStats | None]:
        """:meth:`compact` as :data:`Steps`, so that an event loop can run a pass without
        stopping for it (the default: the whole pass in one step)."""
        return self.compact(force=force)
        yield  # a generator

    @abc.abstractmethod
    def roll(self) -> None:
        """Start a new active segment now (a no-op when the active one is empty)."""

    @abc.abstractmethod
    def iter_batch_infos(self, start_offset: int | None = None) -> Iterator[BatchInfo]:
        """Producer fields of every stored batch from ``start_offset`` (default log start)."""

    @abc.abstractmethod
    def producer_state(self) -> ProducerStateTable:
        """Producer state as rebuilt from the log (snapshot + scan on open, kept current)."""

    @abc.abstractmethod
    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_bound)``, by first offset."""

    @abc.abstractmethod
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as OffsetForLeaderEpoch answers: the largest known epoch
        <= ``epoch`` and the offset where the next epoch starts (the log end for the
        latest); ``(-1, -1)`` when no epoch that old is known."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make everything appended so far durable (a no-op in memory)."""

    @abc.abstractmethod
    def tick(self) -> None:
        """Time-driven duties: flush when ``flush.ms`` has passed since the last flush."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release the log; it cannot be used afterwards."""


class Storage(abc.ABC):
    """Where a broker's logs live: opens, lists and deletes partition logs."""

    blocking_io = False
    """Whether opening a log does file work that may block for milliseconds (creating
    a directory and files waits on the file system's journal): an event loop opens
    many logs of such a storage in a worker thread (see ``server/topic_creation.py``)."""

    @abc.abstractmethod
    def open_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """Open the log of ``topic``/``partition``, creating it when absent."""

    @abc.abstractmethod
    def list_partitions(self) -> list[tuple[str, int]]:
        """Topic-partitions that have a log, sorted."""

    @abc.abstractmethod
    def delete_log(self, topic: str, partition: int) -> None:
        """Close and delete a partition's log (no error when absent)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every log opened through this storage (and finish :meth:`reap`'s work)."""

    @property
    def reap_pending(self) -> bool:
        """Whether deleted logs or segments wait for :meth:`reap`."""
        return False

    def reap(self) -> int:
        """Finish deleting what :meth:`delete_log`, retention, DeleteRecords and compaction
        deleted: free the files' blocks (on disk, about 0.3 s per GiB here). Blocks for as
        long as that takes, so an event loop calls it in a worker thread; safe to call
        there while the owner uses the logs. Returns the number of items freed."""
        return 0

    def open_logs(
        self, configs: Mapping[str, LogConfig] | None = None
    ) -> dict[tuple[str, int], Log]:
        """Open every existing partition log, with its topic's config from ``configs``."""
        configs = configs or {}
        wanted = [(t, p, configs.get(t)) for t, p in self.list_partitions()]
        return {(t, p): log for (t, p, _), log in zip(wanted, self.open_many(wanted), strict=True)}

    def open_many(self, wanted: Sequence[tuple[str, int, LogConfig | None]]) -> list[Log]:
        """:meth:`open_log` of each ``(topic, partition, config)``, in order (a storage whose
        opening blocks may open several at once)."""
        return [self.open_log(topic, partition, config) for topic, partition, config in wanted]
