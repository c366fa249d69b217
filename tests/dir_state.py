"""A directory tree's exact state, to show that something left it untouched."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_state(root: str | Path) -> list[tuple[str, int, int, str]]:
    """(path, size, mtime in ns, sha256 of a file's bytes) of every file and directory
    under ``root`` (its own entry included), sorted."""
    state = [(".", 0, os.lstat(root).st_mtime_ns, "")]
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            digest = ""
            if os.path.isfile(path):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            state.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns, digest))
    return sorted(state)
