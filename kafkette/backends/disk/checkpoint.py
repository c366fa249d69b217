"""Small checkpoint files, written atomically (temporary file, fsync, rename).

Layout, as Kafka's checkpoint files: a version line (``0``), a count line,
then one line per entry of space-separated integers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

CHECKPOINT_VERSION = 0


def fsync_dir(directory: str) -> None:
    """Make renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new content."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
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
