"""One sync of a whole file system, for closing and opening thousands of logs at once.

Closing a disk log makes its data, checkpoints and clean-shutdown marker durable
with about seven fsyncs; each waits for a commit of the file system's journal, so
5,000 logs took 8-16 s to close here, even with 16 at a time. Linux's
``syncfs(2)`` makes everything written on one file system durable in one call
(a few tens of milliseconds after writing to thousands of files), so a storage
closing many logs writes them all without an fsync and syncs once between the
steps whose order matters (:meth:`~kafkette.backends.disk.log.DiskLog.close_in_steps`).

Python does not name ``syncfs``; it is called through :mod:`ctypes`. Where the C
library lacks it (not Linux), :func:`available` is false and logs are closed one
by one with their own fsyncs. Since Linux 5.8, ``syncfs`` reports a write-back
error of the file system (``EIO``) as an fsync does. It also writes what other
processes left unwritten on that file system, so on one busy with other writes a
close waits for those too.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any


def _load_syncfs() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = (ctypes.c_int,)
    function.restype = ctypes.c_int
    return function


_syncfs = _load_syncfs()


def available() -> bool:
    """Whether :func:`sync_filesystem` can be called here."""
    return _syncfs is not None


def sync_filesystem(path: str) -> None:
    """Make everything written to the file system holding ``path`` durable: file
    contents, new and renamed entries, in every directory. Raises ``OSError`` when
    the file system reports a failed write (or :func:`available` is false)."""
    if _syncfs is None:
        raise OSError("syncfs is not available on this platform")
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs of {path}: {os.strerror(code)}")
    finally:
        os.close(fd)
