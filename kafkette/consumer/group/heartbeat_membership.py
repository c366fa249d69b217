"""One member's side of the consumer group protocol (KIP-848), without I/O.

Theory of operation. The broker computes assignments; the member only heartbeats
(ConsumerGroupHeartbeat) and reconciles what it owns with what each answer assigns it.
Its state is one of :class:`HeartbeatState`; an :class:`HeartbeatEvent` moves it along
:data:`HEARTBEAT_TRANSITIONS`, and a pair missing from that table is refused
(:class:`~kafkette.errors.IllegalStateError`) with the state unchanged::

    UNSUBSCRIBED --SUBSCRIBED--> JOINING                  (epoch 0, owning nothing)
    JOINING/STABLE/ACKNOWLEDGING --ANSWERED--> STABLE or RECONCILING
    RECONCILING --RECONCILED--> ACKNOWLEDGING             (revoked, committed, assigned)
    any member state --FENCED--> FENCED --LOST--> JOINING (partitions lost, epoch 0 again)
    any member state --LEAVING--> LEAVING --LEFT--> UNSUBSCRIBED (epoch -1, -2 static)
    any state --FAILED--> FATAL

A heartbeat answer (:meth:`HeartbeatMembership.on_answer`) carries the member epoch and,
when it changed, the partitions the member may own now (by topic id): the broker gives a
partition to its new owner only once the previous owner acknowledged revoking it. If
that differs from what the member owns, the member is RECONCILING: the runner calls the
rebalance listener with the partitions that go (``on_partitions_revoked``), commits if
auto-commit is on, takes the new ones (``on_partitions_assigned`` with only those), and
fires RECONCILED; the next heartbeat, sent at once, acknowledges with the partitions
now owned. FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID fence the member: its partitions
are lost (``on_partitions_lost``) and it joins again with epoch 0.

No I/O: :mod:`kafkette.consumer.group.heartbeat_member` sends what this class builds.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Mapping

import attrs

from kafkette.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    IllegalStateError,
    KafkaError,
    NotCoordinatorError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    make_error,
)
from kafkette.protocol.messages import ConsumerGroupHeartbeatRequest
from kafkette.protocol.messages.consumer_group_heartbeat_request import TopicPartitions

logger = logging.getLogger("kafkette.consumer.group")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

TopicIdAssignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id, as ConsumerGroupHeartbeat carries them."""


