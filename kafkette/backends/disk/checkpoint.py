"""Small checkpoint files, written atomically (temporary file, fsync, rename).

Layout, as Kafka's checkpoint files: a version line (``0``), a count line,
then one line per entry of space-separated integers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

CHECKPOINT_VERSION = 0

TMP_SUFFIX = ".tmp"
"""Beside its file, the next version of a checkpoint (an open removes leftovers)."""


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
    _write_file(path + TMP_SUFFIX, data, sync=sync_file)
    os.replace(path + TMP_SUFFIX, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


def stage(path: str, data: bytes) -> None:
    """Write ``data`` beside ``path``, not synced; :func:`install_staged` moves it into
    place once the caller made it durable (with one sync of the file system for many
    files), so that a crash leaves the old or the new content, never a torn one."""
    _write_file(path + TMP_SUFFIX, data, sync=False)


def install_staged(path: str) -> None:
    """Replace ``path`` with what :func:`stage` wrote for it (durable only after a
    sync of its directory)."""
    os.replace(path + TMP_SUFFIX, path)


def create_empty(path: str) -> None:
    """An empty file at ``path`` (a marker, whose content never matters: one create,
    no rename; durable after a sync of its directory)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _write_file(path: str, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_bytes(entries: Sequence[Sequence[int]]) -> bytes:
    """``entries`` (rows of integers) in the checkpoint file layout."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(" ".join(str(v) for v in row) for row in entries)
    return ("\n".join(lines) + "\n").encode()


def write_checkpoint(path: str, entries: Sequence[Sequence[int]], *, sync_dir: bool = True) -> None:
    """Write ``entries`` (rows of integers) as a checkpoint file."""
    write_atomically(path, checkpoint_bytes(entries), sync_dir=sync_dir)


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
