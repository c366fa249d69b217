"""One consumer's membership in its group (the classic protocol), after Java's ConsumerCoordinator.

:class:`GroupMember` owns the member's identity (member id, generation),
the subscription, the join/sync exchange, heartbeats, commits and leaving.
Its work is split the way Java splits it between the application thread and
the heartbeat thread:

- in the background (:meth:`GroupMember.run`, a task of the consumer's event
  loop): heartbeats every ``heartbeat.interval.ms`` while the member is
  stable, the ``max.poll.interval.ms`` check (a member that stopped polling
  leaves its group), and the JoinGroup/SyncGroup exchange itself, which can
  take as long as the group's rebalance;
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
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc
import attrs

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.assignors import (
    Assignment,
    Assignor,
    RebalanceProtocol,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    resolve_assignors,
)
from kafkette.consumer.group.offsets import commit_offsets, fetch_committed
from kafkette.consumer.group.rebalance import (
    AssignmentChange,
    rebalance_protocol,
    revoked_before_join,
)
from kafkette.consumer.group.timers import MemberTimers
from kafkette.consumer.group.types import (
    CommitFailedError,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)
from kafkette.consumer.subscription import SubscriptionState
from kafkette.errors import (
    ApiError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    make_error,
)
from kafkette.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.leave_group_request import MemberIdentity
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.protocol.schema import Request, Response
from kafkette.structs import TopicPartition

logger = logging.getLogger("kafkette.consumer.group")

PROTOCOL_TYPE = "consumer"
NO_GENERATION = -1

UNJOINED = "unjoined"
JOINING = "joining"
STABLE = "stable"


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


class GroupMember:
    """The member of ``group.id`` one consumer is; create it inside the event loop."""

    def __init__(
        self,
        client: KafkaClient,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        apply_assignment: Callable[[list[TopicPartition]], None],
    ) -> None:
        if config.group_id is None:
            raise IllegalStateError("subscribing needs a group.id")
        self.client = client
        self.config = config
        self.group_id: str = config.group_id
        self.instance_id = config.group_instance_id
        self.subscriptions = subscriptions
        self._apply_assignment = apply_assignment
        self.assignors: list[Assignor] = resolve_assignors(config.partition_assignment_strategy)
        self.protocol = rebalance_protocol(self.assignors)
        now = client.clock()
        self.timers = MemberTimers(
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            session_timeout_ms=config.session_timeout_ms,
            max_poll_interval_ms=config.max_poll_interval_ms,
            auto_commit_interval_ms=config.auto_commit_interval_ms,
            now_ms=now,
        )
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener | Any | None = None
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = UNJOINED
        self.rejoin_needed = True
        self.rejoin_reason = "joining the group"
        self._prepared = False
        self._join_requested = False
        self._assignment: tuple[TopicPartition, ...] = ()
        self._group_topic_counts: dict[str, int] = {}
        self._pattern_refreshed_ms = float("-inf")
        self._join_done = anyio.Event()
        self._join_wanted = anyio.Event()
        self._join_error: BaseException | None = None
        self._join_finished = False
        self._heartbeat_wake = anyio.Event()
        self._fatal: KafkaError | None = None
        self._pending_callbacks: list[Invoke] = []
        self._task_group: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self._early_tasks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._join_scope: anyio.CancelScope | None = None
        self._closed = False

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
        if not self.rejoin_needed:
            logger.info("group %s: rejoining: %s", self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            self.group_id, self.generation_id, self.member_id, self.instance_id
        )

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

    def spawn(self, func: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``func`` in the member's task group (async commits), once :meth:`run` runs."""
        if self._task_group is None:
            self._early_tasks.append(func)
        else:
            self._task_group.start_soon(func)

    async def _join_loop(self) -> None:
        while True:
            await self._join_wanted.wait()
            self._join_wanted = anyio.Event()
            with anyio.CancelScope() as scope:
                self._join_scope = scope
                try:
                    await self._join_and_sync()
                except Exception as exc:  # handed to poll, which raises it
                    self._join_error = exc
            self._join_scope = None
            self._join_finished = True
            self._join_done.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            now = self.client.clock()
            wait_ms: float = self.config.heartbeat_interval_ms
            if self.state == STABLE and self.generation_id != NO_GENERATION:
                if self.timers.poll_timeout_expired(now):
                    logger.warning(
                        "group %s: poll was not called within max.poll.interval.ms (%d ms); "
                        "leaving the group",
                        self.group_id,
                        self.config.max_poll_interval_ms,
                    )
                    await self.leave_group("consumer poll timeout has expired")
                    continue
                due = self.timers.heartbeat_due_in(now)
                if due <= 0:
                    await self._heartbeat(now)
                    continue
                wait_ms = min(due, self.timers.poll_timeout_in(now) + 1)
            with anyio.move_on_after(wait_ms / 1000):
                await self._heartbeat_wake.wait()
            self._heartbeat_wake = anyio.Event()

    def _wake_heartbeats(self) -> None:
        self._heartbeat_wake.set()

    async def _heartbeat(self, now: float) -> None:
        self.timers.heartbeat_sent(now)
        generation = self.generation_id
        try:
            response = await self._send(
                lambda version: HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=self.member_id,
                    group_instance_id=self.instance_id if version >= 3 else None,
                )
            )
        except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
            logger.info("group %s: heartbeat failed: %s", self.group_id, exc)
            self.timers.heartbeat_failed(self.client.clock(), self.config.retry_backoff_ms)
            return
        assert isinstance(response, HeartbeatResponse)
        if generation != self.generation_id or self.state != STABLE:
            return  # a rebalance started meanwhile; this answer is about the old generation
        code = response.error_code
        now = self.client.clock()
        if code == 0:
            self.timers.heartbeat_ok(now)
            return
        error = make_error(code, "Heartbeat")
        if isinstance(error, RebalanceInProgressError):
            self.timers.heartbeat_ok(now)
            self.request_rejoin("the group is rebalancing")
        elif isinstance(error, (UnknownMemberIdError, IllegalGenerationError)):
            self._reset_generation(reset_member_id=isinstance(error, UnknownMemberIdError))
            self.request_rejoin(f"heartbeat answered {error.name}")
        elif isinstance(error, FencedInstanceIdError):
            self._fatal = error
        elif isinstance(error, (NotCoordinatorError, CoordinatorNotAvailableError)):
            self.client.invalidate_coordinator(self.group_id)
            self.timers.heartbeat_failed(now, self.config.retry_backoff_ms)
        else:
            logger.warning("group %s: heartbeat answered %s", self.group_id, error)
            self.timers.heartbeat_failed(now, self.config.retry_backoff_ms)

    # ---- requests

    async def _send(self, build: Callable[[int], Request]) -> Response:
        """Send the request ``build(version)`` to the coordinator (found if unknown)."""
        node = await self.client.coordinator(self.group_id)
        connection = await self.client.coordinator_connection(node)
        probe = build(0)
        version = connection.version_for(type(probe))
        return await self.client.send_to_coordinator(self.group_id, build(version), version=version)

    def _reset_generation(self, *, reset_member_id: bool) -> None:
        self.generation_id = NO_GENERATION
        if reset_member_id:
            self.member_id = ""
        if self.state == STABLE:
            self.state = UNJOINED

    # ---- join and sync (background)

    def _subscription(self) -> Subscription:
        topics = tuple(sorted(self.topics))
        return Subscription(
            topics=topics,
            owned_partitions=tuple(sorted(self.subscriptions.assigned())),
            generation_id=self.generation_id,
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
            except (NotCoordinatorError, CoordinatorNotAvailableError) as exc:
                self.client.invalidate_coordinator(self.group_id)
                error: Exception = exc
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
        base = self._subscription()
        protocols = [
            JoinGroupRequestProtocol(
                name=assignor.name,
                metadata=encode_subscription(
                    attrs.evolve(base, user_data=assignor.user_data(base.topics))
                ),
            )
            for assignor in self.assignors
        ]

        def join_request(version: int) -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.max_poll_interval_ms if version >= 1 else -1,
                member_id=self.member_id,
                group_instance_id=self.instance_id if version >= 5 else None,
                protocol_type=PROTOCOL_TYPE,
                protocols=protocols,
                reason=self.rejoin_reason if version >= 8 else None,
            )

        response = await self._send(join_request)
        assert isinstance(response, JoinGroupResponse)
        if response.error_code != 0:
            error = make_error(response.error_code, f"JoinGroup of group {self.group_id}")
            if isinstance(error, MemberIdRequiredError):
                self.member_id = response.member_id
                return False
            if isinstance(error, (UnknownMemberIdError, IllegalGenerationError)):
                self._reset_generation(reset_member_id=True)
                return False
            if isinstance(error, RebalanceInProgressError):
                return False
            raise error
        self.member_id = response.member_id
        generation = response.generation_id
        self.protocol_name = response.protocol_name
        self.leader_id = response.leader
        assignments: list[SyncGroupRequestAssignment] = []
        if response.leader == response.member_id and not response.skip_assignment:
            assignments = await self._assign(response)

        def sync_request(version: int) -> SyncGroupRequest:
            return SyncGroupRequest(
                group_id=self.group_id,
                generation_id=generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id if version >= 3 else None,
                protocol_type=PROTOCOL_TYPE if version >= 5 else None,
                protocol_name=self.protocol_name if version >= 5 else None,
                assignments=assignments,
            )

        sync = await self._send(sync_request)
        assert isinstance(sync, SyncGroupResponse)
        if sync.error_code != 0:
            error = make_error(sync.error_code, f"SyncGroup of group {self.group_id}")
            if isinstance(error, (UnknownMemberIdError, IllegalGenerationError)):
                self._reset_generation(reset_member_id=isinstance(error, UnknownMemberIdError))
                return False
            if isinstance(error, RebalanceInProgressError):
                return False
            raise error
        assignment = decode_assignment(sync.assignment)
        self.generation_id = generation
        self._assignment = assignment.partitions
        assignor = self._assignor(self.protocol_name)
        if assignor is not None:
            assignor.on_assignment(assignment, generation)
        self.timers.reset_heartbeats(self.client.clock())
        self.state = STABLE
        self._wake_heartbeats()
        logger.info(
            "group %s: joined generation %d as %s: %s",
            self.group_id,
            generation,
            self.member_id,
            sorted(assignment.partitions),
        )
        return True

    def _assignor(self, name: str | None) -> Assignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    async def _assign(self, response: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        """The leader's part: run the chosen assignor over every member's subscription."""
        assignor = self._assignor(response.protocol_name)
        if assignor is None:
            raise IllegalStateError(
                f"the group chose assignor {response.protocol_name!r}, which is not configured"
            )
        subscriptions = {
            m.member_id: decode_subscription(m.metadata, m.group_instance_id)
            for m in response.members
        }
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        snapshot = await self.client.refresh_metadata(
            topics, allow_auto_topic_creation=self.config.allow_auto_create_topics
        )
        counts = {t: n for t in topics if (n := snapshot.partition_count(t))}
        self._group_topic_counts = counts
        result: Mapping[str, Assignment] = assignor.assign(counts, subscriptions)
        return [
            SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(a))
            for member, a in sorted(result.items())
        ]

    # ---- leave

    async def leave_group(self, reason: str) -> None:
        """Leave (LeaveGroup for a dynamic member) and forget the generation; rejoin on poll."""
        member_id = self.member_id
        joined = self.generation_id != NO_GENERATION or self.state == JOINING
        if self.instance_id is None and member_id and joined:

            def leave_request(version: int) -> LeaveGroupRequest:
                if version >= 3:
                    return LeaveGroupRequest(
                        group_id=self.group_id,
                        members=[
                            MemberIdentity(
                                member_id=member_id,
                                group_instance_id=None,
                                reason=reason if version >= 5 else None,
                            )
                        ],
                    )
                return LeaveGroupRequest(group_id=self.group_id, member_id=member_id)

            try:
                await self._send(leave_request)
            except (KafkaConnectionError, KafkaTimeoutError, ApiError) as exc:
                logger.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self._reset_generation(reset_member_id=True)
        if self._join_scope is not None:
            # Leaving mid-join (unsubscribe, close): that join must not complete.
            self._join_scope.cancel()
            self._join_requested = False
        self.state = UNJOINED
        self.request_rejoin(reason)

    # ---- poll (steps)

    def poll_steps(self, deadline_ms: float) -> Iterator[Step]:
        """What ``poll`` does for the group before it returns records."""
        self.timers.polled(self.client.clock())
        yield from self._callbacks()
        if self._fatal is not None:
            raise self._fatal
        if not self.subscribed:
            return
        self._check_metadata()
        if self._metadata_due(self.client.clock()):
            yield Call(self._refresh_metadata)
            self._check_metadata()
        if self.state == STABLE and not self.rejoin_needed and not self._join_requested:
            if self.config.enable_auto_commit:
                now = self.client.clock()
                if self.timers.auto_commit_due(now):
                    self.timers.auto_commit_started(now)
                    yield Call(self._start_auto_commit)
            return
        if not self._join_requested:
            if not self._prepared:
                yield from self._prepare_steps()
                self._prepared = True
            self._join_requested = True
            self.state = JOINING
            self.rejoin_needed = False
            self._join_finished = False
            yield Call(self._request_join)
        if not self._join_finished:
            yield Call(partial(self._await_join, deadline_ms))
            if not self._join_finished:
                return
        self._prepared = False
        self._join_requested = False
        error, self._join_error = self._join_error, None
        if error is not None:
            self.state = UNJOINED
            self.request_rejoin("the last join failed")
            if isinstance(error, FencedInstanceIdError):
                self._fatal = error
            raise error
        yield from self._complete_steps()

    async def _request_join(self) -> None:
        self._join_done = anyio.Event()
        self._join_wanted.set()

    async def _await_join(self, deadline_ms: float) -> None:
        left = deadline_ms - self.client.clock()
        with anyio.move_on_after(max(left, 0) / 1000):
            await self._join_done.wait()

    def _prepare_steps(self) -> Iterator[Step]:
        owned = self.subscriptions.assigned()
        if not owned:
            return
        if self.generation_id == NO_GENERATION:
            yield from self._listener_call("on_partitions_lost", owned)
            yield Call(partial(self._apply, []))
            return
        if self.config.enable_auto_commit:
            yield Call(self._commit_quietly)
        revoked = revoked_before_join(self.protocol, owned, self.topics)
        if revoked:
            yield from self._listener_call("on_partitions_revoked", revoked)
            yield Call(partial(self._apply, sorted(owned - revoked)))

    def _complete_steps(self) -> Iterator[Step]:
        change = AssignmentChange.between(self.subscriptions.assigned(), self._assignment)
        if self.protocol is RebalanceProtocol.COOPERATIVE and change.revoked:
            yield from self._listener_call("on_partitions_revoked", set(change.revoked))
            self.request_rejoin("partitions were revoked (cooperative protocol)")
        new = list(self._assignment)
        yield Call(partial(self._apply_with_positions, new, sorted(change.added)))
        yield from self._listener_call("on_partitions_assigned", set(change.added))

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

    async def _apply_with_positions(
        self, partitions: list[TopicPartition], added: list[TopicPartition]
    ) -> None:
        # Committed offsets first: once assigned, the fetcher would reset positions itself.
        committed = await fetch_committed(
            self.client,
            self.group_id,
            added,
            deadline_ms=self.client.clock() + self.config.default_api_timeout_ms,
        )
        self._apply_assignment(partitions)
        for tp, found in committed.items():
            state = self.subscriptions.get(tp)
            if found is not None and state is not None and state.position is None:
                state.position = found.offset

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
        if self.leader_id is not None and self.leader_id == self.member_id:
            for topic, count in self._group_topic_counts.items():
                now = snapshot.partition_count(topic)
                if now is not None and now != count:
                    self._group_topic_counts = {}
                    self.request_rejoin(f"topic {topic} now has {now} partitions")
                    break

    # ---- commits

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions of the assigned partitions, as offsets to commit."""
        result = {}
        for tp in self.subscriptions.assigned():
            state = self.subscriptions.get(tp)
            if state is not None and state.position is not None:
                result[tp] = OffsetAndMetadata(state.position)
        return result

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """Commit ``offsets`` with this member's generation (CommitFailedError when stale)."""
        generation = NO_GENERATION
        if self.subscribed:
            # As Java: the group's partitions are committed only within a stable generation.
            if self.state != STABLE or self.generation_id == NO_GENERATION:
                if self.state == JOINING:
                    raise RebalanceInProgressError("the consumer is rejoining its group")
                raise CommitFailedError("the consumer is not part of an active group generation")
            generation = self.generation_id
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

    async def _commit_quietly(self) -> None:
        try:
            await self.commit(self.consumed_offsets(), self.config.default_api_timeout_ms)
        except KafkaError as exc:
            logger.warning("group %s: commit before rebalance failed: %s", self.group_id, exc)

    async def _start_auto_commit(self) -> None:
        offsets = self.consumed_offsets()
        if offsets:
            self.spawn(partial(self._auto_commit, offsets))

    async def _auto_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.commit(offsets, self.config.default_api_timeout_ms)
        except KafkaError as exc:
            logger.warning("group %s: auto commit failed: %s", self.group_id, exc)

    def commit_in_background(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], Any] | None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs from a later poll."""

        async def commit() -> None:
            error: Exception | None = None
            try:
                await self.commit(offsets, self.config.default_api_timeout_ms)
            except KafkaError as exc:
                error = exc
                logger.info("group %s: async commit failed: %s", self.group_id, exc)
            if callback is not None:
                self._pending_callbacks.append(Invoke(callback, (offsets, error)))

        self.spawn(commit)

    # ---- close and unsubscribe (steps)

    def leave_steps(self, reason: str, *, commit: bool) -> Iterator[Step]:
        """Commit (auto commit), revoke through the listener and leave the group."""
        yield from self._callbacks()
        owned = self.subscriptions.assigned()
        if self.generation_id != NO_GENERATION:
            if commit and owned:
                yield Call(self._commit_quietly)
            if owned:
                yield from self._listener_call("on_partitions_revoked", owned)
        elif owned:
            yield from self._listener_call("on_partitions_lost", owned)
        yield Call(partial(self.leave_group, reason))
        yield Call(partial(self._apply, []))
