"""Consumer: the synchronous consumer, the async core run in a background thread.

Control calls (assign, seek, offsets) cross into the background event loop;
``poll`` does not: it drains the fetched batches in the caller's thread and
only wakes the fetcher (once per completed fetch) when it has used one up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar, cast

from kafkette.client.config import ConsumerConfig
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.consumer.core import ConsumerCore, Records
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetAndTimestamp
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import EARLIEST, LATEST
from kafkette.structs import TopicPartition

T = TypeVar("T")

ITERATION_POLL_MS = 1_000


async def _build(config: ConsumerConfig) -> ConsumerCore:
    return ConsumerCore(config)


async def _run(func: Callable[..., T], *args: Any) -> T:
    return func(*args)


class Consumer:
    """Reads records from assigned partitions, blocking; see :class:`AsyncConsumer`.

    Not thread-safe (as Kafka's consumer): use it from one thread at a time.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ConsumerConfig.from_user(config, **settings)
        self._loop = BackgroundLoop("kafkette consumer")
        try:
            self._core = self._loop.call(_build, self.config)
        except BaseException:
            self._loop.close()
            raise
        core = self._core
        loop = self._loop
        core.wake_fetcher = lambda: loop.wake(core.fetcher.wake)
        loop.call_soon(core.fetcher.run)
        self._iter_records: list[ConsumerRecord] = []
        self._iter_at = 0

    def _call(self, func: Callable[..., T], *args: Any) -> T:
        self._core.check_open()
        return cast(T, self._loop.call(_run, func, *args))

    # ---- lifecycle

    def close(self) -> None:
        """Stop fetching, close the connections and the background thread; idempotent."""
        if not self._core.closed:
            self._loop.call(self._core.close)
        self._loop.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any previous assignment)."""
        self._call(self._core.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._core.subscriptions.assigned)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll`` returns for ``partition``."""
        self._call(self._core.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Go to the earliest offset of ``partitions`` (every assigned one when none given)."""
        self._call(self._core.seek_to, partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Go to the end of ``partitions`` (every assigned one when none given)."""
        self._call(self._core.seek_to, partitions, LATEST)

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record for ``partition``; looked up if not known yet."""
        self._core.check_open()
        return self._loop.call(self._core.position, partition, timeout_ms)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of ``partitions`` until resumed."""
        self._call(self._core.pause, partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._call(self._core.resume, partitions)

    def paused(self) -> set[TopicPartition]:
        return self._call(self._core.subscriptions.paused)

    # ---- offsets

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose timestamp is at least the given one (or None)."""
        self._core.check_open()
        return self._loop.call(self._core.offsets_for_times, dict(timestamps), timeout_ms)

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        self._core.check_open()
        return self._loop.call(
            self._core.edge_offsets, list(partitions), EARLIEST_TIMESTAMP, timeout_ms
        )

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The high watermarks, or the last stable offsets with read_committed."""
        self._core.check_open()
        return self._loop.call(
            self._core.edge_offsets, list(partitions), LATEST_TIMESTAMP, timeout_ms
        )

    # ---- records

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> Records:
        """Records fetched for the assigned partitions, grouped by partition.

        Returns at once when records are buffered; otherwise waits up to
        ``timeout_ms`` for some. At most ``max_records`` (default
        ``max.poll.records``) are returned.
        """
        core = self._core
        core.check_open()
        limit = max_records if max_records is not None else self.config.max_poll_records
        if limit < 1:
            raise ValueError(f"max_records must be positive, got {limit}")
        buffer = core.buffer
        clock = core.client.clock
        deadline = clock() + timeout_ms
        while True:
            seen = buffer.generation
            core.check_positions()
            records = core.drain(limit)
            if records:
                return records
            left = deadline - clock()
            if left <= 0 or core.closed:
                return {}
            buffer.wait_sync(seen, left / 1000)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        while self._iter_at >= len(self._iter_records):
            if self._core.closed:
                raise StopIteration
            batch = self.poll(timeout_ms=ITERATION_POLL_MS)
            self._iter_records = [r for records in batch.values() for r in records]
            self._iter_at = 0
        record = self._iter_records[self._iter_at]
        self._iter_at += 1
        return record

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of the consumer's counters and per-partition lag."""
        return self._core.metrics()
