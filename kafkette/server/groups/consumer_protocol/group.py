"""One consumer-type group's state (Kafka's ConsumerGroup): plain data with the
bookkeeping that must stay consistent, no protocol rules and no I/O.

The group epoch counts changes of membership, subscriptions and subscribed topics'
metadata; the assignment epoch is the group epoch at which the target assignment was
last computed. Every partition a member holds (assigned or pending revocation) is
recorded with that member's epoch in ``partition_epochs``; recording a partition that
another member holds is a bug, raised as :class:`PartitionOwnedTwiceError`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping

from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.member import Member, MemberState
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.topics import TopicInfo, resolve


class ConsumerGroupState(enum.Enum):
    """A consumer group's state as ConsumerGroupDescribe and ListGroups name it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    """The group epoch moved past the assignment epoch: a new target is due."""
    RECONCILING = "Reconciling"
    """Some member does not hold its target yet."""
    STABLE = "Stable"
    DEAD = "Dead"


class PartitionOwnedTwiceError(AssertionError):
    """Two members would hold one partition: a broken invariant, never a client's fault."""


class ConsumerGroup:
    """Members, epochs, the target assignment and the members' timers of one group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        """Instance id -> member id."""
        self.target: dict[str, Assignment] = {}
        """The target assignment at ``assignment_epoch``, by member id."""
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscription_metadata: dict[str, TopicInfo] = {}
        """The existing topics some member's subscription covers, as last computed."""
        self.session_deadlines: dict[str, int] = {}
        self.revocation_deadlines: dict[str, tuple[int, int]] = {}
        """Member id -> (the epoch it must leave, the time by which it must)."""
        self.join_deadlines: dict[str, int] = {}
        """Classic members told to rejoin (REBALANCE_IN_PROGRESS) -> when they are removed
        unless they send JoinGroup (their rebalance timeout)."""
        self.sync_deadlines: dict[str, int] = {}
        """Classic members answered a JoinGroup -> when they are removed unless they send
        SyncGroup (their rebalance timeout)."""

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, epoch={self.group_epoch}, "
            f"assignment_epoch={self.assignment_epoch}, members={sorted(self.members)})"
        )

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's rule: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch of the member holding the partition, or None when none does."""
        return self.partition_epochs.get((topic_id, partition))

    def static_member(self, instance_id: str | None) -> Member | None:
        """The member with this instance id, if any."""
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def put(self, member: Member) -> None:
        """Add or update a member, moving its partition epochs along."""
        old = self.members.get(member.member_id)
        if (
            old is not None
            and old.member_epoch == member.member_epoch
            and old.assigned == member.assigned
            and old.pending_revocation == member.pending_revocation
        ):
            self._index(old, member)
            return
        if old is not None:
            self._release(old)
        owned = member.owned()
        for topic_id, p in partitions.pairs(owned):
            holder = self.partition_epochs.get((topic_id, p))
            if holder is not None:
                if old is not None:
                    self._hold(old)
                raise PartitionOwnedTwiceError(
                    f"group {self.group_id}: partition {p} of topic {topic_id} given to "
                    f"{member.member_id} at epoch {member.member_epoch} is still held at "
                    f"epoch {holder}"
                )
        for key in partitions.pairs(owned):
            self.partition_epochs[key] = member.member_epoch
        self._index(old, member)

    def _index(self, old: Member | None, member: Member) -> None:
        if (
            old is not None
            and old.instance_id is not None
            and old.instance_id != member.instance_id
        ):
            self.static_members.pop(old.instance_id, None)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        """Remove a member with its target and timers, releasing its partitions."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.revocation_deadlines.pop(member_id, None)
        self.join_deadlines.pop(member_id, None)
        self.sync_deadlines.pop(member_id, None)
        return member

    def _release(self, member: Member) -> None:
        for topic_id, p in partitions.pairs(member.owned()):
            self.partition_epochs.pop((topic_id, p), None)

    def _hold(self, member: Member) -> None:
        for topic_id, p in partitions.pairs(member.owned()):
            self.partition_epochs[(topic_id, p)] = member.member_epoch

    def classic_members(self) -> list[Member]:
        """The members that use the classic protocol."""
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a classic member joining with these protocols fits the group (Kafka's
        supportsClassicProtocols): protocol type ``consumer``, and a protocol every classic
        member supports (any, while it has none)."""
        if protocol_type != "consumer":
            return False
        wanted = list(names)
        classic = self.classic_members()
        if not classic:
            return bool(wanted)
        return any(
            all(any(name == p for p, _ in m.classic.protocols) for m in classic if m.classic)
            for name in wanted
        )

    def waiting_on_unreleased_partition(self, member: Member) -> bool:
        """Whether a member waits for a partition of its target that another member still
        holds (Kafka's waitingOnUnreleasedPartition)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        missing = partitions.minus(self.target.get(member.member_id, {}), member.assigned)
        return any(self.partition_epochs.get(key) is not None for key in partitions.pairs(missing))

    def subscribed_topics(self, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
        """The existing topics that some member's names or regex cover, from ``topics``."""
        names: set[str] = set()
        regexes: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                regexes.add(member.subscribed_topic_regex)
        covered = set(resolve(names, None, topics))
        for regex in regexes:
            covered |= resolve((), regex, topics)
        return {name: topics[name] for name in sorted(covered)}

    def preferred_assignor(self, configured: Iterable[str]) -> str:
        """The assignor most members ask for (ties: the earlier in ``group.consumer.assignors``),
        or the first configured one when no member asks."""
        order = list(configured)
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return order[0]
        return max(votes, key=lambda name: (votes[name], -order.index(name)))
