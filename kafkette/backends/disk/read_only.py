"""ReadOnlyDiskLog: a partition log opened for reading without changing a byte.

What a stopped broker left (``kafkette`` commands with ``-b file://DIR``):
opening recovers as :class:`~kafkette.backends.disk.log.DiskLog` does, but
in memory. After a crash the log ends at the last valid batch (what follows
is ignored, not truncated), indexes that fail their checks are rebuilt in
memory, a compaction swap that a crash interrupted is read from its ``.swap``
files, and producer state comes from the snapshots and a scan. Nothing under
the directory is created, written, truncated, renamed or deleted: segment
files are opened for reading only, no checkpoint, snapshot or clean-shutdown
marker is written or removed, and a missing directory is an empty log.

Reads, offsets, timestamps, producer state and aborted transactions work as
on any log. Appends, truncation, DeleteRecords and rolls raise
:class:`~kafkette.errors.PolicyViolationError` naming the log; retention,
compaction, flushes and ticks do nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NoReturn

from kafkette.backends.disk.log import DiskLog
from kafkette.backends.producer_state import ProducerStateTable
from kafkette.backends.segment import Segment
from kafkette.backends.types import AppendInfo, CleanerStats
from kafkette.errors import PolicyViolationError


class ReadOnlyDiskLog(DiskLog):
    """A :class:`DiskLog` that never writes (see the module)."""

    read_only = True

    def _refuse(self, what: str) -> NoReturn:
        raise PolicyViolationError(
            f"cannot {what} {self.topic}-{self.partition}: its log in {self.directory} "
            "is opened read-only"
        )

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = -1,
        check_crc: bool = True,
    ) -> AppendInfo:
        self._refuse("append to")

    def truncate_to(self, offset: int) -> None:
        self._refuse("truncate")

    def delete_records_before(self, offset: int) -> int:
        self._refuse("delete records of")

    def roll(self) -> None:
        self._refuse("roll")

    def enforce_retention(self) -> int:
        return 0

    def compact(self, *, force: bool = False) -> CleanerStats | None:
        return None

    def flush(self) -> None:
        self._check_open()

    def tick(self) -> None:
        self._check_open()

    # -- what would persist: nothing is --------------------------------------------

    def _save_snapshot(self, offset: int, table: ProducerStateTable) -> None:
        pass

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        pass

    def _checkpoint(self) -> None:
        pass

    def _sync(self, segments: Sequence[Segment]) -> None:
        pass

    def close(self) -> None:
        """Release the files (nothing is flushed or marked)."""
        if self._closed:
            return
        for segment in self._segments:
            segment.close()
        self._closed = True

    def close_in_steps(self) -> Generator[None, None, None]:
        """:meth:`close`: nothing to write, no step to wait for."""
        self.close()
        yield from ()

    def delete(self) -> None:
        self._refuse("delete")
