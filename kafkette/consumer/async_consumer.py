"""AsyncConsumer: the consumer on anyio (asyncio or trio), assigned partitions or a group."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import anyio
import anyio.abc

from kafkette.client import telemetry
from kafkette.client.client import check_connection_settings
from kafkette.client.config import ConsumerConfig
from kafkette.client.sync_bridge import documented_as
from kafkette.clocks import loop_clock_ms
from kafkette.consumer.core import CommitCallback, ConsumerCore, FetchWait, PollRun, Records
from kafkette.consumer.fetch_buffer import FetchBuffer, FetchedBatch
from kafkette.consumer.group.coordinator import Call, Step
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetAndTimestamp
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import EARLIEST, LATEST
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import IllegalStateError
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

T = TypeVar("T")

ITERATION_POLL_MS = 1_000


class AsyncConsumer:
    """Reads records; use it as ``async with AsyncConsumer(...) as c``.

    Settings are Kafka's consumer settings in either spelling
    (``auto_offset_reset="earliest"`` or ``{"auto.offset.reset": "earliest"}``).
    Entering the context starts the fetcher, which fetches ahead so that
    :meth:`poll` mostly hands out records already fetched; leaving it closes
    the consumer.

    Partitions are either chosen with :meth:`assign` or given by the consumer
    group ``group.id`` after :meth:`subscribe`; the group's work (joining,
    the rebalance listener, auto commits) happens inside :meth:`poll`, while
    heartbeats run in the background.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ConsumerConfig.from_user(config, **settings)
        check_connection_settings(self.config)  # as the sync client's construction does
        self._core: ConsumerCore | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._iter_records: list[ConsumerRecord] = []
        self._iter_at = 0

    # ---- lifecycle

    async def __aenter__(self) -> AsyncConsumer:
        if self._core is not None:
            raise IllegalStateError("the consumer was already started")
        self._core = ConsumerCore(self.config, clock=loop_clock_ms())
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._core.fetcher.run)
        self._task_group.start_soon(telemetry.run, self._core.client)
        self._core.start_task = self._task_group.start_soon
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
        if self._task_group is not None:
            task_group, self._task_group = self._task_group, None
            await task_group.__aexit__(None, None, None)

    async def close(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Leave the group, stop fetching and close the connections; idempotent.

        A group member first commits its positions (with
        ``enable.auto.commit``), tells the listener its partitions are revoked
        and sends LeaveGroup (not a static member: it keeps its place until
        its session times out), all within ``timeout`` seconds or ``timeout_ms``
        (default ``default.api.timeout.ms``).
        """
        timeout_ms = timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
        core = self._core
        if core is None or core.closed:
            return
        budget = core.timeout(timeout_ms)
        try:
            with anyio.move_on_after(max(budget, 0.0) / 1000, shield=True):
                await _drive(core.closing_steps(budget))
        finally:
            with anyio.CancelScope(shield=True):
                await core.close()

    @property
    def _c(self) -> ConsumerCore:
        core = self._core
        if core is None:
            raise IllegalStateError("use the consumer as `async with AsyncConsumer(...) as c`")
        core.check_open()
        return core

    # ---- assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any previous assignment).

        Raises :class:`IllegalStateError` while subscribed.
        """
        self._c.assign(partitions)

    # ---- group

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: Any = None,
    ) -> None:
        """Join ``group.id`` and read the partitions the group gives this consumer.

        ``topics`` is a list of names, or a pattern (an ``re.Pattern`` or a
        string starting with ``^``) matched against the cluster's topics as
        metadata is refreshed. ``listener`` is a
        :class:`~kafkette.consumer.group.ConsumerRebalanceListener` (its
        methods may be ``async``). Joining happens in :meth:`poll`. Raises
        :class:`IllegalStateError` when partitions were assigned by hand.
        """
        self._c.subscribe(topics, listener)

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matches now)."""
        return self._c.subscription()

    async def unsubscribe(self) -> None:
        """Give up the group's partitions (the listener is told) and leave the group
        (its requests given up after ``default.api.timeout.ms``)."""
        await _drive(self._c.unsubscribe())

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id and instance id, as of the last rebalance."""
        return self._c.group_metadata()

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Commit ``offsets`` (the next offsets to read, as ints or
        :class:`OffsetAndMetadata`), by default the current positions, and wait.

        Raises :class:`~kafkette.consumer.group.CommitFailedError` when the
        group has rebalanced since (Java's ``commitSync``).
        """
        await self._c.commit(offsets, timeout_in_ms(None, timeout, timeout_ms))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return; ``callback(offsets, error_or_None)`` runs in a later
        :meth:`poll` (Java's ``commitAsync``)."""
        self._c.commit_async(offsets, callback)

    async def committed(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None where there is none)."""
        return await self._c.committed(partitions, timeout_in_ms(None, timeout, timeout_ms))

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

    async def position(
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
        return await self._c.position(partition, timeout_in_ms(timeout_or_ms, timeout, timeout_ms))

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of ``partitions`` until resumed."""
        self._c.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._c.resume(partitions)

    def paused(self) -> set[TopicPartition]:
        return self._c.subscriptions.paused()

    # ---- offsets

    async def offsets_for_times(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose timestamp is at least the given one (or None)."""
        return await self._c.offsets_for_times(timestamps, timeout_in_ms(None, timeout, timeout_ms))

    async def beginning_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        return await self._c.edge_offsets(
            partitions, EARLIEST_TIMESTAMP, timeout_in_ms(None, timeout, timeout_ms)
        )

    async def end_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """The high watermarks, or the last stable offsets with read_committed."""
        return await self._c.edge_offsets(
            partitions, LATEST_TIMESTAMP, timeout_in_ms(None, timeout, timeout_ms)
        )

    # ---- records

    async def poll(
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
        core = self._c
        return await _poll(core.buffer, core.poll(max_records, timeout_ms))

    async def poll_batches(
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
        core = self._c
        return await _poll(core.buffer, core.poll_batches(max_offsets, wait_ms))

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        """The records, polled as needed, until the consumer is closed; with OpenTelemetry,
        each in a ``process`` span until the next is asked for (docs/observability.md)."""
        telemetry = self._core.telemetry if self._core is not None else None
        if telemetry is not None:
            return telemetry.processing_async(self.__anext__)
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

    @documented_as(telemetry.client_instance_id)
    async def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        return await telemetry.client_instance_id(self._c.client, timeout)

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of the consumer's counters and per-partition lag."""
        return self._c.metrics()


async def _poll(buffer: FetchBuffer, run: PollRun[T]) -> dict[TopicPartition, list[T]]:
    """Do a poll's steps in this task: the group's work as :func:`_drive` does, the waits
    for fetches in the event loop."""
    for step in run:
        if isinstance(step, FetchWait):
            await buffer.wait_async(step.seen, step.seconds)
        else:
            await _drive(step)
    return run.result


async def _drive(steps: Iterator[Step]) -> None:
    """Run group steps in this task; the first listener error is raised at the end."""
    error: Exception | None = None
    for step in steps:
        if isinstance(step, Call):
            await step.func()
            continue
        try:
            result = step.func(*step.args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            error = error or exc
    if error is not None:
        raise error
