"""Producer ids for idempotent producers, unique across broker restarts.

Ids are handed out from blocks, as Kafka's controller does: the end of the
current block is written to ``<data_dir>/kafkette-producer-ids`` (replaced
atomically) before any id of the block is used, so a broker that restarts,
even after a crash, starts after every id it may have given out. Without a
data directory the ids only need to be unique for the life of the process.
At start the counter is also moved past every producer id found in the logs'
producer state, should the file have been lost.
"""

from __future__ import annotations

import os

BLOCK_SIZE = 1000
"""Ids reserved per write of the file (Kafka's controller hands out blocks of 1000)."""

IDS_FILE = "kafkette-producer-ids"


class ProducerIdManager:
    """Allocates producer ids; persists reserved blocks under ``data_dir`` when given."""

    def __init__(self, data_dir: str | None, *, at_least: int = 0) -> None:
        self._path = os.path.join(data_dir, IDS_FILE) if data_dir is not None else None
        start = max(at_least, 0)
        if self._path is not None and os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                text = f.read().strip()
            if text.isdigit():
                start = max(start, int(text))
        self._next = start
        self._block_end = start  # nothing reserved yet

    def next_id(self) -> int:
        """A producer id never handed out before (by this data directory)."""
        if self._next >= self._block_end:
            self._reserve(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve(self, end: int) -> None:
        if self._path is not None:
            tmp = self._path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(f"{end}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path)
        self._block_end = end
