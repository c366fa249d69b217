"""A model of what a power loss leaves of a DiskLog's directory, for crash tests.

:class:`PowerLoss` wraps the disk backend's file writes while a test drives a
log, recording what each fsync made durable:

- a checkpoint, snapshot or marker file (``write_atomically``: temporary file,
  fsync, rename) is durable in the version that was last renamed before an
  fsync of its directory; any later version may survive too, or not, each
  file independently (renames not yet synced may persist in any order); a
  version written without the fsync (a producer snapshot at a roll) may
  survive cut short, until ``fsync_file`` syncs the file;
- a segment's ``.log`` file keeps at least the bytes it held at its last
  fsync (``FileSegment.flush``) and loses any part of what was written after;
- a sync of the file system (``filesystem_sync.sync_filesystem``) makes every
  version and segment byte written before it durable; a checkpoint staged
  (``checkpoint.stage``) and installed without one between may survive torn.

:meth:`PowerLoss.strike` (after the log was abandoned) puts every such file
in one state a power loss could leave, chosen by the test's random source.
Unlinks and index files are not modelled: a deletion is taken as durable and
indexes are disposable (recovery checks and rebuilds them).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

import pytest

import kafkette.backends.disk.checkpoint as checkpoint
import kafkette.backends.disk.filesystem_sync as filesystem_sync
import kafkette.backends.disk.log as disk_log
from kafkette.backends.disk.segment import FileSegment

ABSENT = None


class PowerLoss:
    """Records writes and syncs under ``monkeypatch`` (see the module)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.versions: dict[str, list[bytes]] = {}
        """Each file's contents as renamed into place, oldest first."""
        self.durable: dict[str, int] = {}
        """Index in ``versions`` of the version a directory sync made durable."""
        self.synced_sizes: dict[str, int] = {}
        """Bytes of each segment file at its last fsync."""
        real_write = checkpoint.write_atomically
        real_fsync_dir = checkpoint.fsync_dir
        real_flush = FileSegment.flush

        self.unsynced: dict[str, int] = {}
        """Per file, the first version written without an fsync of its content since
        (``sync_file=False``): a power loss may leave that one or later ones torn."""
        real_fsync_file = checkpoint.fsync_file

        def write_atomically(
            path: str, data: bytes, *, sync_dir: bool = True, sync_file: bool = True
        ) -> None:
            real_write(path, data, sync_dir=False, sync_file=sync_file)
            self.versions.setdefault(path, []).append(bytes(data))
            if not sync_file:
                self.unsynced.setdefault(path, len(self.versions[path]) - 1)
            if sync_dir:
                fsync_dir(os.path.dirname(path) or ".")

        def fsync_file(path: str) -> None:
            real_fsync_file(path)
            self.unsynced.pop(path, None)

        def fsync_dir(directory: str) -> None:
            real_fsync_dir(directory)
            for path, versions in self.versions.items():
                if os.path.dirname(path) == directory:
                    self.durable[path] = len(versions) - 1

        def flush(segment: FileSegment) -> None:
            real_flush(segment)
            if not segment.read_only:
                self.synced_sizes[segment.log_path] = segment.size

        self.staged: dict[str, tuple[bytes, bool]] = {}
        """Per file, what :func:`checkpoint.stage` wrote beside it, and whether a sync of
        the file system made that durable before :func:`checkpoint.install_staged`."""
        self.syncs_left: int | None = None
        """How many syncs of the file system succeed before the power goes (None: all);
        the one after raises ``OSError`` without syncing."""
        real_stage, real_install = checkpoint.stage, checkpoint.install_staged
        real_create_empty = checkpoint.create_empty
        real_sync_filesystem = filesystem_sync.sync_filesystem

        def stage(path: str, data: bytes) -> None:
            real_stage(path, data)
            self.staged[path] = (bytes(data), False)

        def install_staged(path: str) -> None:
            real_install(path)
            data, synced = self.staged.pop(path)
            self.versions.setdefault(path, []).append(data)
            if not synced:
                self.unsynced.setdefault(path, len(self.versions[path]) - 1)

        def create_empty(path: str) -> None:
            real_create_empty(path)
            self.versions.setdefault(path, []).append(b"")

        def sync_filesystem(path: str) -> None:
            if self.syncs_left is not None:
                if self.syncs_left == 0:
                    raise OSError("power lost")
                self.syncs_left -= 1
            real_sync_filesystem(path)
            for file, versions in self.versions.items():
                self.durable[file] = len(versions) - 1
            self.unsynced.clear()
            self.staged = {file: (data, True) for file, (data, _) in self.staged.items()}
            for directory, _, names in os.walk(path):
                for name in names:
                    if name.endswith(".log"):
                        file = os.path.join(directory, name)
                        self.synced_sizes[file] = os.path.getsize(file)

        for module in (checkpoint, disk_log):
            monkeypatch.setattr(module, "write_atomically", write_atomically)
            monkeypatch.setattr(module, "fsync_dir", fsync_dir)
            monkeypatch.setattr(module, "fsync_file", fsync_file)
            monkeypatch.setattr(module, "stage", stage)
            monkeypatch.setattr(module, "install_staged", install_staged)
            monkeypatch.setattr(module, "create_empty", create_empty)
        monkeypatch.setattr(filesystem_sync, "sync_filesystem", sync_filesystem)
        monkeypatch.setattr(FileSegment, "flush", flush)

    def strike(self, directory: str, rng: random.Random) -> None:
        """Leave ``directory`` (of an abandoned log) as a power loss could."""
        for path, versions in self.versions.items():
            if os.path.dirname(path) != directory or not os.path.exists(path):
                continue  # deleted since: taken as durable
            durable = self.durable.get(path, -1)
            chosen = rng.randint(durable, len(versions) - 1)
            if chosen < 0:
                os.unlink(path)
            else:
                data = versions[chosen]
                if chosen >= self.unsynced.get(path, len(versions)):
                    data = data[: rng.randint(0, len(data))]  # its content never synced
                with open(path, "wb") as f:
                    f.write(data)
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if name.endswith(".log"):
                size = os.path.getsize(path)
                kept = rng.randint(min(self.synced_sizes.get(path, 0), size), size)
                os.truncate(path, kept)


@contextlib.contextmanager
def counting_syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Yields a list that gets one line per fsync (and per directory sync, file rename
    or file creation) made meanwhile, naming it."""
    calls: list[str] = []
    real_fsync, real_replace, real_open, real_mkdir = os.fsync, os.replace, os.open, os.mkdir

    def fsync(fd: int) -> None:
        calls.append(f"fsync {os.readlink(f'/proc/self/fd/{fd}')}")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        calls.append(f"rename {src} -> {dst}")
        real_replace(src, dst)

    def open_(path: str, flags: int, mode: int = 0o777, **kwargs: object) -> int:
        if flags & os.O_CREAT and not os.path.exists(path):
            calls.append(f"create {path}")
        return real_open(path, flags, mode, **kwargs)  # type: ignore[arg-type]

    def mkdir(path: str, mode: int = 0o777, **kwargs: object) -> None:
        calls.append(f"mkdir {path}")
        real_mkdir(path, mode, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        patch.setattr(os, "replace", replace)
        patch.setattr(os, "open", open_)
        patch.setattr(os, "mkdir", mkdir)
        yield calls
