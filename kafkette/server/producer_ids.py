"""Producer ids for idempotent producers, unique across broker restarts.

Ids are handed out from blocks, as Kafka's controller does: the end of the
current block is written to ``<data_dir>/kafkette-producer-ids`` (replaced
atomically, by a served broker in a worker thread) before any id of the block
is used, so a broker that restarts, even after a crash, starts after every id
it may have given out. Without a data directory the ids only need to be unique
for the life of the process. At start the counter is also moved past every
producer id found in the logs' producer state, should the file have been lost.
"""

from __future__ import annotations

import os

from kafkette.server.kept_files.kept_file import KeptFile

BLOCK_SIZE = 1000
"""Ids reserved per write of the file (Kafka's controller hands out blocks of 1000)."""

IDS_FILE = "kafkette-producer-ids"


class ProducerIdManager:
    """Allocates producer ids; persists reserved blocks in ``file`` when given.

    The next block is asked for when half of the current one is used, so that a
    served broker writes it in a worker thread long before it is needed; only ids
    handed out faster than one file write wait for it on the caller's thread.
    """

    def __init__(self, file: KeptFile | None, *, at_least: int = 0) -> None:
        self._file = file
        start = max(at_least, 0)
        if file is not None and os.path.exists(file.path):
            with open(file.path, encoding="utf-8") as f:
                text = f.read().strip()
            if text.isdigit():
                start = max(start, int(text))
        self._next = start
        self._block_end = start  # nothing reserved yet
        self._ahead: tuple[int, int] | None = None
        """The next block's end and the number of its file change, once asked for."""
        self._ask_ahead()

    async def reserved(self) -> None:
        """Return once :meth:`next_id` can answer without writing the file."""
        if self._file is not None and self._next >= self._block_end:
            await self._file.saved()

    def next_id(self) -> int:
        """A producer id never handed out before (by this data directory)."""
        if self._next >= self._block_end:
            self._take_next_block()
        producer_id = self._next
        self._next += 1
        if self._block_end - self._next <= BLOCK_SIZE // 2:
            self._ask_ahead()
        return producer_id

    def _ask_ahead(self) -> None:
        if self._ahead is None and self._file is not None:
            end = self._block_end + BLOCK_SIZE
            self._ahead = (end, self._file.change(f"{end}\n"))

    def _take_next_block(self) -> None:
        if self._file is None:
            self._block_end = self._next + BLOCK_SIZE
            return
        self._ask_ahead()
        assert self._ahead is not None
        end, change = self._ahead
        if not self._file.holds(change):
            self._file.write_now()  # ids asked for faster than the file was written
        self._ahead = None
        self._block_end = end
