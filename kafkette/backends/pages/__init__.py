"""The pages a memory log keeps its batches in, and how they are had.

:mod:`~kafkette.backends.pages.arenas`: arenas (anonymous mappings batches are
copied into) and the pool that reuses them; :mod:`~kafkette.backends.pages.populator`:
the thread that allocates an arena's next pages ahead of its writer;
:mod:`~kafkette.backends.pages.landing`: the arena a connection receives its large
requests into, whose batches a memory log keeps where they arrived. Imports
nothing outside this room but the standard library; the memory backend and the
broker's network edge (``server/net``) import it.
"""
