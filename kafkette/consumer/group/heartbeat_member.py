"""The I/O of one consumer's membership under the consumer group protocol (KIP-848,
``group.protocol=consumer``).

:class:`HeartbeatMember` drives a
:class:`~kafkette.consumer.group.heartbeat_membership.HeartbeatMembership` as
:class:`~kafkette.consumer.group.coordinator.GroupMember` drives the classic one, with
the same surface for the consumer:

- in the background (:meth:`HeartbeatMember.run`): ConsumerGroupHeartbeat at the
  interval the broker gives, at once when joining, acknowledging or leaving;
- in ``poll`` (:meth:`HeartbeatMember.poll_steps`): reconciliation (the listener's
  ``on_partitions_revoked`` with the partitions that go, an auto commit, the new
  partitions at their committed offsets and ``on_partitions_assigned`` with only
  those), partitions lost after fencing, auto commits. An answer that brings a new
  assignment, fencing or a fatal error wakes a ``poll`` waiting for records
  (:meth:`~kafkette.consumer.group.member_base.MemberBase.tell_poll`), which does this
  at once rather than at its next call.

A member that does not poll within ``max.poll.interval.ms`` leaves (epoch -1), as
Java's consumer does; its next ``poll`` reports its partitions lost and joins again.
Not done: the incremental form of the heartbeat (each one carries every field).
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc

from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.group.heartbeat_membership import (
    AnswerKind,
    HeartbeatMembership,
    HeartbeatState,
)
from kafkette.consumer.group.member_base import Call, Invoke, Job, MemberBase, Step, seconds_until
from kafkette.consumer.group.offsets import (
    MEMBER_EPOCH_COMMIT_VERSION,
    commit_offsets,
)
from kafkette.consumer.group.types import ConsumerRebalanceListener
from kafkette.consumer.subscription import SubscriptionState
from kafkette.errors import (
    ApiError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kafkette.protocol.messages import ConsumerGroupHeartbeatResponse
from kafkette.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.consumer.group")

METADATA_JOB = "metadata"
COMMIT_JOB = "commit before revoking"


class HeartbeatMember(MemberBase):
    """The member of ``group.id`` one consumer is, under ``group.protocol=consumer``;
    create it inside the event loop."""

    def __init__(
        self,
        client: KafkaClient,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        apply_assignment: Callable[[list[TopicPartition]], None],
        *,
        wake_poll: Callable[[], None] = lambda: None,
    ) -> None:
        assert config.group_id is not None
        self.membership = HeartbeatMembership(
            config.group_id,
            instance_id=config.group_instance_id,
            rebalance_timeout_ms=config.max_poll_interval_ms,
            remote_assignor=config.group_remote_assignor,
            rack_id=config.client_rack or None,
        )
        self.client = client
        self.config = config
        self.group_id: str = config.group_id
        self.instance_id = config.group_instance_id
        self.subscriptions = subscriptions
        self._apply_assignment = apply_assignment
        self._wake_poll = wake_poll
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener | Any | None = None
        self._wake = anyio.Event()
        self._last_sent_ms = float("-inf")
        self._retry_at_ms = float("-inf")
        self._next_auto_commit_ms = float("-inf")
        self._pending_callbacks: list[Invoke] = []
        self._task_group: anyio.abc.TaskGroup | None = None
        self._early_tasks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._scope = anyio.CancelScope()
        self._sending = anyio.Lock()
        self._polled_ms = float("inf")
        """When ``poll`` last ran (infinity until it first does)."""
        self._poll_timed_out = False
        self._jobs: dict[str, Job] = {}

    # ---- facts, as the consumer and the tests read them

    @property
    def state(self) -> HeartbeatState:
        return self.membership.state

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def member_epoch(self) -> int:
        return self.membership.member_epoch

    @property
    def subscribed(self) -> bool:
        return self.pattern is not None or bool(self.topics)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member epoch stands for the generation, as in Java's consumer."""
        m = self.membership
        return ConsumerGroupMetadata(self.group_id, m.member_epoch, m.member_id, self.instance_id)

    # ---- subscription

    def subscribe(
        self, topics: Iterable[str] | None, pattern: re.Pattern[str] | None, listener: Any
    ) -> None:
        """Follow ``topics`` or the topics matching ``pattern`` (sent to the broker as
        SubscribedTopicRegex, which it evaluates)."""
        self.pattern = pattern
        self.listener = listener
        self.topics = set(topics or ())
        self.client.metadata.wanted_topics.update(self.topics)
        self.membership.subscribe(
            tuple(sorted(self.topics)), pattern.pattern if pattern is not None else None
        )
        self._wake.set()

    # ---- background

    async def run(self) -> None:
        """Heartbeats, until :meth:`stop`."""
        with self._scope:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_group.start_soon(self._heartbeat_loop)
                for func in self._early_tasks:
                    task_group.start_soon(func)
                self._early_tasks.clear()

    def stop(self) -> None:
        """Cancel :meth:`run` (also when it has not started yet)."""
        self._scope.cancel()

    async def _heartbeat_loop(self) -> None:
        membership = self.membership
        while True:
            now = self.client.clock()
            if membership.in_group and now - self._polled_ms >= self.config.max_poll_interval_ms:
                logger.warning(
                    "group %s: poll was not called within max.poll.interval.ms (%d ms); "
                    "leaving the group",
                    self.group_id,
                    self.config.max_poll_interval_ms,
                )
                self._poll_timed_out = True
                await self.leave_group("consumer poll timeout has expired")
                continue
            if membership.in_group:
                due = max(membership.next_heartbeat_ms(self._last_sent_ms), self._retry_at_ms)
                if now >= due:
                    await self._heartbeat()
                    continue
                # (awake when max.poll.interval.ms runs out, too)
                wait_ms = min(due, self._polled_ms + self.config.max_poll_interval_ms) - now
            else:
                wait_ms = 1_000.0
            with anyio.move_on_after(wait_ms / 1000):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _send_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        node = await self.client.coordinator(self.group_id)
        connection = await self.client.coordinator_connection(node)
        version = connection.version_for(ConsumerGroupHeartbeatRequest)
        response = await self.client.send_to_coordinator(self.group_id, request, version=version)
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        return response

    async def _heartbeat(self) -> None:
        membership = self.membership
        async with self._sending:
            if not membership.in_group:
                return
            self._last_sent_ms = self.client.clock()
            if membership.state is HeartbeatState.JOINING:
                self.rebalance_started()
            request = membership.heartbeat_request()
            try:
                response = await self._send_heartbeat(request)
            except UnsupportedVersionError as exc:
                membership.failed(
                    UnsupportedVersionError(
                        f"group {self.group_id}: the group coordinator does not serve the "
                        f"consumer group protocol (KIP-848 ConsumerGroupHeartbeat); use "
                        f"group.protocol=classic with this broker ({exc})"
                    )
                )
                self._wake.set()
                self.tell_poll()
                return
            except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
                logger.info("group %s: heartbeat failed: %s", self.group_id, exc)
                self._retry_at_ms = self.client.clock() + self.config.retry_backoff_ms
                membership.send_now = True
                return
            assignment = (
                None
                if response.assignment is None
                else {
                    tp.topic_id: frozenset(tp.partitions)
                    for tp in response.assignment.topic_partitions
                }
            )
            before = (membership.state, membership.target)
            kind = membership.on_answer(
                response.error_code,
                response.error_message,
                response.member_epoch,
                response.heartbeat_interval_ms,
                assignment,
            )
            if membership.reconciling:
                self.rebalance_started()
            elif membership.state is HeartbeatState.STABLE:
                self.rebalance_ended()  # a join that brought nothing to reconcile
            if (membership.state, membership.target) != before:
                # A new assignment, fencing or a fatal error: poll acts on it now, not
                # at its timeout (reconciling happens in poll, as Java's listener calls).
                self.tell_poll()
        if kind is AnswerKind.FIND_COORDINATOR:
            self.client.invalidate_coordinator(self.group_id)
        if kind in (AnswerKind.FIND_COORDINATOR, AnswerKind.RETRY):
            self._retry_at_ms = self.client.clock() + self.config.retry_backoff_ms
            membership.send_now = True

    # ---- poll (steps)

    def poll_steps(self, deadline_ms: float) -> Iterator[Step]:
        """What ``poll`` does for the group before it returns records; nothing here waits
        past ``deadline_ms`` (longer work goes on in the background, for the next poll)."""
        self._polled_ms = self.client.clock()
        yield from self._callbacks()
        membership = self.membership
        if membership.fatal_error is not None:
            raise membership.fatal_error
        if not self.subscribed:
            return
        if self._poll_timed_out and membership.state is HeartbeatState.UNSUBSCRIBED:
            self._poll_timed_out = False
            owned = self.subscriptions.assigned()
            if owned:
                yield from self._listener_call("on_partitions_lost", owned)
                yield Call(partial(self._apply, []))
            membership.subscribe(membership.topics, membership.regex)
            self._wake.set()
        if membership.state is HeartbeatState.FENCED:
            owned = self.subscriptions.assigned()
            if owned:
                yield from self._listener_call("on_partitions_lost", owned)
                yield Call(partial(self._apply, []))
            membership.lost()
            self._wake.set()
        if membership.reconciling:
            yield from self._reconcile_steps(deadline_ms)
        if membership.state is HeartbeatState.STABLE and self.config.enable_auto_commit:
            now = self.client.clock()
            if now >= self._next_auto_commit_ms:
                self._next_auto_commit_ms = now + self.config.auto_commit_interval_ms
                offsets = self.consumed_offsets()
                if offsets:
                    yield Call(partial(self._start_commit, offsets))

    def _reconcile_steps(self, deadline_ms: float) -> Iterator[Step]:
        target = self.membership.target
        if target is None:
            return
        names = self._topic_names()
        if METADATA_JOB in self._jobs or any(t not in names for t in target):
            yield self.job(METADATA_JOB, self._refresh_target_metadata, deadline_ms)
            if not self.job_ended(METADATA_JOB):
                return  # the refresh goes on: the next poll waits for it again
            names = self._topic_names()
            if any(t not in names for t in target):
                return  # topics not in metadata yet: the next poll tries again
        wanted = {TopicPartition(names[t], p) for t, ps in target.items() for p in ps}
        owned = self.subscriptions.assigned()
        revoked = owned - wanted
        added = wanted - owned
        if revoked:
            if self.config.enable_auto_commit:
                # Commit before the listener hears of the revocation, as Java's consumer;
                # the partitions that go hand out no more records meanwhile.
                self.subscriptions.mark_revoking(revoked)
                yield self.job(COMMIT_JOB, self._commit_quietly, deadline_ms)
                if not self.job_ended(COMMIT_JOB):
                    return
            yield from self._listener_call("on_partitions_revoked", revoked)
            yield Call(partial(self._apply, sorted(owned - revoked)))
        # New partitions start at the group's committed offsets, which the fetcher reads.
        yield Call(partial(self._apply, sorted(wanted)))
        if added:
            yield from self._listener_call("on_partitions_assigned", added)
        if self.membership.reconciling:  # not fenced or left meanwhile
            self.membership.reconciled(target)
            self.rebalance_ended()
            self._wake.set()

    def _topic_names(self) -> dict[uuid.UUID, str]:
        return {info.topic_id: name for name, info in self.client.metadata.snapshot.topics.items()}

    async def _refresh_target_metadata(self) -> None:
        """Learn the names of the target assignment's topic ids: from the subscribed
        topics' metadata (their ids come with them), or every topic's when the
        subscription is a regex or an id is still unknown. Asking for every topic on
        each member's first assignment made 200 members joining a broker of 10,000
        partitions take 23 s, and the broker's memory peak at 800 MiB."""
        membership = self.membership
        try:
            if membership.regex is None and membership.topics:
                await self.client.refresh_metadata(membership.topics)
                target = membership.target
                names = self._topic_names()
                if target is None or all(t in names for t in target):
                    return
            await self.client.refresh_metadata(None)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            logger.info("group %s: metadata refresh failed: %s", self.group_id, exc)

    # ---- commits

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """Commit ``offsets`` with this member's epoch (CommitFailedError when stale)."""
        in_group = self.membership.in_group and self.membership.member_epoch > 0
        await commit_offsets(
            self.client,
            self.group_id,
            offsets,
            generation_id=self.membership.member_epoch if in_group else -1,
            member_id=self.member_id if in_group else "",
            group_instance_id=self.instance_id,
            deadline_ms=self.client.clock() + timeout_ms,
            max_version=MEMBER_EPOCH_COMMIT_VERSION,
        )

    async def _start_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Start an auto-commit in the background. A step, not a direct spawn: poll's steps
        run in the caller's thread (the sync consumer's), where no task can be started."""
        self.spawn(partial(self._commit_quietly, offsets))

    async def _commit_quietly(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata] | None = None,
        deadline_ms: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the consumed positions as it starts) by
        ``deadline_ms`` (default: default.api.timeout.ms from now); a failure is logged."""
        if offsets is None:
            offsets = self.consumed_offsets()
        if deadline_ms is None:
            deadline_ms = self.client.clock() + self.config.default_api_timeout_ms
        with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())) as scope:
            try:
                await self.background_commit(offsets, deadline_ms - self.client.clock())
            except KafkaError as exc:
                logger.warning("group %s: commit failed: %s", self.group_id, exc)
        if scope.cancelled_caught:
            logger.warning("group %s: commit not answered in time", self.group_id)

    # ---- close and unsubscribe (steps)

    def leave_steps(self, reason: str, *, commit: bool, deadline_ms: float) -> Iterator[Step]:
        """Commit (auto commit), revoke through the listener and leave the group; the
        requests are given up at ``deadline_ms``, the rest is done anyway."""
        yield from self._callbacks()
        owned = self.subscriptions.assigned()
        if self.membership.in_group:
            if commit and owned:
                yield Call(partial(self._commit_quietly, self.consumed_offsets(), deadline_ms))
            if owned:
                yield from self._listener_call("on_partitions_revoked", owned)
        elif owned:
            yield from self._listener_call("on_partitions_lost", owned)
        yield Call(partial(self.leave_group, reason, deadline_ms))
        yield Call(partial(self._apply, []))

    async def leave_group(self, reason: str, deadline_ms: float = math.inf) -> None:
        """Leave with epoch -1 (-2 for a static member), answered or not; the heartbeat
        saying so is given up at ``deadline_ms``."""
        membership = self.membership
        with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())):
            async with self._sending:
                if not (membership.in_group or membership.state is HeartbeatState.FENCED):
                    return
                membership.start_leaving()
                logger.info("group %s: leaving (%s)", self.group_id, reason)
                try:
                    await self._send_heartbeat(membership.heartbeat_request())
                except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
                    logger.info("group %s: leave heartbeat failed: %s", self.group_id, exc)
                membership.left()
                return
        logger.info("group %s: leave heartbeat not answered in time", self.group_id)
        if membership.state is HeartbeatState.LEAVING:
            membership.left()
        elif membership.in_group or membership.state is HeartbeatState.FENCED:
            membership.start_leaving()  # (the heartbeat in flight took the time)
            membership.left()
