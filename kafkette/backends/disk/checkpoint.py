"""Small checkpoint files, written atomically (temporary file, fsync, rename).

Layout, as Kafka's checkpoint files: a version line (``0``), a count line,
then one line per entry of space-separated integers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

CHECKPOINT_VERSION = 0


def fsync_dir(directory: str) -> None:
    """Make renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """Make the content of the file at ``path`` durable (absent: nothing to do)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DirectorySync:
    """The fsync of one directory, shared by the entries made in it.

    Whoever creates an entry takes a ticket (:meth:`created`); before relying on
    the entry surviving a crash it calls :meth:`sync` with it, which fsyncs the
    directory unless a sync started after that ticket was taken already did:
    one fsync makes every entry created before it durable (partition
    directories made by the thousand cost one sync of their parent, at the
    first flush of any of them, instead of one each). Safe to use from several
    threads (logs are created in a worker thread, flushed on the event loop).
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._created = 0
        self._synced = 0

    def created(self) -> int:
        """A ticket for an entry just created in the directory."""
        with self._lock:
            self._created += 1
            return self._created

    def sync(self, ticket: int) -> None:
        """Make the entry of ``ticket`` (and every one before it) durable."""
        with self._lock:
            if self._synced >= ticket:
                return
            covered = self._created
        fsync_dir(self.directory)
        with self._lock:
            self._synced = max(self._synced, covered)


def write_atomically(
    path: str, data: bytes, *, sync_dir: bool = True, sync_file: bool = True
) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new content
    (``sync_file=False``: or, until :func:`fsync_file`, a damaged one)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync_file:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


def write_checkpoint(path: str, entries: Sequence[Sequence[int]], *, sync_dir: bool = True) -> None:
    """Write ``entries`` (rows of integers) as a checkpoint file."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(" ".join(str(v) for v in row) for row in entries)
    write_atomically(path, ("\n".join(lines) + "\n").encode(), sync_dir=sync_dir)


def read_checkpoint(path: str) -> list[list[int]] | None:
    """The rows of a checkpoint file, or None when it is missing or malformed."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    lines = text.split("\n")
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            return None
        count = int(lines[1])
        rows = [[int(v) for v in line.split()] for line in lines[2 : 2 + count]]
    except (ValueError, IndexError):
        return None
    if len(rows) != count:
        return None
    return rows
