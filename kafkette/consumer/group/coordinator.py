"""The I/O of one consumer's group membership (classic protocol), after Java's ConsumerCoordinator.

:class:`GroupMember` drives a :class:`~kafkette.consumer.group.membership.Membership`
(the protocol's states, requests and answers, without I/O): it sends the
requests that class builds to the group coordinator, feeds it the answers and
the time, and runs the rebalance listener. Its work is split the way Java
splits it between the application thread and the heartbeat thread:

- in the background (:meth:`GroupMember.run`, a task of the consumer's event
  loop): heartbeats every ``heartbeat.interval.ms`` while the member is in a
  generation, the ``max.poll.interval.ms`` check (a member that stopped
  polling leaves its group), and the JoinGroup/SyncGroup exchange itself,
  which can take as long as the group's rebalance;
- in ``poll`` (:meth:`GroupMember.poll_steps`): deciding to rejoin, calling
  the rebalance listener, applying a new assignment, auto commits.

``poll_steps`` is a generator of :class:`Call` (an async operation to run in
the event loop) and :class:`Invoke` (a user callback to run on the caller's
thread or task) steps, so the same logic drives the async consumer (which
awaits calls and listener methods itself) and the sync one (which sends each
call across to its loop thread and runs the listener in the application's
thread, as Java does).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.assignors import Assignor, RebalanceProtocol, Subscription
from kafkette.consumer.group.member_base import Call, Invoke, Job, MemberBase, Step, seconds_until
from kafkette.consumer.group.membership import (
    NO_GENERATION,
    Answer,
    HeartbeatAction,
    JoinReply,
    Membership,
    MemberState,
)
from kafkette.consumer.group.offsets import commit_offsets
from kafkette.consumer.group.rebalance import AssignmentChange, revoked_before_join
from kafkette.consumer.group.timers import MemberTimers
from kafkette.consumer.group.types import ConsumerRebalanceListener
from kafkette.consumer.subscription import SubscriptionState
from kafkette.errors import (
    ApiError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RebalanceInProgressError,
)
from kafkette.protocol.messages import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.protocol.schema import Request, Response
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.consumer.group")

__all__ = ["Call", "GroupMember", "Invoke", "Step"]

METADATA_JOB = "metadata"
COMMIT_JOB = "commit before rebalance"


class _RetryJoin(Exception):
    """The coordinator moved or is loading: back off and join again."""

    def __init__(self, error: KafkaError, *, find_coordinator: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.find_coordinator = find_coordinator


class GroupMember(MemberBase):
    """The member of ``group.id`` one consumer is; create it inside the event loop."""

    def __init__(
        self,
        client: KafkaClient,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        apply_assignment: Callable[[list[TopicPartition]], None],
        *,
        wake_poll: Callable[[], None] = lambda: None,
    ) -> None:
        self.membership = Membership.from_config(config, client.clock())
        self.client = client
        self.config = config
        self.group_id: str = self.membership.group_id
        self.instance_id = config.group_instance_id
        self.subscriptions = subscriptions
        self._apply_assignment = apply_assignment
        self._wake_poll = wake_poll
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener | Any | None = None
        self._group_topic_counts: dict[str, int] = {}
        self._pattern_refreshed_ms = float("-inf")
        self._join_done = anyio.Event()
        self._join_wanted = anyio.Event()
        self._heartbeat_wake = anyio.Event()
        self._pending_callbacks: list[Invoke] = []
        self._task_group: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self._early_tasks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._join_scope: anyio.CancelScope | None = None
        self._jobs: dict[str, Job] = {}
        self._closed = False

    # ---- the membership's facts, as the consumer and the tests read them

    @property
    def state(self) -> MemberState:
        return self.membership.state

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation_id(self) -> int:
        return self.membership.generation_id

    @generation_id.setter
    def generation_id(self, value: int) -> None:
        self.membership.generation_id = value

    @property
    def rejoin_needed(self) -> bool:
        return self.membership.rejoin_needed

    @property
    def timers(self) -> MemberTimers:
        return self.membership.timers

    @property
    def assignors(self) -> list[Assignor]:
        return self.membership.assignors

    @property
    def protocol(self) -> RebalanceProtocol:
        return self.membership.protocol

    # ---- subscription

    def subscribe(
        self, topics: Iterable[str] | None, pattern: re.Pattern[str] | None, listener: Any
    ) -> None:
        """Follow ``topics`` or the topics matching ``pattern``; the member rejoins."""
        self.pattern = pattern
        self.listener = listener
        if pattern is not None:
            self.topics = self._matching(pattern)
            self.client.metadata.request_update()
        else:
            self.topics = set(topics or ())
        self.client.metadata.wanted_topics.update(self.topics)
        self.request_rejoin("the subscription changed")

    @property
    def subscribed(self) -> bool:
        return self.pattern is not None or bool(self.topics)

    def _matching(self, pattern: re.Pattern[str]) -> set[str]:
        topics = self.client.metadata.snapshot.topics
        return {
            name
            for name, info in topics.items()
            if pattern.fullmatch(name)
            and info.error_code == 0
            and not (info.is_internal and self.config.exclude_internal_topics)
        }

    def request_rejoin(self, reason: str) -> None:
        self.membership.request_rejoin(reason)

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self.membership.group_metadata()

    # ---- background

    async def run(self) -> None:
        """Heartbeats and joins, until :meth:`stop`."""
        with self._scope:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_group.start_soon(self._join_loop)
                task_group.start_soon(self._heartbeat_loop)
                for func in self._early_tasks:
                    task_group.start_soon(func)
                self._early_tasks.clear()

    def stop(self) -> None:
        """Cancel :meth:`run` (also when it has not started yet)."""
        self._closed = True
        self._scope.cancel()

    async def _join_loop(self) -> None:
        while True:
            await self._join_wanted.wait()
            self._join_wanted = anyio.Event()
            with anyio.CancelScope() as scope:
                self._join_scope = scope
                try:
                    await self._join_and_sync()
                except Exception as exc:  # handed to poll, which raises it
                    if self.membership.state is MemberState.JOINING:
                        self.membership.join_failed(exc)
                    else:  # the member left meanwhile: nobody waits for this join
                        logger.debug("group %s: join failed after leaving: %s", self.group_id, exc)
            self._join_scope = None
            self._join_done.set()

    async def _heartbeat_loop(self) -> None:
        membership = self.membership
        while True:
            now = self.client.clock()
            plan = membership.next_heartbeat(now, self.config.heartbeat_interval_ms)
            if plan.action is HeartbeatAction.LEAVE:
                logger.warning(
                    "group %s: poll was not called within max.poll.interval.ms (%d ms); "
                    "leaving the group",
                    self.group_id,
                    self.config.max_poll_interval_ms,
                )
                await self.leave_group("consumer poll timeout has expired")
                continue
            if plan.action is HeartbeatAction.SEND:
                await self._heartbeat(now)
                continue
            with anyio.move_on_after(plan.wait_ms / 1000):
                await self._heartbeat_wake.wait()
            self._heartbeat_wake = anyio.Event()

    def _wake_heartbeats(self) -> None:
        self._heartbeat_wake.set()

    async def _heartbeat(self, now: float) -> None:
        membership = self.membership
        membership.timers.heartbeat_sent(now)
        generation = membership.generation_id
        try:
            response = await self._send(
                partial(membership.heartbeat_request, generation=generation)
            )
        except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
            logger.info("group %s: heartbeat failed: %s", self.group_id, exc)
            membership.timers.heartbeat_failed(self.client.clock(), self.config.retry_backoff_ms)
            return
        assert isinstance(response, HeartbeatResponse)
        answer = membership.on_heartbeat(
            response.error_code, generation, self.client.clock(), self.config.retry_backoff_ms
        )
        if answer is Answer.FIND_COORDINATOR:
            self.client.invalidate_coordinator(self.group_id)

    # ---- requests

    async def _send(self, build: Callable[[int], Request]) -> Response:
        """Send the request ``build(version)`` to the coordinator (found if unknown)."""
        node = await self.client.coordinator(self.group_id)
        connection = await self.client.coordinator_connection(node)
        probe = build(0)
        version = connection.version_for(type(probe))
        return await self.client.send_to_coordinator(self.group_id, build(version), version=version)

    # ---- join and sync (background)

    def _subscription(self) -> Subscription:
        topics = tuple(sorted(self.topics))
        return Subscription(
            topics=topics,
            owned_partitions=tuple(sorted(self.subscriptions.assigned())),
            generation_id=self.membership.generation_id,
            rack_id=self.config.client_rack or None,
        )

    async def _join_and_sync(self) -> None:
        attempt = 0
        while True:
            try:
                if await self._join_once():
                    return
                attempt = 0
                continue
            except _RetryJoin as retry:
                if retry.find_coordinator:
                    self.client.invalidate_coordinator(self.group_id)
                error: Exception = retry.error
            except (NotCoordinatorError, CoordinatorNotAvailableError) as exc:
                self.client.invalidate_coordinator(self.group_id)
                error = exc
            except (
                KafkaConnectionError,
                KafkaTimeoutError,
                CoordinatorLoadInProgressError,
            ) as exc:
                error = exc
            logger.info("group %s: join failed: %s; retrying", self.group_id, error)
            wait = backoff_ms(
                attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
            )
            attempt += 1
            await anyio.sleep(wait / 1000)

    async def _join_once(self) -> bool:
        """One JoinGroup (and SyncGroup); True when the member got its assignment."""
        membership = self.membership
        protocols = membership.join_protocols(self._subscription())
        response = await self._send(partial(membership.join_request, protocols=protocols))
        assert isinstance(response, JoinGroupResponse)
        if not self._joined_or_retry(membership.on_join_group(response)):
            return False
        generation = response.generation_id
        assignments: list[SyncGroupRequestAssignment] = []
        if membership.must_assign(response):
            assignments = await self._assign(response)
        sync = await self._send(
            partial(membership.sync_request, generation=generation, assignments=assignments)
        )
        assert isinstance(sync, SyncGroupResponse)
        if not self._joined_or_retry(
            membership.on_sync_group(sync, generation, self.client.clock())
        ):
            return False
        self.rebalance_ended()
        self._wake_heartbeats()
        return True

    @staticmethod
    def _joined_or_retry(reply: JoinReply) -> bool:
        """True for OK, False to join again at once; raises to back off or to fail."""
        answer = reply.answer
        if answer is Answer.OK:
            return True
        assert reply.error is not None
        if answer in (Answer.FIND_COORDINATOR, Answer.BACKOFF):
            raise _RetryJoin(reply.error, find_coordinator=answer is Answer.FIND_COORDINATOR)
        if answer is Answer.FAILED:
            raise reply.error
        return False

    async def _assign(self, response: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        """The leader's part: metadata for every member's topics, then the assignor.

        As Java's leader, it assigns from the metadata it has when that knows every
        topic (a later change of partition counts makes the group rejoin, see
        :meth:`_check_metadata`), and asks the cluster only for topics it lacks: a
        refresh would wait behind this consumer's long-poll fetch on the connection.
        """
        membership = self.membership
        membership.chosen_assignor(response.protocol_name)  # before any I/O
        subscriptions = membership.member_subscriptions(response)
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        self.client.metadata.wanted_topics.update(topics)  # the leader watches them all
        snapshot = self.client.metadata.snapshot
        if not all(snapshot.partition_count(t) for t in topics):
            snapshot = await self.client.refresh_metadata(
                topics, allow_auto_topic_creation=self.config.allow_auto_create_topics
            )
        counts = {t: n for t in topics if (n := snapshot.partition_count(t))}
        self._group_topic_counts = counts
        return membership.leader_assignments(response.protocol_name, subscriptions, counts)

    # ---- leave

    async def leave_group(self, reason: str, deadline_ms: float = math.inf) -> None:
        """Leave (LeaveGroup for a dynamic member, given up at ``deadline_ms``) and forget
        the generation; rejoin on poll."""
        membership = self.membership
        if self._join_scope is not None:
            # Leaving mid-join (unsubscribe, close): that join must not complete. Its
            # JoinGroup is parked at the coordinator until the rebalance ends (a dead
            # member can hold it for its whole session), and a broker answers a
            # connection's requests in order: a LeaveGroup behind it would wait as long.
            # Drop that connection; the LeaveGroup goes on a new one.
            self._join_scope.cancel()
            self.client.invalidate_coordinator(self.group_id)
        if membership.should_send_leave():
            member_id = membership.member_id
            with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())) as scope:
                try:
                    await self._send(
                        partial(membership.leave_request, member_id=member_id, reason=reason)
                    )
                except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
                    logger.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
            if scope.cancelled_caught:
                logger.info("group %s: LeaveGroup not answered in time", self.group_id)
        membership.left(reason)

    # ---- poll (steps)

    def poll_steps(self, deadline_ms: float) -> Iterator[Step]:
        """What ``poll`` does for the group before it returns records.

        Nothing here waits past ``deadline_ms``: work that takes longer (a metadata
        refresh, the commit before a rebalance, the join itself) goes on in the
        background, and the next poll takes it up where this one left it.
        """
        membership = self.membership
        membership.timers.polled(self.client.clock())
        yield from self._callbacks()
        if membership.fatal_error is not None:
            raise membership.fatal_error
        if not self.subscribed:
            return
        self._check_metadata()
        now = self.client.clock()
        if METADATA_JOB in self._jobs or self._metadata_due(now):
            # A pattern is matched against fresh metadata before joining, as Java's
            # ensureFreshMetadata; named topics do not wait for the refresh.
            pattern = self.pattern is not None
            yield self.job(METADATA_JOB, self._refresh_metadata, deadline_ms if pattern else now)
            if not self.job_ended(METADATA_JOB) and pattern:
                return
            self._check_metadata()
        if membership.state is MemberState.STABLE and not membership.rejoin_needed:
            if self.config.enable_auto_commit:
                now = self.client.clock()
                if membership.timers.auto_commit_due(now):
                    membership.timers.auto_commit_started(now)
                    yield Call(self._start_auto_commit)
            return
        if membership.wants_join:
            if not membership.revoked_for_join:
                if not (yield from self._prepare_steps(deadline_ms)):
                    return  # the commit before the rebalance goes on; the next poll waits again
                membership.revoked_for_join = True
            membership.start_join()
            self.rebalance_started()
            yield Call(self._request_join)
        if membership.state is MemberState.JOINING:
            yield Call(partial(self._await_join, deadline_ms))
        if membership.state not in (MemberState.ASSIGNED, MemberState.JOIN_FAILED):
            return
        error = membership.take_join_result()
        if error is not None:
            raise error
        yield from self._complete_steps()

    async def _request_join(self) -> None:
        self._join_done = anyio.Event()
        self._join_wanted.set()

    async def _await_join(self, deadline_ms: float) -> None:
        with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())):
            await self._join_done.wait()

    def _prepare_steps(self, deadline_ms: float) -> Generator[Step, None, bool]:
        """Give up what the join needs (Java's onJoinPrepare); False while the commit
        before it is still under way at ``deadline_ms``."""
        owned = self.subscriptions.assigned()
        if not owned:
            return True
        if self.generation_id == NO_GENERATION:
            yield from self._listener_call("on_partitions_lost", owned)
            yield Call(partial(self._apply, []))
            return True
        revoked = revoked_before_join(self.protocol, owned, self.topics)
        if self.config.enable_auto_commit:
            # Records of the partitions that go are no longer handed out: the commit
            # holds the positions they have now (Java's pending revocation).
            self.subscriptions.mark_revoking(revoked)
            yield self.job(COMMIT_JOB, self._commit_quietly, deadline_ms)
            if not self.job_ended(COMMIT_JOB):
                return False
        if revoked:
            yield from self._listener_call("on_partitions_revoked", revoked)
            yield Call(partial(self._apply, sorted(owned - revoked)))
        return True

    def _complete_steps(self) -> Iterator[Step]:
        assignment = self.membership.assignment
        change = AssignmentChange.between(self.subscriptions.assigned(), assignment)
        if self.protocol is RebalanceProtocol.COOPERATIVE and change.revoked:
            yield from self._listener_call("on_partitions_revoked", set(change.revoked))
            self.request_rejoin("partitions were revoked (cooperative protocol)")
        # New partitions start at the group's committed offsets, which the fetcher reads.
        yield Call(partial(self._apply, list(assignment)))
        yield from self._listener_call("on_partitions_assigned", set(change.added))

    # ---- metadata

    def _metadata_due(self, now: float) -> bool:
        # A pattern needs every topic's name: the fetcher's refreshes of the assigned
        # topics keep the cache fresh but would never show a new matching topic.
        if self.pattern is not None:
            return now - self._pattern_refreshed_ms >= self.config.metadata_max_age_ms
        return self.client.metadata.needs_update(now)

    async def _refresh_metadata(self) -> None:
        try:
            if self.pattern is not None:
                self._pattern_refreshed_ms = self.client.clock()
                await self.client.refresh_metadata(None)
            else:
                wanted = self.topics | set(self._group_topic_counts)
                self.client.metadata.wanted_topics.update(wanted)
                await self.client.refresh_metadata(
                    self.client.metadata.wanted_topics,
                    allow_auto_topic_creation=self.config.allow_auto_create_topics,
                )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            logger.info("group %s: metadata refresh failed: %s", self.group_id, exc)

    def _check_metadata(self) -> None:
        snapshot = self.client.metadata.snapshot
        if self.pattern is not None:
            matched = self._matching(self.pattern)
            if matched != self.topics:
                self.topics = matched
                self.client.metadata.wanted_topics.update(matched)
                self.request_rejoin("the topics matching the pattern changed")
        if self.membership.is_leader:
            for topic, count in self._group_topic_counts.items():
                now = snapshot.partition_count(topic)
                if now is not None and now != count:
                    self._group_topic_counts = {}
                    self.request_rejoin(f"topic {topic} now has {now} partitions")
                    break

    # ---- commits

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """Commit ``offsets`` with this member's generation (CommitFailedError when stale)."""
        generation = self.membership.commit_generation(self.subscribed)
        try:
            await commit_offsets(
                self.client,
                self.group_id,
                offsets,
                generation_id=generation,
                member_id=self.member_id if generation != NO_GENERATION else "",
                group_instance_id=self.instance_id,
                deadline_ms=self.client.clock() + timeout_ms,
            )
        except KafkaError as exc:
            if isinstance(exc.__cause__, RebalanceInProgressError):
                self.request_rejoin("a commit found the group rebalancing")
            raise

    async def _commit_quietly(self, deadline_ms: float | None = None) -> None:
        """Commit the consumed positions by ``deadline_ms`` (default: default.api.timeout.ms
        from now); a failure is logged."""
        if deadline_ms is None:
            deadline_ms = self.client.clock() + self.config.default_api_timeout_ms
        with anyio.move_on_after(seconds_until(deadline_ms, self.client.clock())) as scope:
            try:
                offsets, left_ms = self.consumed_offsets(), deadline_ms - self.client.clock()
                await self.background_commit(offsets, left_ms)
            except KafkaError as exc:
                logger.warning("group %s: commit of the positions failed: %s", self.group_id, exc)
        if scope.cancelled_caught:
            logger.warning("group %s: commit of the positions not answered in time", self.group_id)

    async def _start_auto_commit(self) -> None:
        offsets = self.consumed_offsets()
        if offsets:
            self.spawn(partial(self._auto_commit, offsets))

    async def _auto_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.background_commit(offsets, self.config.default_api_timeout_ms)
        except KafkaError as exc:
            logger.warning("group %s: auto commit failed: %s", self.group_id, exc)

    # ---- close and unsubscribe (steps)

    def leave_steps(self, reason: str, *, commit: bool, deadline_ms: float) -> Iterator[Step]:
        """Commit (auto commit), revoke through the listener and leave the group; the
        requests are given up at ``deadline_ms``, the rest is done anyway."""
        yield from self._callbacks()
        owned = self.subscriptions.assigned()
        if self.generation_id != NO_GENERATION:
            if commit and owned:
                yield Call(partial(self._commit_quietly, deadline_ms))
            if owned:
                yield from self._listener_call("on_partitions_revoked", owned)
        elif owned:
            yield from self._listener_call("on_partitions_lost", owned)
        yield Call(partial(self.leave_group, reason, deadline_ms))
        yield Call(partial(self._apply, []))