class HeartbeatState(enum.Enum):
    """Where a member of the consumer protocol stands (Java's MemberState)."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    LEAVING = "LEAVING"
    FATAL = "FATAL"


class HeartbeatEvent(enum.Enum):
    """What happens to the member; :data:`HEARTBEAT_TRANSITIONS` says where it leads."""

    SUBSCRIBED = "SUBSCRIBED"
    ANSWERED = "ANSWERED"
    RECONCILED = "RECONCILED"
    FENCED = "FENCED"
    LOST = "LOST"
    LEAVING = "LEAVING"
    LEFT = "LEFT"
    FAILED = "FAILED"


S = HeartbeatState
E = HeartbeatEvent
_IN_GROUP = (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)

HEARTBEAT_TRANSITIONS: Mapping[tuple[HeartbeatState, HeartbeatEvent], HeartbeatState] = {
    (S.UNSUBSCRIBED, E.SUBSCRIBED): S.JOINING,
    **{(state, E.SUBSCRIBED): state for state in _IN_GROUP},
    (S.FENCED, E.SUBSCRIBED): S.FENCED,
    (S.JOINING, E.ANSWERED): S.STABLE,
    (S.STABLE, E.ANSWERED): S.STABLE,
    (S.ACKNOWLEDGING, E.ANSWERED): S.STABLE,
    (S.RECONCILING, E.ANSWERED): S.RECONCILING,
    (S.RECONCILING, E.RECONCILED): S.ACKNOWLEDGING,
    **{(state, E.FENCED): S.FENCED for state in _IN_GROUP},
    (S.FENCED, E.LOST): S.JOINING,
    **{(state, E.LEAVING): S.LEAVING for state in (*_IN_GROUP, S.FENCED)},
    (S.LEAVING, E.LEFT): S.UNSUBSCRIBED,
    (S.UNSUBSCRIBED, E.LEFT): S.UNSUBSCRIBED,
    **{(state, E.FAILED): S.FATAL for state in HeartbeatState},
}
"""(state, event) -> next state; a pair not listed is refused. ANSWERED from JOINING,
STABLE or ACKNOWLEDGING may go to RECONCILING instead (:meth:`HeartbeatMembership.on_answer`)."""


class AnswerKind(enum.Enum):
    """What the runner does after a ConsumerGroupHeartbeat answer."""

    OK = "OK"
    FIND_COORDINATOR = "FIND_COORDINATOR"
    RETRY = "RETRY"
    FENCED = "FENCED"
    FATAL = "FATAL"


_REDISCOVER = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)
_RETRY = (CoordinatorLoadInProgressError.code,)
_FENCING = (FencedMemberEpochError.code, UnknownMemberIdError.code, GroupIdNotFoundError.code)
"""Join again with epoch 0 (GROUP_ID_NOT_FOUND: the group was deleted, as librdkafka 2.14.3+)."""
_RETRIED_FATAL = (UnreleasedInstanceIdError.code,)


@attrs.define
class HeartbeatMembership:
    """The member's state, epoch, subscription and target, and the heartbeats they make."""

    group_id: str
    instance_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    remote_assignor: str | None = None
    rack_id: str | None = None
    member_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    """Chosen by the client (ConsumerGroupHeartbeat v1); kept across rejoins."""
    state: HeartbeatState = HeartbeatState.UNSUBSCRIBED
    member_epoch: int = JOIN_EPOCH
    heartbeat_interval_ms: int = 0
    """The interval the broker gave (0 until it answered)."""
    topics: tuple[str, ...] = ()
    regex: str | None = None
    owned: dict[uuid.UUID, frozenset[int]] = attrs.field(factory=dict)
    """What the member owns, as it tells the broker."""
    target: dict[uuid.UUID, frozenset[int]] | None = None
    """What the broker last assigned (None: nothing new since the member reconciled)."""
    send_now: bool = False
    """A heartbeat is due at once (joining, acknowledging, leaving)."""
    fatal_error: KafkaError | None = None

    def fire(self, event: HeartbeatEvent, target: HeartbeatState | None = None) -> HeartbeatState:
        """Move along ``(state, event)`` (to ``target`` where an answer chooses) or raise
        :class:`IllegalStateError` (a bug) with the state unchanged."""
        listed = HEARTBEAT_TRANSITIONS.get((self.state, event))
        if listed is None:
            raise IllegalStateError(
                f"group {self.group_id}: {event.value} is not allowed in state {self.state.value}"
            )
        new = target if target is not None else listed
        if new is not self.state:
            logger.debug(
                "group %s: %s -(%s)-> %s", self.group_id, self.state.value, event.value, new.value
            )
        self.state = new
        return new

    # -- subscription and leaving ------------------------------------------------------

    def subscribe(self, topics: tuple[str, ...], regex: str | None) -> None:
        """Follow ``topics`` or ``regex``; join (epoch 0) if not in the group yet."""
        self.topics, self.regex = topics, regex
        if self.state is S.UNSUBSCRIBED:
            self.member_epoch = JOIN_EPOCH
            self.owned = {}
            self.target = None
        self.fire(E.SUBSCRIBED)
        self.send_now = True

    def start_leaving(self) -> None:
        """Leave with the next heartbeat (epoch -1, or -2 for a static member)."""
        self.fire(E.LEAVING)
        self.send_now = True

    @property
    def leave_epoch(self) -> int:
        return STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH

    def left(self) -> None:
        """The leave heartbeat was sent (answered or not): out of the group."""
        self.fire(E.LEFT)
        self.member_epoch = JOIN_EPOCH
        self.owned = {}
        self.target = None
        self.send_now = False

    # -- heartbeats --------------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        return self.state in _IN_GROUP

    def next_heartbeat_ms(self, last_sent_ms: float) -> float:
        """When the next heartbeat is due."""
        if self.send_now:
            return last_sent_ms
        return last_sent_ms + self.heartbeat_interval_ms

    def heartbeat_request(self) -> ConsumerGroupHeartbeatRequest:
        """The next ConsumerGroupHeartbeat: full (every field) each time, which the broker
        accepts as well as the incremental form."""
        self.send_now = False
        if self.state is S.LEAVING:
            return ConsumerGroupHeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=self.leave_epoch,
                instance_id=self.instance_id,
                rebalance_timeout_ms=-1,
                subscribed_topic_names=None,
                topic_partitions=None,
            )
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=list(self.topics) if self.regex is None else [],
            subscribed_topic_regex=self.regex,
            server_assignor=self.remote_assignor,
            topic_partitions=[
                TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(self.owned.items())
                if ps
            ],
        )

    def on_answer(
        self,
        error_code: int,
        error_message: str | None,
        member_epoch: int,
        heartbeat_interval_ms: int,
        assignment: TopicIdAssignment | None,
    ) -> AnswerKind:
        """Read one answer to a heartbeat sent in an in-group state."""
        if self.state not in _IN_GROUP:
            return AnswerKind.OK  # left or fenced meanwhile: the answer is stale
        if error_code:
            return self._on_error(error_code, error_message)
        self.member_epoch = member_epoch
        if heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = heartbeat_interval_ms
        if assignment is not None:
            self.target = {t: frozenset(ps) for t, ps in assignment.items() if ps}
        if self.state is S.RECONCILING:
            return AnswerKind.OK  # reconciliation under way: finished on the poll side
        if self.target is not None and self.target != self.owned:
            self.fire(E.ANSWERED, S.RECONCILING)
        else:
            self.target = None
            self.fire(E.ANSWERED)
        return AnswerKind.OK

    def _on_error(self, code: int, message: str | None) -> AnswerKind:
        error = make_error(code, message or "")
        if code in _REDISCOVER:
            return AnswerKind.FIND_COORDINATOR
        if code in _RETRY:
            return AnswerKind.RETRY
        if code in _FENCING:
            logger.info("group %s: fenced (%s); joining again", self.group_id, error)
            self.fire(E.FENCED)
            return AnswerKind.FENCED
        if code in _RETRIED_FATAL or not error.retriable:
            self.fatal_error = error
            self.fire(E.FAILED)
            return AnswerKind.FATAL
        return AnswerKind.RETRY

    def failed(self, error: KafkaError) -> None:
        """The member cannot go on (the coordinator does not serve the protocol, say):
        ``error`` is raised from the next poll."""
        self.fatal_error = error
        self.fire(E.FAILED)

    # -- reconciliation (the runner's poll side) ---------------------------------------

    @property
    def reconciling(self) -> bool:
        return self.state is S.RECONCILING

    def reconciled(self, owned: TopicIdAssignment) -> None:
        """The runner revoked, committed and assigned ``owned`` (the target it read):
        acknowledge it at once. A newer target that came meanwhile is kept for the answer
        to that acknowledgement."""
        self.owned = {t: frozenset(ps) for t, ps in owned.items() if ps}
        if self.target == self.owned:
            self.target = None
        self.fire(E.RECONCILED)
        self.send_now = True

    def lost(self) -> None:
        """After fencing, the partitions were dropped as lost: join again with epoch 0."""
        self.fire(E.LOST)
        self.member_epoch = JOIN_EPOCH
        self.owned = {}
        self.target = None
        self.send_now = True


__all__ = [
    "HEARTBEAT_TRANSITIONS",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "AnswerKind",
    "HeartbeatEvent",
    "HeartbeatMembership",
    "HeartbeatState",
]
