"""What the admin client's share-group (KIP-932) and group-listing operations return,
named as in Kafka's Admin (``GroupListing``, ``ShareGroupDescription``,
``ShareMemberDescription``, ``SharePartitionOffsetInfo``)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kafkette.admin.types import GroupState, GroupType, Node
from kafkette.errors import KafkaError
from kafkette.structs import TopicPartition


@attrs.frozen
class GroupListing:
    """A group of any type as ListGroups reports it (Kafka's ``GroupListing``, KIP-1043)."""

    group_id: str
    type: GroupType | None
    """None when the broker's ListGroups (before v5) does not report types."""
    protocol: str
    """The protocol type: ``consumer`` (classic and consumer groups), ``share``, or
    empty for a group that only commits offsets."""
    state: GroupState | None
    """None when the broker's ListGroups (before v4) does not report states."""
    coordinator: int = -1
    """The node that listed the group: its coordinator."""


@attrs.frozen
class GroupListings:
    """Groups of every broker; brokers that failed are in ``errors`` (by node id)."""

    valid: tuple[GroupListing, ...]
    errors: Mapping[int, KafkaError] = attrs.Factory(dict)

    def all(self) -> tuple[GroupListing, ...]:
        """Every listing; raises the first broker error if any broker failed."""
        for error in self.errors.values():
            raise error
        return self.valid


@attrs.frozen
class ShareMemberDescription:
    """A member of a share group and the partitions the group assigned it."""

    member_id: str
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]
    member_epoch: int
    rack_id: str | None = None


@attrs.frozen
class ShareGroupDescription:
    """A share group as its coordinator describes it (ShareGroupDescribe)."""

    group_id: str
    members: tuple[ShareMemberDescription, ...]
    state: GroupState
    """``EMPTY`` or ``STABLE``."""
    coordinator: Node | None
    group_epoch: int
    assignment_epoch: int
    assignor: str
    """The server-side assignor (``simple``)."""
    authorized_operations: int | None = None
    """The operations the caller may perform on the group, as a bit field (bit N:
    :class:`~kafkette.acl.AclOperation` N), when asked for; else None."""


@attrs.frozen
class SharePartitionOffsetInfo:
    """A share partition's place (Kafka's ``SharePartitionOffsetInfo``): where the group
    reads from, and how many records from there to the end are not yet delivered for good."""

    start_offset: int
    leader_epoch: int | None = None
    lag: int | None = None
    """None when the broker does not report it (DescribeShareGroupOffsets v0)."""


__all__ = [
    "GroupListing",
    "GroupListings",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffsetInfo",
]
