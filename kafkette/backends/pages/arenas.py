"""Arenas a memory log copies batches into, and a pool that reuses retired ones.

An :class:`Arena` is an anonymous mapping: a segment copies its batches into
it one after the other and hands out read-only views of them; a region once
handed out is never written again while the arena is the segment's. Its
pages are allocated (populated) :data:`POPULATE_STEP` bytes at a time, as
batches reach them, with one ``madvise`` call each.

Fresh memory costs more than the copy into it: every page is allocated,
charged and zeroed by the kernel, and on a virtual machine that hands freed
memory back to its host (virtio-balloon free page reporting) the host has to
fault it in again as well. So arenas do not ask for transparent huge pages
(``MADV_HUGEPAGE``; the system's setting decides): 2 MiB is the unit such a
guest reports to its host once free, so nearly every new huge page is memory
the host must provide again (measured here, 150 MiB appended to a memory log
in a fresh process: 540-650 ms of CPU into huge pages, 90-150 ms into 4 KiB
pages; 45-100 ms into a disk log's page cache), and :class:`ArenaPool` keeps
the arenas of deleted segments, pages and all, for the next ones (1 GiB through
a log kept to 64 MiB by retention: 270-280 ms of CPU, 690-840 ms without). An
arena being filled has its next step's pages allocated by a thread of its own
(:mod:`kafkette.backends.pages.populator`), off the broker's event loop.

An arena may be reused only when nothing can still see its bytes:

- no Python view of it lives (a fetch answer being written, a record an
  in-process consumer kept): the mapping's buffer exports are counted by
  ``mmap`` itself, and :meth:`Arena.in_use` asks it;
- the kernel holds none of its pages: a read whose views a server may
  ``vmsplice`` to a socket (:attr:`~kafkette.backends.types.LogSlice.spliceable`)
  marks the arenas it covers :attr:`~Arena.exposed`, and the kernel keeps
  such pages until the peer has read them, with no way to ask when that is.
  An exposed arena is never reused: once its views are gone it is unmapped,
  and the kernel keeps the pages it still holds.
"""

from __future__ import annotations

import errno
import mmap
import threading

from kafkette.backends.pages.populator import POPULATOR, address_of

POPULATE_STEP = 2 << 20
"""Arenas are reserved in multiples of this size and their pages allocated this many
bytes at a time."""
ARENA_MIN = POPULATE_STEP
ARENA_MAX = 64 << 20
"""Bounds of an arena's size, a power of two (a larger batch gets an arena of its own
size): reserving costs only address space, pages are allocated as batches fill them."""
POOL_BYTES = 256 << 20
"""Allocated bytes :class:`ArenaPool` keeps at most in arenas waiting for reuse."""

_MADV_POPULATE_WRITE = 23
"""Linux 5.14's ``madvise`` to allocate a range's pages now (Python 3.11's mmap module
does not name it): one system call for 2 MiB costs a fraction of the page faults that
copying into fresh memory takes."""
AVAILABLE = hasattr(mmap, "MAP_ANONYMOUS") and hasattr(mmap.mmap, "madvise")
"""Whether arenas can be had here (else a segment keeps every batch in its own bytes)."""
_populate_works = True


