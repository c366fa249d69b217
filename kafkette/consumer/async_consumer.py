"""AsyncConsumer: the consumer on anyio (asyncio or trio), manual assignment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import anyio.abc

from kafkette.client.config import ConsumerConfig
from kafkette.consumer.core import ConsumerCore, Records
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetAndTimestamp
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import EARLIEST, LATEST
from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition

ITERATION_POLL_MS = 1_000


class AsyncConsumer:
    """Reads records from assigned partitions; use it as ``async with AsyncConsumer(...) as c``.

    Settings are Kafka's consumer settings in either spelling
    (``auto_offset_reset="earliest"`` or ``{"auto.offset.reset": "earliest"}``).
    Entering the context starts the fetcher, which fetches ahead so that
    :meth:`poll` mostly hands out records already fetched; leaving it closes
    the consumer.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ConsumerConfig.from_user(config, **settings)
        self._core: ConsumerCore | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._iter_records: list[ConsumerRecord] = []
        self._iter_at = 0

    # ---- lifecycle

    async def __aenter__(self) -> AsyncConsumer:
        if self._core is not None:
            raise IllegalStateError("the consumer was already started")
        self._core = ConsumerCore(self.config)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._core.fetcher.run)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
        if self._task_group is not None:
            task_group, self._task_group = self._task_group, None
            await task_group.__aexit__(None, None, None)

    async def close(self) -> None:
        """Stop fetching and close the connections; the consumer cannot be used afterwards."""
        if self._core is not None:
            with anyio.CancelScope(shield=True):
                await self._core.close()

    @property
    def _c(self) -> ConsumerCore:
        core = self._core
        if core is None:
            raise IllegalStateError("use the consumer as `async with AsyncConsumer(...) as c`")
        core.check_open()
        return core

    # ---- assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any previous assignment)."""
        self._c.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return self._c.subscriptions.assigned()

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll`` returns for ``partition``."""
        self._c.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Go to the earliest offset of ``partitions`` (every assigned one when none given)."""
        self._c.seek_to(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Go to the end of ``partitions`` (every assigned one when none given)."""
        self._c.seek_to(partitions, LATEST)

    async def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record for ``partition``; looked up if not known yet."""
        return await self._c.position(partition, timeout_ms)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of ``partitions`` until resumed."""
        self._c.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._c.resume(partitions)

    def paused(self) -> set[TopicPartition]:
        return self._c.subscriptions.paused()

    # ---- offsets

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose timestamp is at least the given one (or None)."""
        return await self._c.offsets_for_times(timestamps, timeout_ms)

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._c.edge_offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The high watermarks, or the last stable offsets with read_committed."""
        return await self._c.edge_offsets(partitions, LATEST_TIMESTAMP, timeout_ms)

    # ---- records

    async def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> Records:
        """Records fetched for the assigned partitions, grouped by partition.

        Returns at once when records are buffered; otherwise waits up to
        ``timeout_ms`` for some. At most ``max_records`` (default
        ``max.poll.records``) are returned.
        """
        core = self._c
        limit = max_records if max_records is not None else self.config.max_poll_records
        if limit < 1:
            raise ValueError(f"max_records must be positive, got {limit}")
        core.check_positions()
        records = core.drain(limit)
        if records or timeout_ms <= 0:
            return records
        clock = core.client.clock
        deadline = clock() + timeout_ms
        while True:
            left = deadline - clock()
            if left <= 0:
                return {}
            await core.buffer.wait_async(left / 1000)
            if core.closed:
                return {}
            core.check_positions()
            records = core.drain(limit)
            if records:
                return records

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while self._iter_at >= len(self._iter_records):
            if self._core is None or self._core.closed:
                raise StopAsyncIteration
            batch = await self.poll(timeout_ms=ITERATION_POLL_MS)
            self._iter_records = [r for records in batch.values() for r in records]
            self._iter_at = 0
        record = self._iter_records[self._iter_at]
        self._iter_at += 1
        return record

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of the consumer's counters and per-partition lag."""
        return self._c.metrics()
