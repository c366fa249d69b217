"""Arena regions a connection receives its large requests into, which a memory log keeps.

A produce request's batches reach a memory log in the request's own frame.
Copying them into the log's arena costs a copy and, worse, fresh pages for
the arena while the frame's pages are freed (on this kind of virtual machine
fresh anonymous pages cost more than the copy: see
:mod:`kafkette.backends.pages.arenas`). So a connection receives each request of at
least :data:`LAND_FROM` bytes (and at most :data:`LAND_MAX`) straight into a
region of an arena of its own, a :class:`Landing`, and a memory log whose
segment would copy a batch into an arena keeps the view of the received batch
instead, its 16-byte prefix (base offset, length, leader epoch) rewritten in
place: no copy, and no page touched twice.

A region is handed out once and never written again by the connection after
the request in it has been received, so a view of it may be kept as an arena
batch is, and sent by reference (``vmsplice``) the same way. The arena is
reused in place only when no view of it lives and no read exposed its pages;
otherwise it is retired to the :class:`~kafkette.backends.pages.arenas.ArenaPool`,
which hands it out again once the views are gone (the logs that keep batches
in it let them go when retention or deletion drops them), and the connection
takes another. Once that has happened (what it receives is kept), the
connection takes its next arena when the current one is half full, and the
populator thread (:mod:`kafkette.backends.pages.populator`) allocates the next
arena's first pages meanwhile, so that the event loop receives into allocated
pages rather than allocating them itself.

:func:`landed_arena` tells a log whether a buffer is such a region: only a view
of an arena a :class:`Landing` took (until the pool hands it out for another
use, which it does only once no view of it lives). The in-process transport
and every other caller pass buffers of their own, which are copied as before.
A received request is served once, so each region is kept by one log at most.
"""

from __future__ import annotations

import contextlib
import mmap
import weakref

from kafkette.backends.pages.arenas import ARENA_POOL, POPULATE_STEP, Arena, ArenaPool

LAND_FROM = 64 << 10
"""Requests of at least this many bytes are received into a landing arena (smaller
ones are cut from the connection's shared receive buffer, copied)."""
LAND_MAX = 64 << 20
"""Requests larger than this are received as before (a landing arena reserves address
space for the whole request)."""
LANDING_SIZE = 8 << 20
"""Bytes of a landing arena (a larger request gets one of its own size, rounded up)."""

AHEAD = 2 * POPULATE_STEP
"""Bytes past those about to be received whose pages the populator thread is asked for,
on a connection whose requests are kept (a request arrives in bursts of up to 1 MiB)."""

_MADV_FREE: int | None = getattr(mmap, "MADV_FREE", None)

_LANDING: weakref.WeakValueDictionary[int, Arena] = weakref.WeakValueDictionary()
"""Arenas of landings, by the ``id`` of their mapping (an entry lives with its arena,
which holds the mapping: the id cannot be reused meanwhile)."""


def landed_arena(data: object) -> Arena | None:
    """The landing arena ``data`` is a view of, if it is one; None for any other buffer."""
    if type(data) is not memoryview:
        return None
    region = data.obj
    if type(region) is not mmap.mmap:
        return None
    arena = _LANDING.get(id(region))
    if arena is None or arena.region is not region or not arena.landing:
        return None
    return arena


class Landing:
    """One connection's arena for its large requests, handed out a region at a time."""

    __slots__ = ("_arena", "_kept", "_pool", "_pos", "_spare", "_view")

    def __init__(self, pool: ArenaPool = ARENA_POOL) -> None:
        self._pool = pool
        self._arena: Arena | None = None
        self._view: memoryview | None = None
        self._pos = 0
        self._kept = False
        """Whether an arena of this landing was still seen when full (a memory log keeps
        what the connection receives): the next arena is then taken ahead of time."""
        self._spare: Arena | None = None
        """The next arena, its first pages allocated by the populator thread meanwhile."""

    def region(self, size: int) -> memoryview | None:
        """A writable view of ``size`` bytes nobody else writes (None: no arena to be had;
        the caller receives into memory of its own). Its pages are allocated as
        :meth:`reach` is told the bytes are coming."""
        if size > LAND_MAX:
            return None
        arena = self._arena
        if arena is None or self._pos + size > arena.size:
            arena = self._next_arena(size)
            if arena is None:
                return None
        view = self._view
        assert view is not None
        start = self._pos
        self._pos = start + size
        if self._kept and self._spare is None and 2 * self._pos >= arena.size:
            self._spare = self._take(LANDING_SIZE)
            if self._spare is not None:
                self._spare.prefetch(POPULATE_STEP)
        return view[start : start + size]

    def reach(self, region: memoryview, end: int) -> None:
        """Bytes up to ``end`` of ``region`` (from :meth:`region`) are about to be received:
        have their pages allocated (and the next step's, by the populator thread)."""
        arena = self._arena
        if arena is not None and region.obj is arena.region:
            at = self._pos - len(region) + end
            arena.populate(at)
            if self._kept:
                arena.prefetch(at + AHEAD)

    def _next_arena(self, size: int) -> Arena | None:
        arena = self._arena
        if arena is not None and size <= arena.size and not arena.pooled:
            view, self._view = self._view, None
            assert view is not None
            with contextlib.suppress(BufferError):  # (a buffer of the view itself lives)
                view.release()
            if not arena.exposed and not arena.in_use():
                # Nothing sees its bytes: received again from the start, pages and all.
                # Until they are written again the kernel may take them back (memory
                # pressure): a connection that has gone quiet holds nothing it must keep.
                if _MADV_FREE is not None and arena.populated:
                    with contextlib.suppress(OSError):
                        arena.region.madvise(_MADV_FREE, 0, arena.populated)
                self._view = memoryview(arena.region)
                self._pos = 0
                return arena
            self._kept = True
        self._retire_current()
        spare, self._spare = self._spare, None
        if spare is not None and size <= spare.size:
            arena = spare
        else:
            if spare is not None:
                self._pool.retire(spare)
            arena = self._take(max(LANDING_SIZE, -(-size // POPULATE_STEP) * POPULATE_STEP))
            if arena is None:
                return None
        self._arena = arena
        self._view = memoryview(arena.region)
        self._pos = 0
        return arena

    def _take(self, size: int) -> Arena | None:
        arena = self._pool.take(size)
        if arena is not None:
            arena.landing = True
            _LANDING[id(arena.region)] = arena
        return arena

    def _retire_current(self) -> None:
        arena, self._arena = self._arena, None
        view, self._view = self._view, None
        if view is not None:
            with contextlib.suppress(BufferError):
                view.release()
        if arena is not None:
            self._pool.retire(arena)

    def close(self) -> None:
        """The connection is done with its arena: to the pool, reused once no view of it
        lives (the logs keeping batches in it let them go)."""
        self._retire_current()
        spare, self._spare = self._spare, None
        if spare is not None:
            self._pool.retire(spare)
