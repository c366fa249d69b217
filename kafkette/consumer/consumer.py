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
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar, cast

from kafkette.client import telemetry
from kafkette.client.config import ConsumerConfig
from kafkette.client.sync_bridge import BackgroundLoop, documented_as, run_plain, task_host
from kafkette.consumer.async_consumer import AsyncConsumer
from kafkette.consumer.core import (
    CommitCallback,
    ConsumerCore,
    FetchWait,
    PollRun,
    Records,
    check_partitions,
)
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
        loop.call_soon(telemetry.run, core.client)
        # Background tasks started from inside the loop (the group member) go in here.
        _, self._tasks = loop.portal.start_task(task_host)
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
        """``func(*args)`` run in the loop thread."""
        self._core.check_open()
        return cast(T, self._loop.call(run_plain, func, *args))

    def _wait(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await func(*args)`` in the loop: a core operation that waits."""
        self._core.check_open()
        return self._loop.call(func, *args)

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

    @documented_as(AsyncConsumer.assign)
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._core.assign, check_partitions(partitions))

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

    @documented_as(AsyncConsumer.subscription)
    def subscription(self) -> set[str]:
        return self._call(self._core.subscription)

    @documented_as(AsyncConsumer.unsubscribe)
    def unsubscribe(self) -> None:
        self._drive(self._core.unsubscribe())

    @documented_as(AsyncConsumer.group_metadata)
    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._call(self._core.group_metadata)

    @documented_as(AsyncConsumer.commit)
    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        given = dict(offsets) if offsets is not None else None
        self._wait(self._core.commit, given, timeout_in_ms(None, timeout, timeout_ms))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return; ``callback(offsets, error_or_None)`` runs in a later
        :meth:`poll`, in the polling thread."""
        given = dict(offsets) if offsets is not None else None
        self._call(self._core.commit_async, given, callback)

    @documented_as(AsyncConsumer.committed)
    def committed(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._wait(
            self._core.committed,
            check_partitions(partitions),
            timeout_in_ms(None, timeout, timeout_ms),
        )

    @documented_as(AsyncConsumer.seek)
    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._call(self._core.seek, partition, offset)

    @documented_as(AsyncConsumer.seek_to_beginning)
    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call(self._core.seek_to, partitions, EARLIEST)

    @documented_as(AsyncConsumer.seek_to_end)
    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._call(self._core.seek_to, partitions, LATEST)

    @documented_as(AsyncConsumer.position)
    def position(
        self,
        partition: TopicPartition,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> int:
        return self._wait(
            self._core.position, partition, timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
        )

    @documented_as(AsyncConsumer.pause)
    def pause(self, *partitions: TopicPartition) -> None:
        self._call(self._core.pause, partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._call(self._core.resume, partitions)

    def paused(self) -> set[TopicPartition]:
        return self._call(self._core.subscriptions.paused)

    # ---- offsets

    @documented_as(AsyncConsumer.offsets_for_times)
    def offsets_for_times(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._wait(
            self._core.offsets_for_times, dict(timestamps), timeout_in_ms(None, timeout, timeout_ms)
        )

    def beginning_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        return self._wait(
            self._core.edge_offsets,
            check_partitions(partitions),
            EARLIEST_TIMESTAMP,
            timeout_in_ms(None, timeout, timeout_ms),
        )

    @documented_as(AsyncConsumer.end_offsets)
    def end_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        return self._wait(
            self._core.edge_offsets,
            check_partitions(partitions),
            LATEST_TIMESTAMP,
            timeout_in_ms(None, timeout, timeout_ms),
        )

    # ---- records

    @documented_as(AsyncConsumer.poll)
    def poll(
        self,
        timeout_or_ms: float | None = None,
        /,
        max_records: int | None = None,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> Records:
        return self._poll(
            self._core.poll(max_records, timeout_in_ms(timeout_or_ms, timeout, timeout_ms))
        )

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """The records, polled as needed, until the consumer is closed; with OpenTelemetry,
        each in a ``process`` span while the loop's body runs (docs/observability.md)."""
        telemetry = self._core.telemetry
        if telemetry is not None:
            return telemetry.processing(self.__next__)
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

    @documented_as(AsyncConsumer.poll_batches)
    def poll_batches(
        self, timeout_ms: float | None = None, max_offsets: int = 1, *, timeout: float | None = None
    ) -> dict[TopicPartition, list[FetchedBatch]]:
        return self._poll(
            self._core.poll_batches(max_offsets, timeout_in_ms(None, timeout, timeout_ms))
        )

    def _poll(self, run: PollRun[T]) -> dict[TopicPartition, list[T]]:
        """Do a poll's steps: the group's work as :meth:`_drive` does, the waits for
        fetches in this thread."""
        buffer = self._core.buffer
        for step in run:
            if isinstance(step, FetchWait):
                buffer.wait_sync(step.seen, step.seconds)
            else:
                self._drive(step)
        return run.result

    @documented_as(AsyncConsumer.client_instance_id)
    def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        return self._wait(telemetry.client_instance_id, self._core.client, timeout)

    @documented_as(AsyncConsumer.metrics)
    def metrics(self) -> ConsumerMetrics:
        return self._core.metrics()
