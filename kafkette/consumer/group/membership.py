"""One member's side of the classic group protocol, without I/O.

Theory of operation. A consumer in a group is, at any time, in one of the
states of :class:`MemberState`; what moves it is an :class:`MemberEvent`, and
:data:`TRANSITIONS` says, for each (state, event) pair, the next state. A pair
missing from the table is refused (:class:`~kafkette.errors.IllegalStateError`)
and the state stays as it was::

    UNJOINED --JOIN_REQUESTED--> JOINING --SYNCED--> ASSIGNED --ASSIGNMENT_TAKEN--> STABLE
    STABLE --JOIN_REQUESTED--> JOINING               (a rebalance: join again)
    JOINING --JOIN_FAILED--> JOIN_FAILED --FAILURE_TAKEN--> UNJOINED
    STABLE --GENERATION_LOST--> UNJOINED             (fenced by the coordinator)
    any state --LEFT--> UNJOINED                     (LeaveGroup, unsubscribe, close)

The work is split between two callers, as in Java's ConsumerCoordinator: the
application's ``poll`` asks for a join (JOIN_REQUESTED) and later takes its
result (ASSIGNMENT_TAKEN or FAILURE_TAKEN), calling the rebalance listener
around both; the runner's background task sends JoinGroup and SyncGroup and
feeds the answers here (:meth:`Membership.on_join_group`,
:meth:`Membership.on_sync_group`), which end the join (SYNCED) or fail it
(JOIN_FAILED). ASSIGNED is the time between the two: the member already
belongs to the new generation (it heartbeats and may commit) but ``poll`` has
not applied the assignment yet.

Losing the generation (UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION) while joining
or assigned does not change the state: a join under way retries with what it
has left, and an assignment not yet taken is still handed to ``poll``, which
then finds no generation and joins again (its partitions reported lost).

Beside the state, a few facts that are not states: whether a rejoin is needed
(and why), the member id and generation, the chosen assignor, the leader,
the deadlines of :class:`~kafkette.consumer.group.timers.MemberTimers`, and a
fatal error (FENCED_INSTANCE_ID: another process took this static member's
place), which ``poll`` raises every time without stopping the member's other
work, as Java does.

Every answer's error code is read through one table, :data:`ANSWERS`, of
(API, error code) -> :class:`Answer`; what a code means differs by API only
where the table says so.

No I/O here: :mod:`kafkette.consumer.group.coordinator` sends the requests this
class builds, feeds it the answers and the time, and runs the listener.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence

import attrs

from kafkette.client.config import ConsumerConfig
from kafkette.consumer.assignors import (
    Assignment,
    Assignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    resolve_assignors,
)
from kafkette.consumer.group.rebalance import rebalance_protocol
from kafkette.consumer.group.timers import MemberTimers
from kafkette.errors import (
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    IllegalStateError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    make_error,
)
from kafkette.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.leave_group_request import MemberIdentity
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.structs import ConsumerGroupMetadata, TopicPartition

logger = logging.getLogger("kafkette.consumer.group")

PROTOCOL_TYPE = "consumer"
NO_GENERATION = -1


class MemberState(enum.Enum):
    """Where one member stands in its group (classic protocol)."""

    UNJOINED = "UNJOINED"
    """In no generation, and no join under way."""
    JOINING = "JOINING"
    """``poll`` asked for a join: JoinGroup and SyncGroup are under way."""
    ASSIGNED = "ASSIGNED"
    """SyncGroup gave an assignment; ``poll`` has not applied it yet."""
    JOIN_FAILED = "JOIN_FAILED"
    """The join failed; ``poll`` has not raised the error yet."""
    STABLE = "STABLE"
    """In a generation, with its assignment applied."""


class MemberEvent(enum.Enum):
    """What happens to a member; :data:`TRANSITIONS` says where each one leads."""

    JOIN_REQUESTED = "JOIN_REQUESTED"
    SYNCED = "SYNCED"
    JOIN_FAILED = "JOIN_FAILED"
    ASSIGNMENT_TAKEN = "ASSIGNMENT_TAKEN"
    FAILURE_TAKEN = "FAILURE_TAKEN"
    GENERATION_LOST = "GENERATION_LOST"
    LEFT = "LEFT"


S = MemberState
E = MemberEvent

TRANSITIONS: Mapping[tuple[MemberState, MemberEvent], MemberState] = {
    (S.UNJOINED, E.JOIN_REQUESTED): S.JOINING,
    (S.STABLE, E.JOIN_REQUESTED): S.JOINING,
    (S.JOINING, E.SYNCED): S.ASSIGNED,
    (S.JOINING, E.JOIN_FAILED): S.JOIN_FAILED,
    (S.ASSIGNED, E.ASSIGNMENT_TAKEN): S.STABLE,
    (S.JOIN_FAILED, E.FAILURE_TAKEN): S.UNJOINED,
    (S.JOINING, E.GENERATION_LOST): S.JOINING,
    (S.ASSIGNED, E.GENERATION_LOST): S.ASSIGNED,
    (S.STABLE, E.GENERATION_LOST): S.UNJOINED,
    **{(state, E.LEFT): S.UNJOINED for state in MemberState},
}
"""(state, event) -> next state; a pair not listed is refused."""

IN_GENERATION = frozenset({S.ASSIGNED, S.STABLE})
"""States in which the member belongs to a generation (heartbeats, commits)."""
JOIN_UNDER_WAY = frozenset({S.JOINING, S.JOIN_FAILED})
"""States Java calls rebalancing: a commit is told REBALANCE_IN_PROGRESS."""


class GroupApi(enum.Enum):
    """The membership requests whose answers :data:`ANSWERS` reads."""

    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"


class Answer(enum.Enum):
    """What an answer's error code means for the member."""

    OK = "ok"
    TAKE_MEMBER_ID = "take_member_id"
    """MEMBER_ID_REQUIRED: join again at once with the member id it came with."""
    REJOIN = "rejoin"
    """The group is rebalancing: join again (at once when joining)."""
    LOSE_GENERATION = "lose_generation"
    """The generation is over: forget it and join again."""
    LOSE_MEMBER_ID = "lose_member_id"
    """The coordinator no longer knows the member: forget generation and member id."""
    FIND_COORDINATOR = "find_coordinator"
    """Forget the coordinator, find it again, retry after the backoff."""
    BACKOFF = "backoff"
    """Retry after the backoff."""
    FENCED = "fenced"
    """Another process holds this static member's instance id: fatal."""
    FAILED = "failed"
    """Give up: the answer's error is the outcome."""


