"""Consumer: the synchronous consumer, the async core run in a background thread.

Control calls (assign, seek, offsets) cross into the background event loop;
``poll`` does not: it drains the fetched batches in the caller's thread and
only wakes the fetcher (once per completed fetch) when it has used one up.
With a group subscription, ``poll`` first does the group's work: its
operations cross into the loop only when there is something to do (a
rebalance, an auto commit, a metadata refresh), and the rebalance listener
runs in the application's thread, as in Java.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar, cast

import anyio
import anyio.abc

from kafkette.client.config import ConsumerConfig
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.consumer.core import CommitCallback, ConsumerCore, FetchWait, PollSteps, Records
from kafkette.consumer.fetch_buffer import FetchedBatch
from kafkette.consumer.group.coordinator import Call, Step
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetAndTimestamp
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import EARLIEST, LATEST
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

T = TypeVar("T")

ITERATION_POLL_MS = 1_000


async def _build(config: ConsumerConfig) -> ConsumerCore:
    return ConsumerCore(config)


async def _run(func: Callable[..., T], *args: Any) -> T:
    return func(*args)


async def _task_host(*, task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup]) -> None:
    async with anyio.create_task_group() as task_group:
        task_status.started(task_group)
        await anyio.sleep_forever()


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
        # Background tasks started from inside the loop (the group member) go in here.
        _, self._tasks = loop.portal.start_task(_task_host)
        core.start_task = self._tasks.start_soon
        self._iter_records: list[ConsumerRecord] = []
        self._iter_at = 0

    def _drive(self, steps: Iterator[Step]) -> None:
        """Run group steps: calls in the loop, listener callbacks here; listener errors last."""
        error: Exception | None = None
        for step in steps:
            if isinstance(step, Call):
                self._loop.call(step.func)
                continue
            try:
                step.func(*step.args)
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error

    def _call(self, func: Callable[..., T], *args: Any) -> T:
        self._core.check_open()
        return cast(T, self._loop.call(_run, func, *args))

    # ---- lifecycle

    def close(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Leave the group, stop fetching, close the connections and the thread; idempotent.

        A group member first commits its positions (with ``enable.auto.commit``),
        tells the listener its partitions are revoked and sends LeaveGroup (not
        a static member), within ``timeout`` seconds or ``timeout_ms`` (default
        ``default.api.timeout.ms``).
        """
        timeout_ms = timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
        core = self._core
        try:
            if not core.closed:
                try:
                    self._drive(core.closing_steps(core.timeout(timeout_ms)))
                finally:
                    self._loop.call(core.close)
        finally:
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

    # ---- group

    def subscribe(
        self, topics: Iterable[str] | str | re.Pattern[str], listener: Any = None
    ) -> None:
        """Join ``group.id`` and read the partitions the group gives; see
        :meth:`AsyncConsumer.subscribe` (here the listener's methods are plain functions,
        called in the thread calling :meth:`poll`)."""
        if not isinstance(topics, (str, re.Pattern)):
            topics = list(topics)
        self._call(self._core.subscribe, topics, listener)

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matches now)."""
        return self._call(self._core.subscription)

    def unsubscribe(self) -> None:
        """Give up the group's partitions (the listener is told) and leave the group
        (its requests given up after ``default.api.timeout.ms``)."""
        self._drive(self._core.unsubscribe())

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id and instance id, as of the last rebalance."""
        return self._call(self._core.group_metadata)

    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the current positions) and wait; see
        :meth:`AsyncConsumer.commit`."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        self._core.check_open()
        given = dict(offsets) if offsets is not None else None
        self._loop.call(self._core.commit, given, timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return; ``callback(offsets, error_or_None)`` runs in a later
        :meth:`poll`, in the polling thread."""
        given = dict(offsets) if offsets is not None else None
        self._call(self._core.commit_async, given, callback)

    def committed(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None where there is none)."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        self._core.check_open()
        return self._loop.call(self._core.committed, list(partitions), timeout_ms)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record ``poll`` returns for ``partition``."""
        self._call(self._core.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Go to the earliest offset of ``partitions`` (every assigned one when none given)."""
        self._call(self._core.seek_to, partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Go to the end of ``partitions`` (every assigned one when none given)."""
        self._call(self._core.seek_to, partitions, LATEST)

    def position(
        self,
        partition: TopicPartition,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> int:
        """The offset of the next record for ``partition``; looked up if not known yet
        (within ``timeout`` seconds or ``timeout_ms``)."""
        timeout_ms = timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
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
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose timestamp is at least the given one (or None)."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        self._core.check_open()
        return self._loop.call(self._core.offsets_for_times, dict(timestamps), timeout_ms)

    def beginning_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        self._core.check_open()
        return self._loop.call(
            self._core.edge_offsets, list(partitions), EARLIEST_TIMESTAMP, timeout_ms
        )

    def end_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """The high watermarks, or the last stable offsets with read_committed."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        self._core.check_open()
        return self._loop.call(
            self._core.edge_offsets, list(partitions), LATEST_TIMESTAMP, timeout_ms
        )

    # ---- records

    def poll(
        self,
        timeout_or_ms: float | None = None,
        /,
        max_records: int | None = None,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> Records:
        """Records fetched for the assigned partitions, grouped by partition.

        Returns at once when records are buffered; otherwise waits up to the
        timeout for some (default 0): ``timeout`` in seconds or ``timeout_ms``;
        positionally an ``int`` is milliseconds (``poll(100)``, kafka-python)
        and a ``float`` seconds (``poll(1.0)``, confluent-kafka). At most
        ``max_records`` (default ``max.poll.records``) are returned.
        """
        timeout_ms = timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
        return self._run(self._core.poll(max_records, timeout_ms))

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

    def poll_batches(
        self, timeout_ms: float | None = None, max_offsets: int = 1, *, timeout: float | None = None
    ) -> dict[TopicPartition, list[FetchedBatch]]:
        """Fetched record batches handed out whole, unparsed, grouped by partition: the
        lower-level form of :meth:`poll` for readers that decode batches themselves
        (the Spark data source decodes them into columns).

        As :meth:`poll`, it waits up to ``timeout`` seconds or ``timeout_ms``
        (default 0) when nothing is buffered, skips control batches and
        (``read_committed``) aborted transactions, and moves each partition's
        position past the batches it returns. It returns whole batches until
        they span ``max_offsets`` offsets or more.
        A batch's records below its :class:`~kafkette.consumer.fetch_buffer.FetchedBatch`
        ``position`` were consumed already (a seek into the batch); the caller
        parses the records, so no deserializer applies and a damaged record
        raises from the caller's parsing.
        """
        wait_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._run(self._core.poll_batches(max_offsets, wait_ms))

    def _run(self, poll: PollSteps[T]) -> dict[TopicPartition, list[T]]:
        """Drive a poll's steps: the group's work as :meth:`_drive` does, the waits for
        fetches in this thread."""
        buffer = self._core.buffer
        while True:
            try:
                step = next(poll)
            except StopIteration as done:
                return cast(dict[TopicPartition, list[T]], done.value)
            if isinstance(step, FetchWait):
                buffer.wait_sync(step.seen, step.seconds)
            else:
                self._drive(step)

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of the consumer's counters and per-partition lag."""
        return self._core.metrics()
