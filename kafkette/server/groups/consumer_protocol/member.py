"""One member of a consumer-type group, as the coordinator keeps it (Kafka's
ConsumerGroupMember): immutable, replaced by an updated copy on every change."""

from __future__ import annotations

import enum

import attrs

from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.partitions import Assignment

JOIN_EPOCH = 0
"""The epoch a member sends to join or rejoin."""
LEAVE_EPOCH = -1
"""The epoch a member sends to leave the group."""
STATIC_LEAVE_EPOCH = -2
"""The epoch a static member sends to leave for a while, keeping its partitions until its
session expires or a member with its instance id takes over."""


class MemberState(enum.Enum):
    """Where a member is in reconciling its assignment with the target (Kafka's MemberState)."""

    STABLE = "stable"
    """Its assignment is its target at its epoch."""
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    """It was asked to revoke partitions and has not yet reported them gone."""
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    """It is at the target epoch but waits for partitions other members still hold."""
    UNKNOWN = "unknown"
    """A state this version does not know (read from a newer broker's records)."""


@attrs.frozen(kw_only=True)
class ClassicMember:
    """What a member using the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside a
    consumer group brings along (Kafka's ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    """(name, ConsumerProtocolSubscription bytes) in the member's order of preference."""

    @property
    def protocol_name(self) -> str:
        """The protocol the member is answered with: its first."""
        return self.protocols[0][0]


@attrs.frozen(kw_only=True)
class Member:
    """A member's subscription, epochs and current assignment."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    """Sorted, without repeats."""
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    """The assignor this member asked for (``group.remote.assignor``), if any."""
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = attrs.field(factory=dict)
    """The partitions the member may consume (sent to it as its assignment)."""
    pending_revocation: Assignment = attrs.field(factory=dict)
    """Partitions the member must give up and has not yet reported as given up."""
    classic: ClassicMember | None = None
    """Set for a member that uses the classic protocol (it joined with JoinGroup, or was
    in a classic group converted into this consumer group)."""

    @property
    def uses_classic_protocol(self) -> bool:
        """Whether the member speaks JoinGroup/SyncGroup/Heartbeat rather than
        ConsumerGroupHeartbeat."""
        return self.classic is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Whether the member holds the target assignment of ``target_epoch``."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def owned(self) -> Assignment:
        """Every partition the member may still hold: assigned and pending revocation."""
        return partitions.union(self.assigned, self.pending_revocation)

    def with_epoch(self, epoch: int) -> Member:
        """A copy at ``epoch``, the current epoch becoming the previous one."""
        return attrs.evolve(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)