_COMMON: Mapping[int, Answer] = {
    0: Answer.OK,
    NotCoordinatorError.code: Answer.FIND_COORDINATOR,
    CoordinatorNotAvailableError.code: Answer.FIND_COORDINATOR,
    RebalanceInProgressError.code: Answer.REJOIN,
    UnknownMemberIdError.code: Answer.LOSE_MEMBER_ID,
    IllegalGenerationError.code: Answer.LOSE_GENERATION,
}

ANSWERS: Mapping[tuple[GroupApi, int], Answer] = {
    **{(GroupApi.JOIN_GROUP, code): answer for code, answer in _COMMON.items()},
    (GroupApi.JOIN_GROUP, CoordinatorLoadInProgressError.code): Answer.BACKOFF,
    (GroupApi.JOIN_GROUP, MemberIdRequiredError.code): Answer.TAKE_MEMBER_ID,
    # A JoinGroup that names an old generation starts over as a new member.
    (GroupApi.JOIN_GROUP, IllegalGenerationError.code): Answer.LOSE_MEMBER_ID,
    **{(GroupApi.SYNC_GROUP, code): answer for code, answer in _COMMON.items()},
    (GroupApi.SYNC_GROUP, CoordinatorLoadInProgressError.code): Answer.BACKOFF,
    **{(GroupApi.HEARTBEAT, code): answer for code, answer in _COMMON.items()},
    (GroupApi.HEARTBEAT, FencedInstanceIdError.code): Answer.FENCED,
}
"""(API, error code) -> what it means; a code not listed is :data:`UNLISTED` [API]."""

UNLISTED: Mapping[GroupApi, Answer] = {
    GroupApi.JOIN_GROUP: Answer.FAILED,
    GroupApi.SYNC_GROUP: Answer.FAILED,
    # A heartbeat that failed for another reason is retried after the backoff.
    GroupApi.HEARTBEAT: Answer.BACKOFF,
}


def answer_for(api: GroupApi, code: int) -> Answer:
    """What error ``code`` in an answer to ``api`` means (:data:`ANSWERS`)."""
    return ANSWERS.get((api, code), UNLISTED[api])


