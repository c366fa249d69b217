"""Keeping CPython's cyclic garbage collector from stalling a served broker (#30).

A partition costs the broker about 30 objects the collector tracks (its log,
segment, indexes, producer state, their lists and locks), so a broker of
10,000 partitions holds some 300,000, and a full (generation 2) collection
traverses every one with the interpreter lock held: 300-740 ms measured here,
during which no connection is served, whichever thread triggered it (opening
logs runs in a worker thread; the loop waits for the lock all the same).
CPython starts a full collection whenever the objects that survived into the
oldest generation since the last one exceed a quarter of those it holds, so
while thousands of partitions are opened it runs several times, each one
longer.

What :class:`ServedCollector` does, for ``kafkette serve`` only (in
``memory://`` the user's process owns the collector and its settings):

- **Freezes** (:func:`gc.freeze`) what exists once the broker has started (its
  data directory's logs loaded), and again every :data:`FREEZE_EVERY`
  partitions opened or deleted by a topic change, after a young-generation
  collection (cheap: it visits only the objects made since the last one).
  Frozen objects are never traversed again. They are still freed by reference
  counting when a topic is deleted: a partition's objects hold no reference
  cycle (``tests/server/test_collector.py`` checks that a deleted topic's
  logs are freed with the collector off), so what freezing keeps alive is at
  most the cyclic garbage that happened to be in the oldest generation at
  that moment, a few kilobytes per topic change.
- Keeps CPython's thresholds otherwise: the collections of young objects (most
  of what a request makes) stay frequent and short, and cyclic garbage that
  reaches the oldest generation is still collected, now from a small one.
- Logs (``kafkette.server.collector``, WARNING) any collection that took longer
  than :data:`SLOW_COLLECTION_S`, with its generation and duration, so
  that a stall it causes can be told from one the broker's own work causes.

Fewer tracked objects per partition (``__slots__``, tuples) would shorten every
full collection too, but by a fraction; freezing takes the partitions out of it.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

logger = logging.getLogger("kafkette.server.collector")

FREEZE_EVERY = 500
"""Partitions opened or deleted between two freezes."""

SLOW_COLLECTION_S = 0.05
"""A collection longer than this is logged."""


class ServedCollector:
    """The collector policy of a served broker (see the module's docstring)."""

    def __init__(self, *, freeze_every: int = FREEZE_EVERY) -> None:
        self.freeze_every = freeze_every
        self.freezes = 0
        self._changed = 0
        self._started_at = 0.0

    def install(self) -> None:
        """Freeze what exists now (the started broker) and start logging slow collections."""
        self.freeze()
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        """Stop logging slow collections (what is frozen stays frozen)."""
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def partitions_changed(self, count: int = 1) -> None:
        """``count`` partitions were opened or deleted: freeze once enough have been."""
        self._changed += count
        if self._changed >= self.freeze_every:
            self.freeze()

    def freeze(self) -> None:
        """Collect the young generations, then move every tracked object out of reach."""
        gc.collect(1)
        gc.freeze()
        self.freezes += 1
        self._changed = 0

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_at = time.perf_counter()
            return
        took = time.perf_counter() - self._started_at
        if took >= SLOW_COLLECTION_S:
            logger.warning(
                "garbage collection of generation %d took %.0f ms (%d collected)",
                info.get("generation", -1),
                took * 1000,
                info.get("collected", 0),
            )
