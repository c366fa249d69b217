"""DiskStorage: one directory per partition under a root directory.

``DiskStorage(root, read_only=True)`` opens every log as a
:class:`~kafkette.backends.disk.read_only.ReadOnlyDiskLog` and creates nothing:
a missing root has no partitions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from kafkette.backends.config import LogConfig
from kafkette.backends.disk.checkpoint import DirectorySync
from kafkette.backends.disk.log import DiskLog
from kafkette.backends.disk.read_only import ReadOnlyDiskLog
from kafkette.backends.disk.reaper import FileReaper, doomed_name, leftover_trees
from kafkette.backends.log import Log, Storage
from kafkette.clocks import LogClockMs, wall_ms_int
from kafkette.errors import PolicyViolationError


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, Kafka's partition directory name."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """The topic-partition a directory name stands for, or None."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


class DiskStorage(Storage):
    """Partition logs stored under ``root``.

    :meth:`open_log` may run in a worker thread while the owner's thread uses
    other logs (topic creation does): it touches only the new log and the table
    of logs, one dictionary operation at a time.
    """

    blocking_io = True

    def __init__(
        self,
        root: str,
        *,
        clock: LogClockMs = wall_ms_int,
        default_config: LogConfig | None = None,
        write_buffer_bytes: int = 0,
        read_only: bool = False,
    ) -> None:
        """Logs under ``root``; ``write_buffer_bytes`` is passed to every :class:`DiskLog`;
        ``read_only`` opens them without writing (see the module)."""
        self.root = root
        self.read_only = read_only
        self._write_buffer = write_buffer_bytes
        self._clock = clock
        self._default = default_config or LogConfig()
        self._logs: dict[tuple[str, int], DiskLog] = {}
        self._root_sync = DirectorySync(root)
        """One fsync of ``root`` covers every partition directory made before it."""
        self._reaper = FileReaper()
        """What deletions leave to free off the owner's thread (see :meth:`reap`)."""
        if not read_only:
            os.makedirs(root, exist_ok=True)
            for path in leftover_trees(root):
                self._reaper.remove_tree(path)

    def open_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None and not log._closed:
            if config is not None:
                log.update_config(config)
            return log
        log = (ReadOnlyDiskLog if self.read_only else DiskLog)(
            os.path.join(self.root, partition_dir_name(topic, partition)),
            topic,
            partition,
            config or self._default,
            clock=self._clock,
            write_buffer_bytes=self._write_buffer,
            parent_sync=self._root_sync,
            reaper=self._reaper,
        )
        self._logs[key] = log
        return log

    def open_many(self, wanted: Sequence[tuple[str, int, LogConfig | None]]) -> list[Log]:
        """Several at once in worker threads: each open of a log a clean shutdown closed
        syncs its directory (the marker's removal), one recovering reads and writes more."""
        if len(wanted) < 2:
            return super().open_many(wanted)
        with ThreadPoolExecutor(min(CLOSE_THREADS, len(wanted))) as pool:
            return list(pool.map(lambda w: self.open_log(*w), wanted))

    def list_partitions(self) -> list[tuple[str, int]]:
        found = []
        if self.read_only and not os.path.isdir(self.root):
            return []
        for name in os.listdir(self.root):
            parsed = parse_partition_dir(name)
            if parsed is not None and os.path.isdir(os.path.join(self.root, name)):
                found.append(parsed)
        return sorted(found)

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and rename its directory to ``<name>.<id>-delete`` (quick: the
        partition is gone from :meth:`list_partitions` at once, a new log of that name
        starts empty); :meth:`reap` removes the directory and its files."""
        if self.read_only:
            raise PolicyViolationError(
                f"cannot delete {topic}-{partition}: {self.root} is opened read-only"
            )
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            log.abandon()
        directory = os.path.join(self.root, partition_dir_name(topic, partition))
        doomed = doomed_name(directory)
        try:
            os.rename(directory, doomed)
        except FileNotFoundError:
            return
        self._reaper.remove_tree(doomed)

    @property
    def reap_pending(self) -> bool:
        return self._reaper.pending

    def reap(self) -> int:
        return self._reaper.reap()

    def close(self) -> None:
        """Close every log (each one's flush, snapshot, checkpoints and clean-shutdown
        marker: a few fsyncs), several at a time in worker threads, then free what
        deletions left. A log that fails to close does not stop the others; the
        first failure is raised after."""
        logs = list(self._logs.values())
        self._logs.clear()
        if len(logs) > 1:
            with ThreadPoolExecutor(min(CLOSE_THREADS, len(logs))) as pool:
                outcomes = list(pool.map(_close, logs))
        else:
            outcomes = [_close(log) for log in logs]
        failures = [f for f in outcomes if f is not None]
        self._reaper.reap()
        if failures:
            raise failures[0]


CLOSE_THREADS = 16
"""Logs opened or closed at once by :meth:`DiskStorage.open_many` and
:meth:`DiskStorage.close`: their fsyncs wait on the device, and a journaling file
system commits concurrent ones together."""


def _close(log: Log) -> BaseException | None:
    try:
        log.close()
    except Exception as exc:
        return exc
    return None
