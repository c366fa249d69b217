"""One broker per data directory, enforced with an advisory file lock.

``<data_dir>/.lock`` is locked (``flock``, exclusive, non-blocking) for the
broker's lifetime and holds the owner's pid and description. A second
process (``kafkette serve`` or a ``file://`` client) opening the same
directory gets :class:`DataDirLockedError` naming the holder. The lock goes
away with the process, also after SIGKILL.

A read-only opening (``file:///path?mode=ro``, what the ``kafkette`` command
uses) takes a shared lock on the same file, opened for reading only: it writes
nothing (no pid, no file created), any number of readers share the directory,
and a broker holding it, or starting while readers hold it, is refused.
"""

from __future__ import annotations

import fcntl
import os

from kafkette.errors import KafkaError

LOCK_FILE = ".lock"


class DataDirLockedError(KafkaError):
    """Another process is using this data directory."""

    name = "DATA_DIR_LOCKED"


class DataDirNotFoundError(KafkaError):
    """A data directory opened read-only does not exist."""

    name = "DATA_DIR_NOT_FOUND"


class DataDirLock:
    """An exclusive lock on a data directory (``shared``: a reader's lock, see the module)."""

    def __init__(self, data_dir: str, owner: str, *, shared: bool = False) -> None:
        self.path = os.path.join(data_dir, LOCK_FILE)
        self._fd = -1
        if shared:
            self._lock_shared(data_dir)
            return
        os.makedirs(data_dir, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(self._fd)
            os.close(self._fd)
            self._fd = -1
            raise DataDirLockedError(
                f"data directory {data_dir} is in use by another process ({holder})"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()}: {owner}\n".encode(), 0)

    def _lock_shared(self, data_dir: str) -> None:
        if not os.path.isdir(data_dir):
            raise DataDirNotFoundError(f"data directory {data_dir} does not exist")
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return  # no broker ever ran here: nothing to lock against, nothing is created
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = -1
            raise DataDirLockedError(
                f"data directory {data_dir} is in use by another process ({holder}); "
                "stop it to open the directory read-only"
            ) from None

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def _holder(fd: int) -> str:
    """Who holds the lock that ``fd``'s exclusive lock could not get."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:  # an exclusive holder: a broker, whose pid the file has
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
    fcntl.flock(fd, fcntl.LOCK_UN)
    # Only shared holders: readers, which write nothing (the file names an earlier broker).
    return "opened read-only, e.g. by a kafkette command with -b file://"
