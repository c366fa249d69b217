"""The consumer's machinery, shared by :class:`AsyncConsumer` and :class:`Consumer`.

:class:`ConsumerCore` owns the client, the subscription state, the fetch
buffer and the fetcher. Its control operations (assign, seek, offsets...) run
in the event loop; :meth:`ConsumerCore.drain` may run in any thread: it takes
the buffer's lock once per completed fetch and parses records in the calling
thread, so the sync consumer's ``poll`` never crosses threads per record.

Who owns what: :class:`SubscriptionState` says which partitions are read and
where; the :class:`Fetcher` only reads it (and resets positions it is asked
to); ``drain`` advances positions. With ``subscribe``, a
:class:`~kafkette.consumer.group.coordinator.GroupMember` sits beside the
fetcher and drives the assignment and the committed positions; ``assign``
and ``subscribe`` exclude each other, as in Java.
"""

from __future__ import annotations

import re
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import attrs

from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.client.telemetry import attach_consumer
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.consumer.fetch_buffer import CompletedFetch, FetchBuffer, FetchedBatch
from kafkette.consumer.fetcher import Fetcher, apply_reset, take_committed_positions
from kafkette.consumer.group.coordinator import Call, GroupMember, Step
from kafkette.consumer.group.heartbeat_member import HeartbeatMember
from kafkette.consumer.group.offsets import fetch_committed
from kafkette.consumer.metrics import ConsumerMetrics, MetricsRecorder
from kafkette.consumer.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    list_offsets,
)
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import (
    EARLIEST,
    LATEST,
    NO_RESET,
    NoOffsetForPartitionError,
    SubscriptionState,
)
from kafkette.errors import CorruptMessageError, IllegalStateError, KafkaTimeoutError
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kafkette.otel.consumer import ConsumerTelemetry

T = TypeVar("T")

Records = dict[TopicPartition, list[ConsumerRecord]]
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any]


@attrs.frozen
class FetchWait:
    """A poll's step when it has nothing to return yet: wait until the fetch buffer's
    generation is no longer ``seen`` (a fetch arrived, the group has news, the consumer
    closed) or ``seconds`` pass."""

    seen: int
    seconds: float


PollStep = Iterator[Step] | FetchWait
"""A step of a poll: the group's work (a run of :data:`Step`, driven whole), or a wait
for fetches."""


class PollRun(Generic[T]):
    """One ``poll`` (:meth:`ConsumerCore.poll`): iterate it and do each step as the
    consumer does (the sync one in its thread and its loop's, the async one with awaits),
    then take its :attr:`result`."""

    def __init__(self, steps: Generator[PollStep, None, dict[TopicPartition, list[T]]]) -> None:
        self._steps = steps
        self.result: dict[TopicPartition, list[T]] = {}
        """What the poll returns, once its steps are done."""

    def __iter__(self) -> Generator[PollStep, None, None]:
        self.result = yield from self._steps


def check_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``partitions`` as a list, each a TopicPartition, or a TypeError saying what was given
    (one TopicPartition where a list is taken is kafka-python's ``committed(tp)``)."""
    if isinstance(partitions, TopicPartition):
        raise TypeError(
            f"expected a list of TopicPartition, got one TopicPartition: pass [{partitions!r}]"
        )
    try:
        result = list(partitions)
    except TypeError:
        raise TypeError(f"expected a list of TopicPartition, got {partitions!r}") from None
    for tp in result:
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"expected a TopicPartition, got {tp!r}")
    return result


