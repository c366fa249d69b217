"""FileReaper: the slow end of deleting files, left for a worker thread.

Removing a name is quick; freeing the blocks of a large file is not (about
0.3 s per GiB here), and the file system does it when the last name *and* the
last descriptor of the file are gone. So a disk log deletes a segment by
unlinking its files while its descriptor is still open, and hands the
descriptor (a :class:`~kafkette.backends.types.FileRef`) to the reaper; a
deleted partition's directory is renamed to ``<name>.<id>-delete`` (Kafka's
name for it) and handed over whole. :meth:`FileReaper.reap`, run in a worker
thread, drops the descriptors (the last reference closes the file, there) and
removes the directories.

A descriptor still referred to elsewhere (a fetch response being sent from it)
closes when that reference goes, where it goes. A ``-delete`` directory left
by a crash is found again when the storage opens (:func:`leftover_trees`).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid

from kafkette.backends.types import FileRef

DELETE_SUFFIX = "-delete"


def doomed_name(directory: str) -> str:
    """Where a partition directory goes to be removed: ``<directory>.<id>-delete``."""
    return f"{directory}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def leftover_trees(root: str) -> list[str]:
    """Directories under ``root`` renamed for removal and not removed (a crash)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(root, n) for n in names if n.endswith(DELETE_SUFFIX))


class FileReaper:
    """Files and directories waiting to be freed; safe to use from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: list[FileRef] = []
        self._trees: list[str] = []

    def release(self, file: FileRef) -> None:
        """Keep ``file`` (unlinked, its owner's reference dropped) until :meth:`reap`."""
        with self._lock:
            self._files.append(file)

    def remove_tree(self, path: str) -> None:
        """Remove the directory ``path`` (already renamed out of the way) at :meth:`reap`."""
        with self._lock:
            self._trees.append(path)

    @property
    def pending(self) -> bool:
        """Whether :meth:`reap` has work."""
        return bool(self._files or self._trees)

    def reap(self) -> int:
        """Free what is waiting (blocks for as long as that takes: call it from a worker
        thread); returns the number of files and directories freed."""
        with self._lock:
            files, self._files = self._files, []
            trees, self._trees = self._trees, []
        count = len(files) + len(trees)
        files.clear()  # the last reference closes each file: its blocks are freed here
        for path in trees:
            shutil.rmtree(path, ignore_errors=True)
        return count
