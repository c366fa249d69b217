"""One broker per data directory, enforced with an advisory file lock.

``<data_dir>/.lock`` is locked (``flock``, exclusive, non-blocking) for the
broker's lifetime and holds the owner's pid and description. A second
process (``kafkette serve`` or a ``file://`` client) opening the same
directory gets :class:`DataDirLockedError` naming the holder. The lock goes
away with the process, also after SIGKILL.
"""

from __future__ import annotations

import fcntl
import os

from kafkette.errors import KafkaError

LOCK_FILE = ".lock"


class DataDirLockedError(KafkaError):
    """Another process is using this data directory."""

    name = "DATA_DIR_LOCKED"


class DataDirLock:
    """An exclusive lock on a data directory."""

    def __init__(self, data_dir: str, owner: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, LOCK_FILE)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(self._fd)
            raise DataDirLockedError(
                f"data directory {data_dir} is in use by another process ({holder})"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()}: {owner}\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