class HeartbeatAction(enum.Enum):
    """What the heartbeat task does next (:meth:`Membership.next_heartbeat`)."""

    WAIT = "wait"
    SEND = "send"
    LEAVE = "leave"
    """``poll`` was not called within ``max.poll.interval.ms``: leave the group."""


@attrs.frozen(slots=True)
class HeartbeatPlan:
    """The heartbeat task's next step; ``wait_ms`` is for WAIT."""

    action: HeartbeatAction
    wait_ms: float = 0.0


@attrs.frozen(slots=True)
class JoinReply:
    """The reading of a JoinGroup or SyncGroup answer."""

    answer: Answer
    error: KafkaError | None = None
    """The answer's error (for logging, or raised when FAILED)."""


class Membership:
    """The state, identity and deadlines of one member of ``group_id`` (no I/O)."""

    def __init__(
        self,
        group_id: str,
        *,
        instance_id: str | None,
        assignors: Sequence[Assignor],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        timers: MemberTimers,
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.timers = timers
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.assignment: tuple[TopicPartition, ...] = ()
        """The last assignment SyncGroup gave."""
        self.rejoin_needed = True
        self.rejoin_reason = "joining the group"
        self.revoked_for_join = False
        """``poll`` already gave up what the coming join needs it to (listener called)."""
        self.join_error: BaseException | None = None
        """Why the join failed (JOIN_FAILED)."""
        self.fatal_error: KafkaError | None = None

    @classmethod
    def from_config(cls, config: ConsumerConfig, now_ms: float) -> Membership:
        """A member as ``config`` describes it (``group.id`` must be set)."""
        if config.group_id is None:
            raise IllegalStateError("subscribing needs a group.id")
        return cls(
            config.group_id,
            instance_id=config.group_instance_id,
            assignors=resolve_assignors(config.partition_assignment_strategy),
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.max_poll_interval_ms,
            timers=MemberTimers(
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                session_timeout_ms=config.session_timeout_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                auto_commit_interval_ms=config.auto_commit_interval_ms,
                now_ms=now_ms,
            ),
        )

    # ---- state

    def fire(self, event: MemberEvent) -> MemberState:
        """Move along ``(state, event)`` or raise :class:`IllegalStateError` (a bug)."""
        target = TRANSITIONS.get((self.state, event))
        if target is None:
            raise IllegalStateError(
                f"group {self.group_id}: {event.value} is not allowed in state {self.state.value}"
            )
        if target is not self.state:
            logger.debug(
                "group %s: %s -(%s)-> %s",
                self.group_id,
                self.state.value,
                event.value,
                target.value,
            )
        self.state = target
        return target

    @property
    def in_generation(self) -> bool:
        """A member of a generation (heartbeats are due, commits carry it)."""
        return self.state in IN_GENERATION and self.generation_id != NO_GENERATION

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.member_id

    def request_rejoin(self, reason: str) -> None:
        """Join again at the next ``poll`` (a flag, not a state: the member stays where it is)."""
        if not self.rejoin_needed:
            logger.info("group %s: rejoining: %s", self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            self.group_id, self.generation_id, self.member_id, self.instance_id
        )

    def lose_generation(self, *, reset_member_id: bool) -> None:
        """The coordinator ended this member's generation (GENERATION_LOST)."""
        self.fire(E.GENERATION_LOST)
        self.generation_id = NO_GENERATION
        if reset_member_id:
            self.member_id = ""

    # ---- poll's side of a join

    @property
    def join_requested(self) -> bool:
        """A join was asked for and ``poll`` has not taken its result yet."""
        return self.state in (S.JOINING, S.ASSIGNED, S.JOIN_FAILED)

    @property
    def wants_join(self) -> bool:
        """``poll`` must start a join (after giving up what the join needs)."""
        return self.state is S.UNJOINED or (self.state is S.STABLE and self.rejoin_needed)

    def start_join(self) -> None:
        """``poll`` asks the runner for a join (JOIN_REQUESTED)."""
        self.fire(E.JOIN_REQUESTED)
        self.rejoin_needed = False
        self.join_error = None

    def take_join_result(self) -> BaseException | None:
        """``poll`` takes the finished join: its error, or None and :attr:`assignment` holds.

        A failure leaves the member UNJOINED, to join again; FENCED_INSTANCE_ID
        is also kept as the fatal error.
        """
        if self.state is S.JOIN_FAILED:
            self.fire(E.FAILURE_TAKEN)
            self.revoked_for_join = False
            error, self.join_error = self.join_error, None
            self.request_rejoin("the last join failed")
            if isinstance(error, FencedInstanceIdError):
                self.fatal_error = error
            return error
        self.fire(E.ASSIGNMENT_TAKEN)
        self.revoked_for_join = False
        if self.generation_id == NO_GENERATION:
            # Lost while ASSIGNED: the assignment is applied, the next poll joins again.
            self.fire(E.GENERATION_LOST)
        return None

    # ---- JoinGroup and SyncGroup (the runner's side)

    def join_protocols(self, subscription: Subscription) -> list[JoinGroupRequestProtocol]:
        """One protocol per assignor, each with its subscription and user data."""
        return [
            JoinGroupRequestProtocol(
                name=assignor.name,
                metadata=encode_subscription(
                    attrs.evolve(subscription, user_data=assignor.user_data(subscription.topics))
                ),
            )
            for assignor in self.assignors
        ]

    def join_request(
        self, version: int, protocols: list[JoinGroupRequestProtocol]
    ) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms if version >= 1 else -1,
            member_id=self.member_id,
            group_instance_id=self.instance_id if version >= 5 else None,
            protocol_type=PROTOCOL_TYPE,
            protocols=protocols,
            reason=self.rejoin_reason if version >= 8 else None,
        )

    def on_join_group(self, response: JoinGroupResponse) -> JoinReply:
        """Read a JoinGroup answer; OK: the member id, protocol and leader are taken."""
        code = response.error_code
        answer = answer_for(GroupApi.JOIN_GROUP, code)
        if answer is Answer.OK:
            self.member_id = response.member_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            return JoinReply(answer)
        error = make_error(code, f"JoinGroup of group {self.group_id}")
        if answer is Answer.TAKE_MEMBER_ID:
            self.member_id = response.member_id
        elif answer in (Answer.LOSE_MEMBER_ID, Answer.LOSE_GENERATION):
            self.lose_generation(reset_member_id=answer is Answer.LOSE_MEMBER_ID)
        return JoinReply(answer, error)

    def must_assign(self, response: JoinGroupResponse) -> bool:
        """This member leads the group and must compute the assignment."""
        return response.leader == response.member_id and not response.skip_assignment

    def assignor_for(self, name: str | None) -> Assignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    def chosen_assignor(self, name: str | None) -> Assignor:
        """The assignor the group chose, which this member must lead with."""
        assignor = self.assignor_for(name)
        if assignor is None:
            raise IllegalStateError(f"the group chose assignor {name!r}, which is not configured")
        return assignor

    def leader_assignments(
        self,
        protocol_name: str | None,
        subscriptions: Mapping[str, Subscription],
        partition_counts: Mapping[str, int],
    ) -> list[SyncGroupRequestAssignment]:
        """The leader's part: the chosen assignor over every member's subscription."""
        assignor = self.chosen_assignor(protocol_name)
        result: Mapping[str, Assignment] = assignor.assign(partition_counts, subscriptions)
        return [
            SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(a))
            for member, a in sorted(result.items())
        ]

    @staticmethod
    def member_subscriptions(response: JoinGroupResponse) -> dict[str, Subscription]:
        return {
            m.member_id: decode_subscription(m.metadata, m.group_instance_id)
            for m in response.members
        }

    def sync_request(
        self, version: int, generation: int, assignments: list[SyncGroupRequestAssignment]
    ) -> SyncGroupRequest:
        return SyncGroupRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id if version >= 3 else None,
            protocol_type=PROTOCOL_TYPE if version >= 5 else None,
            protocol_name=self.protocol_name if version >= 5 else None,
            assignments=assignments,
        )

    def on_sync_group(
        self, response: SyncGroupResponse, generation: int, now_ms: float
    ) -> JoinReply:
        """Read a SyncGroup answer; OK: the member is in ``generation`` (SYNCED)."""
        code = response.error_code
        answer = answer_for(GroupApi.SYNC_GROUP, code)
        if answer is not Answer.OK:
            if answer in (Answer.LOSE_MEMBER_ID, Answer.LOSE_GENERATION):
                self.lose_generation(reset_member_id=answer is Answer.LOSE_MEMBER_ID)
            return JoinReply(answer, make_error(code, f"SyncGroup of group {self.group_id}"))
        assignment = decode_assignment(response.assignment)
        self.fire(E.SYNCED)
        self.generation_id = generation
        self.assignment = assignment.partitions
        assignor = self.assignor_for(self.protocol_name)
        if assignor is not None:
            assignor.on_assignment(assignment, generation)
        self.timers.reset_heartbeats(now_ms)
        logger.info(
            "group %s: joined generation %d as %s: %s",
            self.group_id,
            generation,
            self.member_id,
            sorted(assignment.partitions),
        )
        return JoinReply(answer)

    def join_failed(self, error: BaseException) -> None:
        """The join gave up with ``error``; ``poll`` raises it (JOIN_FAILED)."""
        self.fire(E.JOIN_FAILED)
        self.join_error = error

    # ---- heartbeats

    def next_heartbeat(self, now_ms: float, idle_wait_ms: float) -> HeartbeatPlan:
        """Send, leave (``poll`` stopped) or wait (``idle_wait_ms`` out of a generation)."""
        if not self.in_generation:
            return HeartbeatPlan(HeartbeatAction.WAIT, idle_wait_ms)
        timers = self.timers
        if timers.poll_timeout_expired(now_ms):
            return HeartbeatPlan(HeartbeatAction.LEAVE)
        due = timers.heartbeat_due_in(now_ms)
        if due <= 0:
            return HeartbeatPlan(HeartbeatAction.SEND)
        return HeartbeatPlan(HeartbeatAction.WAIT, min(due, timers.poll_timeout_in(now_ms)))

    def heartbeat_request(self, version: int, generation: int) -> HeartbeatRequest:
        return HeartbeatRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id if version >= 3 else None,
        )

    def on_heartbeat(
        self, code: int, generation: int, now_ms: float, retry_backoff_ms: int
    ) -> Answer | None:
        """Read a heartbeat answer for ``generation``; None when it no longer matters
        (a rebalance started meanwhile)."""
        if generation != self.generation_id or self.state not in IN_GENERATION:
            return None
        answer = answer_for(GroupApi.HEARTBEAT, code)
        if answer in (Answer.OK, Answer.REJOIN):
            self.timers.heartbeat_ok(now_ms)
            if answer is Answer.REJOIN:
                self.request_rejoin("the group is rebalancing")
        elif answer in (Answer.LOSE_MEMBER_ID, Answer.LOSE_GENERATION):
            self.lose_generation(reset_member_id=answer is Answer.LOSE_MEMBER_ID)
            self.request_rejoin(f"heartbeat answered {make_error(code).name}")
        elif answer is Answer.FENCED:
            self.fatal_error = make_error(code, "Heartbeat")
        else:
            if answer is not Answer.FIND_COORDINATOR:
                logger.warning(
                    "group %s: heartbeat answered %s", self.group_id, make_error(code, "Heartbeat")
                )
            self.timers.heartbeat_failed(now_ms, retry_backoff_ms)
        return answer

    # ---- leaving and commits

    def should_send_leave(self) -> bool:
        """A dynamic member in (or joining) a generation says LeaveGroup; a static one never."""
        joined = self.generation_id != NO_GENERATION or self.state in JOIN_UNDER_WAY
        return self.instance_id is None and bool(self.member_id) and joined

    def leave_request(self, version: int, member_id: str, reason: str) -> LeaveGroupRequest:
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

    def left(self, reason: str) -> None:
        """The member left (or gave up) its generation, and any join under way (LEFT)."""
        self.fire(E.LEFT)
        self.generation_id = NO_GENERATION
        self.member_id = ""
        self.join_error = None
        self.request_rejoin(reason)

    def commit_generation(self, subscribed: bool) -> int:
        """The generation a commit carries (none for a consumer that assigns itself).

        As Java: the group's partitions are committed only within a generation;
        REBALANCE_IN_PROGRESS while a join is under way, CommitFailedError otherwise.
        """
        if not subscribed:
            return NO_GENERATION
        if not self.in_generation:
            if self.state in JOIN_UNDER_WAY:
                raise RebalanceInProgressError("the consumer is rejoining its group")
            raise CommitFailedError("the consumer is not part of an active group generation")
        return self.generation_id


__all__ = [
    "ANSWERS",
    "NO_GENERATION",
    "PROTOCOL_TYPE",
    "TRANSITIONS",
    "Answer",
    "GroupApi",
    "HeartbeatAction",
    "HeartbeatPlan",
    "JoinReply",
    "MemberEvent",
    "MemberState",
    "Membership",
    "answer_for",
]
