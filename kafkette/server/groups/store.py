"""How the group coordinator keeps groups and committed offsets across restarts.

The coordinator owns the live state; after each change it writes what Kafka
writes to ``__consumer_offsets`` through a :class:`GroupStore`, and on start
it reads everything back with :meth:`GroupStore.load`. The broker's store
writes Kafka's own key/value records (OffsetCommitKey/Value,
GroupMetadataKey/Value) to the compacted internal topic;
:class:`MemoryGroupStore` keeps the last value of each key in dicts, for the
coordinator's unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    from kafkette.server.groups.consumer_protocol.records import RecordKey, RecordValue

PartitionKey = tuple[str, int]
"""(topic, partition)."""


@attrs.frozen(kw_only=True)
class CommittedOffset:
    """A committed offset as OffsetCommitValue holds it."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    """Only for commits that carried an explicit retention (OffsetCommit v1-4)."""


@attrs.frozen(kw_only=True)
class StoredMember:
    """One member as GroupMetadataValue.MemberMetadata holds it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@attrs.frozen(kw_only=True)
class StoredGroup:
    """A group's membership as GroupMetadataValue holds it."""

    protocol_type: str
    generation: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...] = ()


@attrs.frozen
class LoadedGroups:
    """Everything a store holds, as read back on start."""

    groups: dict[str, StoredGroup]
    offsets: dict[str, dict[PartitionKey, CommittedOffset]]
    consumer_groups: dict[RecordKey, RecordValue] = attrs.Factory(dict)
    """The latest record of each consumer group (KIP-848) key, for
    :meth:`~kafkette.server.groups.consumer_protocol.ConsumerGroupCoordinator.restore`."""


class GroupStore(Protocol):
    """Where the coordinator writes each change; a write returns once it is durable."""

    def write_group(self, group_id: str, group: StoredGroup | None) -> None:
        """Record the group's membership; ``None`` removes the group (a tombstone)."""

    def write_offsets(
        self, group_id: str, offsets: Mapping[PartitionKey, CommittedOffset | None]
    ) -> None:
        """Record committed offsets; a ``None`` value removes that partition's offset."""

    def load(self) -> LoadedGroups:
        """The latest value of every key written (tombstoned keys left out)."""


@attrs.define
class MemoryGroupStore:
    """A :class:`GroupStore` that keeps the latest values in dicts."""

    groups: dict[str, StoredGroup] = attrs.Factory(dict)
    offsets: dict[str, dict[PartitionKey, CommittedOffset]] = attrs.Factory(dict)

    def write_group(self, group_id: str, group: StoredGroup | None) -> None:
        if group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = group

    def write_offsets(
        self, group_id: str, offsets: Mapping[PartitionKey, CommittedOffset | None]
    ) -> None:
        stored = self.offsets.setdefault(group_id, {})
        for key, value in offsets.items():
            if value is None:
                stored.pop(key, None)
            else:
                stored[key] = value
        if not stored:
            del self.offsets[group_id]

    def load(self) -> LoadedGroups:
        return LoadedGroups(
            dict(self.groups), {group: dict(offsets) for group, offsets in self.offsets.items()}
        )