class ConsumerCore:
    """State and fetcher of one consumer; create it inside the event loop."""

    def __init__(self, config: ConsumerConfig, *, clock: MonotonicClockMs = monotonic_ms) -> None:
        self.config = config
        self.client = KafkaClient(config, clock=clock)
        if config.group_id is not None:
            # A JoinGroup waits for the whole rebalance (up to max.poll.interval.ms).
            self.client.coordinator_request_timeout_ms = max(
                config.request_timeout_ms, config.max_poll_interval_ms + 5_000
            )
        self.subscriptions = SubscriptionState(
            config.auto_offset_reset, committed_first=config.group_id is not None
        )
        self.buffer = FetchBuffer()
        self.metrics_recorder = MetricsRecorder()
        self.fetcher = Fetcher(
            self.client, config, self.subscriptions, self.buffer, self.metrics_recorder
        )
        self.read_committed = config.isolation_level == "read_committed"
        attach_consumer(  # KIP-714 (enable.metrics.push)
            self.client, self.metrics, lambda: len(self.subscriptions.assigned())
        )
        self.key_deserializer = config.key_deserializer
        self.value_deserializer = config.value_deserializer
        # How poll wakes the fetcher: directly in the loop, or through the sync bridge.
        self.wake_fetcher: Callable[[], None] = self.fetcher.wake
        # How background tasks (the group member) are started: set by the consumer.
        self.start_task: Callable[[Callable[[], Coroutine[Any, Any, None]]], object] | None = None
        self.group: GroupMember | HeartbeatMember | None = None
        self.closed = False
        self.telemetry: ConsumerTelemetry | None = None
        """OpenTelemetry's spans and metrics (docs/observability.md); None when off. Then
        polls, commits and the consumers' iteration go through it, never per record."""
        if (
            config.tracer_provider is not None
            or config.meter_provider is not None
            or (config.opentelemetry)
        ):
            from kafkette.otel import consumer_telemetry

            self.telemetry = consumer_telemetry(config)
            self.telemetry.watch_lag(lambda: self.metrics().records_lag)

    def check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("the consumer is closed")

    # ---- control (event loop)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        if self.group is not None and self.group.subscribed:
            raise IllegalStateError("assign() cannot be used while subscribed (unsubscribe first)")
        self.set_assignment(partitions)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assigned partitions (by the user or by the group)."""
        wanted = check_partitions(partitions)
        for tp in self.subscriptions.assign(wanted):
            self.buffer.drop(tp)
        self.client.metadata.wanted_topics.update(tp.topic for tp in wanted)
        self.fetcher.wake()

    # ---- group (event loop)

    def subscribe(
        self, topics: Iterable[str] | str | re.Pattern[str], listener: Any = None
    ) -> None:
        """Join ``group.id`` following ``topics`` (a list, or a pattern / ``'^...'`` string)."""
        self.check_open()
        if self.subscriptions.assigned() and (self.group is None or not self.group.subscribed):
            raise IllegalStateError("subscribe() cannot be used with assign() (unassign first)")
        pattern: re.Pattern[str] | None = None
        names: list[str] | None = None
        if isinstance(topics, re.Pattern):
            pattern = topics
        elif isinstance(topics, str):
            if topics.startswith("^"):
                pattern = re.compile(topics)
            else:
                names = [topics]
        else:
            names = list(topics)
            for name in names:
                if not isinstance(name, str) or not name.strip():
                    raise ValueError(f"topic names must be non-empty strings, got {name!r}")
        if names is not None and not names:
            raise ValueError("subscribe() needs topics; use unsubscribe() to stop")
        self.member().subscribe(names, pattern, listener)

    def member(self) -> GroupMember | HeartbeatMember:
        """The group member, made (and started) on first use; needs a ``group.id``."""
        if self.group is None:
            if self.config.group_id is None:
                raise IllegalStateError("this needs a group.id in the consumer's settings")
            runner = HeartbeatMember if self.config.group_protocol == "consumer" else GroupMember
            self.group = runner(
                self.client,
                self.config,
                self.subscriptions,
                self.set_assignment,
                wake_poll=self.buffer.wake_waiters,
            )
            if self.telemetry is not None:  # OpenTelemetry spans of its own commits
                self.group.commit_trace = self.telemetry.committing
            self.group.commit_latency = self.metrics_recorder.commit_done
            self.group.rebalance_latency = self.metrics_recorder.rebalance_done
            if self.start_task is None:
                raise IllegalStateError("the consumer is not running")
            self.start_task(self.group.run)
        return self.group

    def subscription(self) -> set[str]:
        return set(self.group.topics) if self.group is not None else set()

    def group_steps(self, deadline_ms: float) -> Iterator[Step]:
        """The group work ``poll`` does first (nothing without a subscription)."""
        if self.group is not None:
            yield from self.group.poll_steps(deadline_ms)

    def leave_steps(self, reason: str, *, closing: bool, deadline_ms: float) -> Iterator[Step]:
        """Unsubscribe (or close): commit, revoke through the listener, leave the group;
        the requests are given up at ``deadline_ms``."""
        group = self.group
        if group is None or not group.subscribed:
            return
        yield from group.leave_steps(
            reason, commit=closing and self.config.enable_auto_commit, deadline_ms=deadline_ms
        )
        group.topics = set()
        group.pattern = None

    def unsubscribe(self) -> Iterator[Step]:
        """Unsubscribe's steps: give up the group's partitions (the listener is told) and
        leave, the requests given up after ``default.api.timeout.ms``."""
        self.check_open()
        deadline = self.client.clock() + self.timeout(None)
        yield from self.leave_steps(
            "the consumer unsubscribed", closing=False, deadline_ms=deadline
        )
        yield Call(self._unassign)

    async def _unassign(self) -> None:
        self.set_assignment([])

    def closing_steps(self, budget_ms: float) -> Iterator[Step]:
        """Close's group work, its requests given up after ``budget_ms``: commit (with
        ``enable.auto.commit``), revoke through the listener, leave the group."""
        deadline = self.client.clock() + budget_ms
        return self.leave_steps("the consumer is closing", closing=True, deadline_ms=deadline)

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self.member().group_metadata()

    def offsets_to_commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Explicit offsets (ints or OffsetAndMetadata), or the consumed positions."""
        if offsets is None:
            return self.member().consumed_offsets()
        result: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            check_partitions([tp])
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            if om.offset < 0:
                raise ValueError(f"cannot commit a negative offset for {tp}: {om.offset}")
            result[tp] = om
        return result

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
        timeout_ms: float | None,
    ) -> None:
        self.check_open()
        member = self.member()
        wanted = self.offsets_to_commit(offsets)
        budget = self.timeout(timeout_ms)
        if self.telemetry is None:
            await self.within("commit", budget, lambda: member.timed_commit(wanted, budget))
            return
        with self.telemetry.committing(wanted):
            await self.within("commit", budget, lambda: member.timed_commit(wanted, budget))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
        callback: CommitCallback | None,
    ) -> None:
        self.check_open()
        self.member().commit_in_background(self.offsets_to_commit(offsets), callback)

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self.check_open()
        group_id = self.config.group_id
        if group_id is None:
            raise IllegalStateError("committed() needs a group.id in the consumer's settings")
        tps = check_partitions(partitions)
        budget = self.timeout(timeout_ms)
        deadline = self.client.clock() + budget
        return await self.within(
            "committed()",
            budget,
            lambda: fetch_committed(self.client, group_id, tps, deadline_ms=deadline),
        )

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.check_open()
        self.subscriptions.seek(tp, offset)
        self.buffer.drop(tp)
        self.fetcher.wake()

    def seek_to(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        """Reset ``partitions`` (all assigned when empty) to the earliest or latest offset."""
        self.check_open()
        tps = check_partitions(partitions) or sorted(self.subscriptions.assigned())
        for tp in tps:
            self.subscriptions.state(tp)
        for tp in tps:
            self.subscriptions.request_reset(tp, strategy)
            self.buffer.drop(tp)
        self.fetcher.wake()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        for tp in check_partitions(partitions):
            self.subscriptions.pause(tp)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        for tp in check_partitions(partitions):
            self.subscriptions.resume(tp)
        self.fetcher.wake()

    async def position(self, tp: TopicPartition, timeout_ms: float | None) -> int:
        """The offset of the next record ``poll`` returns for ``tp``, resolving it if unknown."""
        self.check_open()
        budget = self.timeout(timeout_ms)
        return await self.within(
            f"position() of {tp}", budget, lambda: self._resolve_position(tp, budget)
        )

    async def _resolve_position(self, tp: TopicPartition, budget: float) -> int:
        state = self.subscriptions.state(tp)
        deadline = self.client.clock() + budget
        if state.position is None and state.committed_first and self.config.group_id:
            await take_committed_positions(
                self.client, self.subscriptions, self.config.group_id, [tp], deadline_ms=deadline
            )
        while state.position is None:
            strategy = state.reset
            if strategy == NO_RESET:
                raise NoOffsetForPartitionError(f"{tp} has no position and auto.offset.reset=none")
            left = deadline - self.client.clock()
            if left <= 0:
                raise KafkaTimeoutError(f"could not resolve the position of {tp} in time")
            spec = EARLIEST_TIMESTAMP if strategy == EARLIEST else LATEST_TIMESTAMP
            found = await list_offsets(
                self.client, {tp: spec}, isolation_level=self._isolation(), timeout_ms=left
            )
            answer = found.get(tp)
            apply_reset(self.subscriptions, tp, strategy, answer.offset if answer else None)
            if self.subscriptions.get(tp) is not state:
                raise IllegalStateError(f"partition {tp} was unassigned")
        self.fetcher.wake()
        return state.position

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self.check_open()
        for tp, ts in timestamps.items():
            check_partitions([tp])
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must not be negative, got {ts}")
        budget = self.timeout(timeout_ms)
        return await self.within(
            "offsets_for_times()",
            budget,
            lambda: list_offsets(
                self.client, timestamps, isolation_level=self._isolation(), timeout_ms=budget
            ),
        )

    async def edge_offsets(
        self, partitions: Iterable[TopicPartition], spec: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        """Earliest (``spec`` -2) or latest (-1; the LSO for read_committed) offsets."""
        self.check_open()
        tps = check_partitions(partitions)
        budget = self.timeout(timeout_ms)
        found = await self.within(
            "beginning_offsets()" if spec == EARLIEST_TIMESTAMP else "end_offsets()",
            budget,
            lambda: list_offsets(
                self.client,
                dict.fromkeys(tps, spec),
                isolation_level=self._isolation(),
                timeout_ms=budget,
            ),
        )
        return {tp: answer.offset if answer else -1 for tp, answer in found.items()}

    def _isolation(self) -> int:
        return self.fetcher.isolation_level

    def timeout(self, timeout_ms: float | None) -> float:
        """A blocking call's budget: ``timeout_ms``, or default.api.timeout.ms."""
        return float(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms)

    async def within(
        self, what: str, timeout_ms: float, operation: Callable[[], Awaitable[T]]
    ) -> T:
        """``operation()``, cancelled after ``timeout_ms``: then :class:`KafkaTimeoutError`
        (with the last failure to connect, which says why nothing answered)."""
        with anyio.move_on_after(max(timeout_ms, 0.0) / 1000):
            return await operation()
        cause = self.client.last_connection_error
        detail = f" (last connection error: {cause})" if cause is not None else ""
        raise KafkaTimeoutError(f"{what} did not complete within {timeout_ms:g} ms{detail}")

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.telemetry is not None:
            self.telemetry.close()
        if self.group is not None:
            self.group.stop()
        self.fetcher.close()
        self.buffer.clear()
        self.buffer.wake_waiters()
        await self.client.close()

    # ---- poll (any thread)

    def poll(self, max_records: int | None, timeout_ms: float | None) -> PollRun[ConsumerRecord]:
        """The steps of ``poll``: at most ``max_records`` (default ``max.poll.records``)
        records, waiting up to ``timeout_ms`` (default 0) for some."""
        self.check_open()
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit < 1:
            raise ValueError(f"max_records must be positive, got {limit}")
        steps = self._poll(lambda: self.drain(limit), timeout_ms or 0)
        steps = self.metrics_recorder.timed_poll(steps, self.client.clock)
        if self.telemetry is not None:
            steps = self.telemetry.traced_poll(steps)
        return PollRun(steps)

    def poll_batches(self, max_offsets: int, timeout_ms: float | None) -> PollRun[FetchedBatch]:
        """The steps of ``poll_batches``: whole batches until they hold ``max_offsets``
        offsets or more, waiting up to ``timeout_ms`` (default 0) for some."""
        self.check_open()
        if max_offsets < 1:
            raise ValueError(f"max_offsets must be positive, got {max_offsets}")
        steps = self._poll(lambda: self.drain_batches(max_offsets), timeout_ms or 0)
        steps = self.metrics_recorder.timed_poll(steps, self.client.clock)
        if self.telemetry is not None:
            steps = self.telemetry.traced_poll_batches(steps)
        return PollRun(steps)

    def _poll(
        self, drain: Callable[[], dict[TopicPartition, list[T]]], timeout_ms: float
    ) -> Generator[PollStep, None, dict[TopicPartition, list[T]]]:
        """What ``drain`` takes from the buffer after the group's work, waiting up to
        ``timeout_ms`` for something to arrive while it takes nothing (the group's work
        again when it has news: an assignment that arrived meanwhile, say)."""
        clock = self.client.clock
        deadline = clock() + timeout_ms
        news = self._group_news()
        if self.group is not None:
            yield self.group_steps(deadline)
        while True:
            seen = self.buffer.generation
            if self._group_news() != news:
                news = self._group_news()
                yield self.group_steps(deadline)
            if self.closed:  # by another thread or task meanwhile
                return {}
            self.check_positions()
            taken = drain()
            if taken:
                return taken
            left = deadline - clock()
            if left <= 0:
                return {}
            yield FetchWait(seen, left / 1000)

    def _group_news(self) -> int:
        """Bumped when the group has news for ``poll`` (see
        :meth:`~kafkette.consumer.group.member_base.MemberBase.tell_poll`): a ``poll``
        that saw another number runs :meth:`group_steps` again."""
        return self.group.news if self.group is not None else 0

    def check_positions(self) -> None:
        missing = self.subscriptions.missing_positions()
        if missing:
            names = ", ".join(str(tp) for tp in sorted(missing))
            raise NoOffsetForPartitionError(
                f"no position for {names} and auto.offset.reset=none: seek first"
            )

    def drain(self, limit: int) -> Records:
        """Up to ``limit`` already-fetched records, grouped by partition."""
        kd, vd = self.key_deserializer, self.value_deserializer

        def take(entry: CompletedFetch, remaining: int) -> tuple[list[ConsumerRecord], int, bool]:
            records, done = entry.take(remaining, kd, vd)
            return records, len(records), done

        return self._drain(limit, take)

    def drain_batches(self, limit: int) -> dict[TopicPartition, list[FetchedBatch]]:
        """Already-fetched whole batches, grouped by partition, until they hold ``limit``
        offsets or more (see :meth:`CompletedFetch.take_batches`)."""
        return self._drain(limit, CompletedFetch.take_batches)

    def _drain(
        self, limit: int, take: Callable[[CompletedFetch, int], tuple[list[T], int, bool]]
    ) -> dict[TopicPartition, list[T]]:
        result: dict[TopicPartition, list[T]] = {}
        remaining = limit
        buffer = self.buffer
        subscriptions = self.subscriptions
        while remaining > 0:
            entry = buffer.first_ready(_paused)
            if entry is None:
                break
            tp = entry.tp
            if entry.error is not None:
                if result:
                    break
                buffer.remove(entry)
                self.wake_fetcher()
                raise entry.error
            state = entry.state
            if subscriptions.get(tp) is not state or state.position != entry.position:
                buffer.remove(entry)  # seeked or unassigned since it was fetched
                self.wake_fetcher()
                continue
            try:
                items, taken, done = take(entry, remaining)
            except CorruptMessageError as exc:
                buffer.replace(entry, CompletedFetch.failed(tp, state, exc))
                if result:
                    break
                continue
            if items:
                got = result.get(tp)
                if got is None:
                    result[tp] = items
                else:
                    got += items
            remaining -= taken
            if done:
                if buffer.remove(entry):  # else the fetch in flight for it plans next
                    self.wake_fetcher()
                self.metrics_recorder.bytes_consumed += entry.size
        self.metrics_recorder.records_consumed += limit - remaining
        return result

    def metrics(self) -> ConsumerMetrics:
        lag: dict[TopicPartition, int] = {}
        for tp in self.subscriptions.assigned():
            value = self.subscriptions.lag(tp, self.read_committed)
            if value is not None:
                lag[tp] = value
        return self.metrics_recorder.snapshot(lag)


def _paused(entry: CompletedFetch) -> bool:
    state = entry.state
    return state.paused or state.revoking


__all__ = ["EARLIEST", "LATEST", "ConsumerCore", "FetchWait", "PollRun", "PollStep", "Records"]
