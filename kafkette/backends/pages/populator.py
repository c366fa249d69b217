"""Allocating an arena's next pages in a thread of its own, ahead of its writer.

Allocating fresh pages (``MADV_POPULATE_WRITE``) costs several times the copy
of a batch into them (see :mod:`kafkette.backends.pages.arenas`). Done on the thread
that copies, that is the broker's event loop, it makes every request wait;
done here, while the loop copies into the step before, it overlaps the loop's
work. Python's ``mmap.madvise`` holds the GIL for the whole call, so this
thread calls libc's ``madvise`` through :mod:`ctypes`, which releases it.
Measured (``kafkette serve --memory``, 150,000 x 1 KiB records from
confluent-kafka, 5 alternating rounds on a loaded 2-core machine): the event
loop thread's CPU over the produce, median 200-220 ms with this thread, 260 ms
without, 230-240 ms for a disk broker; one step ahead or four made no
difference.

The writer stays correct whether or not this thread has been there first: it
allocates what it needs itself when the step it reaches is not done yet (the
two calls may overlap: a page already there is left as it is, its bytes
untouched), and without ``ctypes`` or ``madvise`` it does all of it itself.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from collections import deque
from typing import Any, Protocol

MADV_POPULATE_WRITE = 23
"""Linux 5.14's ``madvise`` to allocate a range's pages now (Python 3.11's mmap module
does not name it)."""


def _load_madvise() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


_madvise = _load_madvise()


def address_of(region: mmap.mmap) -> int | None:
    """Where ``region`` is mapped (None: this thread cannot allocate its pages). The
    address stays right while the mapping lives: it is never resized to another size."""
    if _madvise is None:
        return None
    try:
        anchor = ctypes.c_char.from_buffer(region)
    except (TypeError, ValueError):
        return None
    address: int = ctypes.addressof(anchor)
    del anchor  # (an exported buffer would keep the arena "in use")
    return address


class Target(Protocol):
    """What the thread is given: a mapping's address, and where to say how far it got."""

    address: int | None
    ahead_done: int


class Populator:
    """One daemon thread allocating the pages of ranges it is asked for, in order."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._jobs: deque[tuple[Target, int, int]] = deque()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self.works = _madvise is not None
        """False where the thread cannot help (no ``madvise``, or a kernel before 5.14)."""

    def request(self, target: Target, start: int, stop: int) -> bool:
        """Allocate ``target``'s pages in [``start``, ``stop``) soon; False when this
        thread cannot (the caller then allocates them itself when it needs them)."""
        if not self.works or target.address is None:
            return False
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kafkette-arena-pages", daemon=True
                )
                self._thread.start()
            self._jobs.append((target, start, stop))
            self._pending += 1
            self._changed.notify_all()
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every range asked for is done; whether it was within ``timeout``."""
        with self._lock:
            return self._changed.wait_for(lambda: not self._pending, timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                self._changed.wait_for(lambda: bool(self._jobs))
                target, start, stop = self._jobs.popleft()
            assert target.address is not None
            if _madvise(target.address + start, stop - start, MADV_POPULATE_WRITE) == 0:
                if stop > target.ahead_done:
                    target.ahead_done = stop
            elif ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.14
                self.works = False
            # Held while waiting for the next job, the arena (and its pages) would outlive
            # everything else that refers to it.
            del target
            with self._lock:
                self._pending -= 1
                self._changed.notify_all()


POPULATOR = Populator()
"""The process's thread (started on first use)."""
