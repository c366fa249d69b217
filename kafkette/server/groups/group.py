"""One classic consumer group: members, generation, chosen protocol, offsets.

Theory of operation: a group moves between five states, as Kafka's
GroupMetadata does::

    Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance
      ▲                 ▲    │                                       │ leader's SyncGroup
      │                 │    └──no member left──► Empty              ▼
      │                 └──────────── join, leave, expiry ──────── Stable
      └── any state ──► Dead (deleted, or expired with no offsets left)

:data:`VALID_PREVIOUS_STATES` is the table of allowed transitions: anything
not in it is a bug and raises. The group holds plain data and the rules that
need no clock (membership bookkeeping, protocol selection, subscribed
topics); the coordinator's engine drives it with requests and time.

Members awaiting a JoinGroup or SyncGroup response hold a callback: a plain
function the engine gives, called once with the result. Nothing here does
I/O or waits.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from kafkette.errors import FencedInstanceIdError, UnknownMemberIdError
from kafkette.protocol.codec import decode_message
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import ConsumerProtocolSubscription
from kafkette.server.groups.store import CommittedOffset, PartitionKey

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroupState(enum.Enum):
    """A classic group's state; the value is Kafka's name for it (ListGroups, DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(
        {
            ClassicGroupState.STABLE,
            ClassicGroupState.PREPARING_REBALANCE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
            ClassicGroupState.DEAD,
        }
    ),
}
"""Target state -> the states it may be entered from (Kafka's
ClassicGroupState.validPreviousStates)."""


class IllegalGroupTransition(Exception):
    """A transition :data:`VALID_PREVIOUS_STATES` forbids: a bug in the caller."""


@attrs.frozen(kw_only=True)
class JoinResult:
    """What a JoinGroup response carries."""

    error_code: int = 0
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    """(member id, group instance id, metadata) of every member: only for the leader."""


@attrs.frozen(kw_only=True)
class SyncResult:
    """What a SyncGroup response carries."""

    error_code: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@attrs.define(eq=False, kw_only=True)
class Member:
    """One member of a group (Kafka's MemberMetadata)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(name, metadata) in the member's order of preference."""
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    is_new: bool = False
    """Joined but not yet through a completed join phase (its join can time out)."""
    heartbeat_deadline_ms: int = 0
    """When the session expires without a heartbeat."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol`` (which it must support)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` are exactly the ones this member joined with."""
        return list(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class Group:
    """A classic group's state (Kafka's GroupMetadata)."""

    def __init__(self, group_id: str, state: ClassicGroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        """Group instance id -> current member id."""
        self.pending_members: dict[str, int] = {}
        """Member ids given out with MEMBER_ID_REQUIRED -> when they expire."""
        self.pending_sync: set[str] = set()
        """Members that got their JoinGroup response and have not yet sent SyncGroup."""
        self.offsets: dict[PartitionKey, CommittedOffset] = {}
        self.subscribed_topics: frozenset[str] | None = None
        """The topics the members consume; ``None`` when not known (not the consumer protocol)."""
        self.new_member_added = False
        """A member joined during the initial delay (InitialDelayedJoin extends the wait)."""
        self.join_deadline_ms: int | None = None
        self.initial_delay_remaining_ms: int | None = None
        """During the initial delay: how much longer the join phase may be extended."""
        self.sync_deadline_ms: int | None = None

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id})"

    # -- state --------------------------------------------------------------------

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[ClassicGroupState.PREPARING_REBALANCE]

    def transition_to(self, target: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not allowed"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members ------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``old_id`` the new id ``new_id``; an old request still
        waiting gets FENCED_INSTANCE_ID."""
        member = self.members.pop(old_id)
        invoke_join(member, JoinResult(error_code=FENCED_INSTANCE_ID, member_id=old_id))
        invoke_sync(member, SyncResult(error_code=FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.pending_sync.discard(old_id)
        self.static_members[group_instance_id] = new_id
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False when none did."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members (how long a join phase may last)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ----------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member joining with these could be part of the group."""
        names = [name for name, _ in protocols]
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in member.protocol_names():
                counts[name] = counts.get(name, 0) + 1
        return any(counts.get(name, 0) == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """The protocol all members support with the most votes, each member voting for its
        most preferred candidate; a tie goes to the protocol voted for first (in join order)."""
        if not self.members:
            raise IllegalGroupTransition(f"group {self.group_id}: no members to select from")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # max keeps the first of equals

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """Every member's metadata for the chosen protocol, for the leader's JoinGroup response."""
        if self.protocol_name is None:
            return ()
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The union of the members' subscriptions, when the group uses the consumer protocol
        and every subscription parses; ``None`` (unknown) otherwise."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        """Close a join phase: next generation, protocol chosen, CompletingRebalance (or Empty)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync.clear()


FENCED_INSTANCE_ID = 82


def invoke_join(member: Member, result: JoinResult) -> bool:
    """Answer the member's waiting JoinGroup, if any."""
    callback = member.join_callback
    if callback is None:
        return False
    member.join_callback = None
    callback(result)
    return True


def invoke_sync(member: Member, result: SyncResult) -> bool:
    """Answer the member's waiting SyncGroup, if any."""
    callback = member.sync_callback
    if callback is None:
        return False
    member.sync_callback = None
    callback(result)
    return True


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (``None`` if it does not parse)."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            return None
        high = ConsumerProtocolSubscription.VALID_VERSIONS[1]
        subscription: Any
        subscription, _ = decode_message(
            ConsumerProtocolSubscription, metadata, 2, min(version, high)
        )
    except (struct.error, ProtocolError, ValueError):
        return None
    return list(subscription.topics)


def validate_current_member(group: Group, member_id: str, group_instance_id: str | None) -> int:
    """Is the request's sender the current member (Kafka's validateCurrentMember)? An
    instance id held by another member id is FENCED_INSTANCE_ID; an unknown instance id
    or member id is UNKNOWN_MEMBER_ID."""
    if group_instance_id is not None:
        current = group.static_members.get(group_instance_id)
        if current is None:
            return UnknownMemberIdError.code
        if current != member_id:
            return FencedInstanceIdError.code
    return 0 if group.has(member_id) else UnknownMemberIdError.code
