"""What both group member runners do the same way, whichever protocol they speak.

:class:`~kafkette.consumer.group.coordinator.GroupMember` (classic JoinGroup and
SyncGroup) and :class:`~kafkette.consumer.group.heartbeat_member.HeartbeatMember`
(KIP-848 heartbeats) each drive their own state machine; this base holds the
consumer-side steps they share: background tasks, rebalance-listener calls,
commits in the background, the group work ``poll`` starts but does not wait
for past its deadline (:meth:`MemberBase.job`), and the news that a ``poll``
waiting for records must act on (:meth:`MemberBase.tell_poll`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import anyio
import anyio.abc
import attrs

from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.group.types import ConsumerRebalanceListener
from kafkette.consumer.subscription import SubscriptionState
from kafkette.errors import KafkaError
from kafkette.structs import OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.consumer.group")


@attrs.frozen
class Call:
    """An async operation ``poll`` must complete in the event loop before going on."""

    func: Callable[[], Awaitable[None]]


@attrs.frozen
class Invoke:
    """A user callback (rebalance listener, commit callback) to run on the caller's side."""

    func: Callable[..., Any]
    args: tuple[Any, ...]


Step = Call | Invoke


@attrs.define(eq=False)
class Job:
    """Group work a ``poll`` started in the background (a metadata refresh, the commit
    before a rebalance): it outlives that poll, and later polls wait for it again, each
    up to its own deadline, until it ends (as Java's consumer keeps its pending requests
    across polls)."""

    ended: anyio.Event
    error: Exception | None = None


def seconds_until(deadline_ms: float, now_ms: float) -> float:
    """What is left until ``deadline_ms``, in seconds for anyio (never negative)."""
    return max(deadline_ms - now_ms, 0.0) / 1000


CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any]


CommitTrace = Callable[[Mapping[TopicPartition, OffsetAndMetadata]], AbstractContextManager[None]]


class MemberBase:
    """The consumer-side steps shared by the group member runners."""

    client: KafkaClient
    config: ConsumerConfig
    group_id: str
    subscriptions: SubscriptionState
    listener: ConsumerRebalanceListener | Any | None
    _apply_assignment: Callable[[list[TopicPartition]], None]
    _pending_callbacks: list[Invoke]
    _task_group: anyio.abc.TaskGroup | None
    _early_tasks: list[Callable[[], Coroutine[Any, Any, None]]]
    _jobs: dict[str, Job]
    _wake_poll: Callable[[], None]
    news = 0
    """Bumped (before ``poll`` is woken) when the background learned something ``poll``
    must act on: a ``poll`` waiting for records runs the group's steps again."""
    commit_trace: CommitTrace | None = None
    """The consumer's OpenTelemetry commit span (``ConsumerTelemetry.committing``), around
    the commits the member starts itself: ``commit_async``, auto commits, on close."""
    commit_latency: Callable[[float], None] | None = None
    """Told each successful commit's round trip in ms (the consumer's metrics)."""
    rebalance_latency: Callable[[float], None] | None = None
    """Told each rebalance's time in ms, from its first join (JoinGroup, or the
    heartbeat that brought a new target) until the member holds its assignment (the
    consumer's metrics: Java's ``rebalance-latency``)."""
    _rebalance_started_ms: float | None = None

    def tell_poll(self) -> None:
        """Wake a ``poll`` waiting for records to run the group's steps again (event loop):
        a new assignment arrived in the background, the member was fenced or failed."""
        self.news += 1
        self._wake_poll()

    async def commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        raise NotImplementedError

    async def background_commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """:meth:`commit` of a commit the application does not wait for, traced."""
        if self.commit_trace is None or not offsets:
            await self.timed_commit(offsets, timeout_ms)
            return
        with self.commit_trace(offsets):
            await self.timed_commit(offsets, timeout_ms)

    async def timed_commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """:meth:`commit`, its round trip told to :attr:`commit_latency` when it succeeds."""
        start = self.client.clock()
        await self.commit(offsets, timeout_ms)
        if self.commit_latency is not None and offsets:
            self.commit_latency(self.client.clock() - start)

    def rebalance_started(self) -> None:
        """A rebalance begins now, unless one is under way (its retries count in it)."""
        if self._rebalance_started_ms is None:
            self._rebalance_started_ms = self.client.clock()

    def rebalance_ended(self) -> None:
        """The member holds its assignment: tell :attr:`rebalance_latency` the time."""
        started, self._rebalance_started_ms = self._rebalance_started_ms, None
        if started is not None and self.rebalance_latency is not None:
            self.rebalance_latency(self.client.clock() - started)

    def spawn(self, func: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``func`` in the member's task group (async commits), once it runs."""
        if self._task_group is None:
            self._early_tasks.append(func)
        else:
            self._task_group.start_soon(func)

    # ---- work that outlives a poll

    def job(self, key: str, func: Callable[[], Awaitable[None]], deadline_ms: float) -> Call:
        """The step that starts ``func`` in the background as job ``key`` (unless that
        job runs already) and waits for it up to ``deadline_ms``; after the step,
        :meth:`job_ended` says whether it ended."""
        return Call(partial(self._run_job, key, func, deadline_ms))

    async def _run_job(
        self, key: str, func: Callable[[], Awaitable[None]], deadline_ms: float
    ) -> None:
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = Job(anyio.Event())
            self.spawn(partial(self._job_body, job, func))
        with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())):
            await job.ended.wait()

    @staticmethod
    async def _job_body(job: Job, func: Callable[[], Awaitable[None]]) -> None:
        try:
            await func()
        except Exception as exc:  # raised by the poll that takes the job's end
            job.error = exc
        finally:
            job.ended.set()

    def job_ended(self, key: str) -> bool:
        """Whether job ``key`` ended (then it is forgotten, and its error raised)."""
        job = self._jobs.get(key)
        if job is None or not job.ended.is_set():
            return False
        del self._jobs[key]
        if job.error is not None:
            raise job.error
        return True

    def _listener_call(self, method: str, partitions: set[TopicPartition]) -> Iterator[Step]:
        listener = self.listener
        if listener is None:
            return
        func = getattr(listener, method, None)
        if func is None and method == "on_partitions_lost":
            func = getattr(listener, "on_partitions_revoked", None)
        if func is not None:
            yield Invoke(func, (set(partitions),))

    def _callbacks(self) -> Iterator[Step]:
        pending, self._pending_callbacks = self._pending_callbacks, []
        yield from pending

    async def _apply(self, partitions: list[TopicPartition]) -> None:
        self._apply_assignment(partitions)

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions of the assigned partitions, as offsets to commit."""
        result = {}
        for tp in self.subscriptions.assigned():
            state = self.subscriptions.get(tp)
            if state is not None and state.position is not None:
                result[tp] = OffsetAndMetadata(state.position)
        return result

    def commit_in_background(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback | None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs from a later poll."""

        async def commit() -> None:
            error: Exception | None = None
            try:
                await self.background_commit(offsets, self.config.default_api_timeout_ms)
            except KafkaError as exc:
                error = exc
                logger.info("group %s: async commit failed: %s", self.group_id, exc)
            if callback is not None:
                self._pending_callbacks.append(Invoke(callback, (offsets, error)))

        self.spawn(commit)
