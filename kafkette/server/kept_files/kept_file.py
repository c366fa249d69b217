"""A small file a broker keeps in its data directory, replaced whole and written off
the event loop while the broker runs (#30).

The topics file, the dynamic configs, the ACLs, the SCRAM credentials and the
producer-id block are each rewritten in full at a change: a temporary file,
fsynced, renamed over the old one, then the directory fsynced. Those fsyncs cost
milliseconds, which must not stall every other client of the broker, so while
:meth:`KeptFile.keep_written` runs (a served broker's background task) a change
only records the new content, a worker thread writes it, and the request that
made the change awaits :meth:`KeptFile.saved` before it is answered. The newest
content wins and the file never goes back to an older one. Without the
background task (a broker opened to be inspected, start-up, tests) a change is
written at once on the caller's thread.
"""

from __future__ import annotations

import logging
import threading

import anyio
import anyio.to_thread

from kafkette.backends.disk.checkpoint import write_atomically
from kafkette.errors import PolicyViolationError

logger = logging.getLogger(__name__)


class KeptFile:
    """One file of the data directory whose newest content is written in a worker thread."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._text: str | None = None
        self._version = 0
        self._saved_version = 0
        self._lock = threading.Lock()
        self._changed: anyio.Event | None = None
        """Set at a change while :meth:`keep_written` runs; None when it does not."""

    def change(self, text: str) -> int:
        """Make ``text`` the file's content: written by :meth:`keep_written`'s worker
        thread when it runs (await :meth:`saved` before telling anyone), else at once.
        Returns the change's number, for :meth:`holds`."""
        if self.read_only:
            raise PolicyViolationError(
                f"cannot write {self.path}: the data directory is opened read-only"
            )
        self._text = text
        self._version += 1
        if self._changed is None:
            self.write_now()
        else:
            self._changed.set()
        return self._version

    def holds(self, change: int) -> bool:
        """Whether the file on disk holds change number ``change`` (or a later one)."""
        return self._saved_version >= change

    def write_now(self) -> None:
        """Write a pending change on this thread (blocking)."""
        text, version = self._text, self._version
        if text is not None and version > self._saved_version:
            self._write(text, version)

    def _write(self, text: str, version: int) -> None:
        # The worker thread's write and one on the loop (write_now) may race: the lock
        # and the version keep the file from going back to older content.
        with self._lock:
            if version <= self._saved_version:
                return
            write_atomically(self.path, text.encode())
            self._saved_version = version

    async def saved(self) -> None:
        """Return once the file holds every change made before the call, writing it in a
        worker thread if still pending. Shielded from cancellation: a write under way
        ends, so that its caller's answer never runs ahead of the disk."""
        wanted = self._version
        with anyio.CancelScope(shield=True):
            while self._saved_version < wanted:
                text, version = self._text, self._version
                assert text is not None
                await anyio.to_thread.run_sync(self._write, text, version)

    def defer(self) -> None:
        """From now on a change only records its content, for :meth:`keep_written`
        (called by it; earlier by whoever starts it, so that no change falls between)."""
        if self._changed is None:
            self._changed = anyio.Event()

    async def keep_written(self) -> None:
        """Write each change in a worker thread, until cancelled (then at once, if one is
        pending). A failed write is logged and tried again at the next change; a request
        waiting in :meth:`saved` gets the error."""
        self.defer()
        try:
            while True:
                assert self._changed is not None
                await self._changed.wait()
                self._changed = anyio.Event()
                try:
                    await self.saved()
                except OSError:
                    logger.exception("writing %s failed", self.path)
        finally:
            self._changed = None
            self.write_now()