class Arena:
    """An anonymous mapping batches are copied into; see the module docstring."""

    __slots__ = (
        "__weakref__",
        "address",
        "ahead_done",
        "exposed",
        "landing",
        "pooled",
        "populated",
        "region",
        "requested",
        "size",
    )

    def __init__(self, region: mmap.mmap) -> None:
        self.region = region
        self.size = len(region)
        self.address = address_of(region)
        self.populated = 0
        """Bytes from the start whose pages are allocated or being allocated by the
        populator thread, as far as the owner knows."""
        self.requested = 0
        """Bytes from the start whose pages the populator thread was asked for."""
        self.ahead_done = 0
        """Bytes from the start whose pages the populator thread allocated (it alone
        writes this)."""
        self.exposed = False
        """Whether a read that may have handed its pages to the kernel covered it."""
        self.landing = False
        """Whether a connection receives requests into it (:mod:`kafkette.backends.pages.landing`):
        its regions are the logs' to keep until the pool hands it out again."""
        self.pooled = False
        """Whether it waits in a pool (retiring it again changes nothing)."""

    def populate(self, end: int) -> None:
        """Have the pages up to ``end`` (rounded up to :data:`POPULATE_STEP`) allocated
        now, unless the populator thread was asked for them (it may be at it), and ask
        it for the next step's (:mod:`kafkette.backends.pages.populator`)."""
        global _populate_works
        stop = min(-(-end // POPULATE_STEP) * POPULATE_STEP, self.size)
        if stop > self.populated:
            self.populated = max(self.populated, self.ahead_done)
        start = self.populated
        if stop > start and self.requested >= stop:
            # The thread is at it: waiting for its call would cost more than the copy's
            # faults for the pages it has not reached yet.
            self.populated = stop
        elif stop > start:
            self.populated = stop
            if _populate_works:  # (else the copy's page faults allocate them)
                try:
                    self.region.madvise(_MADV_POPULATE_WRITE, start, stop - start)
                except OSError as exc:
                    if exc.errno == errno.EINVAL:  # a kernel before 5.14
                        _populate_works = False
        ahead = min(max(stop, self.populated) + POPULATE_STEP, self.size)
        start = max(self.requested, self.populated)
        if _populate_works and ahead > start and POPULATOR.request(self, start, ahead):
            self.requested = ahead

    def prefetch(self, end: int) -> None:
        """Ask the populator thread for the pages up to ``end`` (rounded up to
        :data:`POPULATE_STEP`) it was not asked for yet: the owner will write there soon
        (:meth:`populate` then leaves them to the thread)."""
        stop = min(-(-end // POPULATE_STEP) * POPULATE_STEP, self.size)
        start = max(self.requested, self.populated)
        if _populate_works and stop > start and POPULATOR.request(self, start, stop):
            self.requested = stop

    def settle(self) -> None:
        """Count what the populator thread was asked for as allocated (it will be): the
        owner lets the arena go."""
        self.populated = max(self.populated, self.requested, self.ahead_done)

    def in_use(self) -> bool:
        """Whether a view of the mapping may still live (True when that cannot be told)."""
        try:
            # Resizing is refused while buffers are exported; to its own size it moves
            # nothing.
            self.region.resize(self.size)
        except BufferError:
            return True
        except (OSError, ValueError, TypeError):
            return True
        except SystemError:  # no mremap on this system: only checked after the exports
            return False
        return False


def new_arena(size: int) -> Arena | None:
    """A fresh arena of ``size`` bytes (a multiple of :data:`POPULATE_STEP`), None when
    no mapping can be had."""
    if not AVAILABLE:
        return None
    try:
        region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    return Arena(region)


def arena_size(segment_size: int, batch_size: int) -> int:
    """The size of a new arena for a segment holding ``segment_size`` bytes and a batch
    of ``batch_size``: an eighth of the segment as a power of two within
    [:data:`ARENA_MIN`, :data:`ARENA_MAX`] (so arenas grow geometrically with the
    segment and come in few sizes, which the pool reuses), or the batch's size rounded
    up to :data:`POPULATE_STEP` if larger."""
    size = ARENA_MIN
    while size < segment_size // 8 and size < ARENA_MAX:
        size <<= 1
    if batch_size > size:
        size = -(-batch_size // POPULATE_STEP) * POPULATE_STEP
    return size


class ArenaPool:
    """Arenas of deleted segments, kept with their pages for new ones.

    :meth:`retire` takes an arena whose owner holds no batch in it any more;
    :meth:`take` hands out the smallest retired arena at least as large as asked
    once no view of it lives, else a new one. Exposed arenas are not kept, and
    at most ``max_bytes`` of allocated pages are. Safe to share between threads.
    """

    def __init__(self, max_bytes: int = POOL_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._retired: list[Arena] = []
        self._kept = 0

    @property
    def kept_bytes(self) -> int:
        """Allocated bytes of the arenas kept for reuse."""
        return self._kept

    @property
    def kept(self) -> int:
        """Arenas kept for reuse (some may still have views)."""
        return len(self._retired)

    def take(self, size: int) -> Arena | None:
        """An arena of at least ``size`` bytes: a retired one nothing sees any more (its
        pages still allocated, its old bytes still there until overwritten), else a new
        one of exactly ``size``; None when no mapping can be had."""
        with self._lock:
            best: Arena | None = None
            exposed: list[Arena] = []
            for arena in self._retired:
                if arena.exposed:  # (a read covered it after it was retired)
                    exposed.append(arena)
                    continue
                fits = size <= arena.size and (best is None or arena.size < best.size)
                if fits and not arena.in_use():
                    best = arena
            for arena in exposed:
                self._drop(arena)
            if best is not None:
                self._drop(best)
                best.landing = False
                return best
        return new_arena(size)

    def _drop(self, arena: Arena) -> None:
        self._retired.remove(arena)
        self._kept -= arena.populated
        arena.pooled = False

    def retire(self, arena: Arena) -> None:
        """Keep ``arena``, whose owner no longer holds batches in it, for reuse once no view
        of it lives (or let it go: exposed, nothing allocated, or the pool full). Several
        owners may retire the same arena (a connection's landing arena holds batches of
        many segments): it is kept once."""
        if arena.pooled:
            return
        arena.settle()
        if arena.exposed or not arena.populated:
            return
        with self._lock:
            if arena.pooled or self._kept + arena.populated > self.max_bytes:
                return
            self._retired.append(arena)
            self._kept += arena.populated
            arena.pooled = True

    def clear(self) -> None:
        """Let every kept arena go (unmapped once no view of it lives)."""
        with self._lock:
            for arena in self._retired:
                arena.pooled = False
            self._retired.clear()
            self._kept = 0


ARENA_POOL = ArenaPool()
"""The process's pool, shared by memory logs unless they are given their own."""
