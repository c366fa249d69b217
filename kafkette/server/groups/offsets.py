"""Committed offsets of every group, without I/O: OffsetCommit, OffsetFetch, OffsetDelete,
offsets of deleted topics, and their expiry.

The offsets live on each :class:`~kafkette.server.groups.group.Group` (a group
may hold offsets and no members); :class:`GroupOffsets` shares the
coordinator's table of groups with the membership rules
(:class:`~kafkette.server.groups.engine.GroupEngine`), writes what Kafka
persists to the :class:`~kafkette.server.groups.store.GroupStore`, and checks
for expired offsets every ``offsets.retention.check.interval.ms`` (KIP-211:
the offsets of an Empty group expire ``offsets.retention.minutes`` after it
became Empty; a group without a protocol, whose members only commit, expires
each offset that long after its commit). A group of the consumer protocol
(KIP-848) keeps its offsets in an Empty classic holder: while it has members,
the offsets of the topics they subscribe to never expire, and the others, as
the holder's, that long after their commit, as Kafka's ConsumerGroup does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkette.errors import (
    NO_ERROR,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidGroupIdError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.group import ClassicGroupState, Group, validate_current_member
from kafkette.server.groups.store import CommittedOffset, GroupStore, PartitionKey

logger = logging.getLogger("kafkette.server.groups")

OFFSETS_RETENTION_CHECK_INTERVAL_MS = 600_000
"""Kafka's ``offsets.retention.check.interval.ms`` default."""


class GroupOffsets:
    """The committed offsets of the groups in ``groups`` (shared with the membership rules)."""

    def __init__(self, config: BrokerConfig, store: GroupStore, groups: dict[str, Group]) -> None:
        self.config = config
        self.store = store
        self.groups = groups
        self.next_check_ms: int | None = None
        """When :meth:`expire_offsets` next runs (``None``: not scheduled yet)."""
        self.consumer_group_topics: Callable[[str], frozenset[str]] = lambda group_id: frozenset()
        """The topics the members of the consumer-protocol group ``group_id`` subscribe to
        (none when there is no such group, or it has no members): set by the
        :class:`~kafkette.server.groups.migration.GroupMigration` that owns both kinds."""

    @property
    def retention_ms(self) -> int:
        return self.config.offsets_retention_minutes * 60_000

    def schedule_check(self, now_ms: int) -> None:
        """Start the periodic expiry check (the first runs one interval from now)."""
        self.next_check_ms = now_ms + OFFSETS_RETENTION_CHECK_INTERVAL_MS

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do."""
        return self.next_check_ms if self.groups else None

    def tick(self, now_ms: int) -> None:
        """Expire offsets if the check is due at ``now_ms`` (and schedule the next check)."""
        if self.next_check_ms is None:
            self.next_check_ms = now_ms + OFFSETS_RETENTION_CHECK_INTERVAL_MS
        if now_ms >= self.next_check_ms:
            self.next_check_ms = now_ms + OFFSETS_RETENTION_CHECK_INTERVAL_MS
            self.expire_offsets(now_ms)

    def commit(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[PartitionKey, CommittedOffset],
    ) -> dict[PartitionKey, int]:
        """OffsetCommit: an error code per partition. A commit with no member and generation
        -1 is a simple (standalone) consumer's, allowed only while the group has no members."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, IllegalGenerationError.code)
            group = self.groups[group_id] = Group(group_id, ClassicGroupState.EMPTY, now_ms)
        error = self._validate_commit(group, generation_id, member_id, group_instance_id)
        if error == NO_ERROR:
            if group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
                error = RebalanceInProgressError.code
            elif group.is_in(ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE):
                member = group.members[member_id]
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if error != NO_ERROR:
            if is_blank(group):
                self.groups.pop(group_id, None)  # made by this commit: leave no trace
            return dict.fromkeys(offsets, error)
        result: dict[PartitionKey, int] = {}
        accepted: dict[PartitionKey, CommittedOffset] = {}
        for key, offset in offsets.items():
            if len(offset.metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[key] = OffsetMetadataTooLargeError.code
            else:
                accepted[key] = offset
                result[key] = NO_ERROR
        if accepted:
            try:
                self.store.write_offsets(group_id, dict(accepted))
            except Exception:
                logger.exception("group %s: storing offsets failed", group_id)
                return dict.fromkeys(offsets, CoordinatorNotAvailableError.code)
            group.offsets.update(accepted)
        elif is_blank(group):
            self.groups.pop(group_id, None)
        return result

    def _validate_commit(
        self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        if group.is_in(ClassicGroupState.DEAD):
            return CoordinatorNotAvailableError.code
        if generation_id < 0 and group.is_in(ClassicGroupState.EMPTY):
            return NO_ERROR  # an admin client's or a standalone consumer's commit
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = validate_current_member(group, member_id, group_instance_id)
            if error != NO_ERROR:
                return error
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
            return NO_ERROR
        if not group.is_in(ClassicGroupState.EMPTY):
            return UnknownMemberIdError.code  # only members commit while the group has some
        return NO_ERROR

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[PartitionKey] | None
    ) -> dict[PartitionKey, CommittedOffset | None]:
        """OffsetFetch: the committed offset of each partition (``None``: none committed);
        ``partitions=None`` means every partition the group has an offset for."""
        group = self.groups.get(group_id)
        if group is None or group.is_in(ClassicGroupState.DEAD):
            return dict.fromkeys(partitions or (), None)
        keys = sorted(group.offsets) if partitions is None else list(partitions)
        return {key: group.offsets.get(key) for key in keys}

    def delete_offsets(
        self, now_ms: int, group_id: str, partitions: Sequence[PartitionKey]
    ) -> tuple[int, dict[PartitionKey, int]]:
        """OffsetDelete: (group error, error per partition). Offsets of topics the group's
        members consume stay (GROUP_SUBSCRIBED_TO_TOPIC)."""
        if not group_id:
            return InvalidGroupIdError.code, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(ClassicGroupState.DEAD):
            return GroupIdNotFoundError.code, {}
        errors: dict[PartitionKey, int] = {}
        if group.is_in(ClassicGroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == "consumer":
            eligible = [key for key in partitions if not group.is_subscribed_to(key[0])]
            errors = {
                key: GroupSubscribedToTopicError.code
                for key in partitions
                if group.is_subscribed_to(key[0])
            }
        else:
            return NonEmptyGroupError.code, {}
        if eligible:
            removed = {key: group.offsets.pop(key) for key in eligible if key in group.offsets}
            self.cleanup(group, removed, now_ms)
            errors.update(dict.fromkeys(eligible, NO_ERROR))
        return NO_ERROR, errors

    def cleanup(
        self, group: Group, removed: Mapping[PartitionKey, CommittedOffset], now_ms: int
    ) -> None:
        """After offsets were removed: tombstones for them, and the group is Dead (and
        forgotten) when it is Empty with no offset left."""
        if group.is_in(ClassicGroupState.EMPTY) and not group.offsets:
            group.transition_to(ClassicGroupState.DEAD, now_ms)
        if removed:
            self.store.write_offsets(group.group_id, dict.fromkeys(removed, None))
        if group.is_in(ClassicGroupState.DEAD):
            self.groups.pop(group.group_id, None)
            self.store.write_group(group.group_id, None)

    def remove_topic_offsets(self, now_ms: int, topics: Iterable[str]) -> int:
        """Drop every group's offsets of deleted ``topics`` (Kafka's handleDeletedPartitions);
        returns how many were removed."""
        gone = set(topics)
        count = 0
        for group in list(self.groups.values()):
            removed = {key: group.offsets.pop(key) for key in list(group.offsets) if key[0] in gone}
            if removed:
                count += len(removed)
                self.cleanup(group, removed, now_ms)
        return count

    def expire_offsets(self, now_ms: int) -> None:
        """Remove expired offsets (KIP-211), and groups left Empty with none."""
        retention = self.retention_ms
        for group in list(self.groups.values()):
            subscribed: frozenset[str] = frozenset()
            since_empty: int | None = None  # Empty consumer group: counted from when it emptied
            if group.protocol_type is not None and group.is_in(ClassicGroupState.EMPTY):
                since_empty = group.state_timestamp_ms
            elif group.protocol_type is None:
                # offsets only (of a standalone consumer, or a consumer-protocol group's):
                # each counts from its commit
                subscribed = self.consumer_group_topics(group.group_id)
            elif group.subscribed_topics is not None and group.is_in(ClassicGroupState.STABLE):
                subscribed = group.subscribed_topics
            else:
                continue
            expired = {
                key: offset
                for key, offset in group.offsets.items()
                if key[0] not in subscribed and _expired(offset, now_ms, retention, since_empty)
            }
            for key in expired:
                del group.offsets[key]
            if expired:
                logger.info("group %s: %d offset(s) expired", group.group_id, len(expired))
            if expired or (
                group.is_in(ClassicGroupState.EMPTY) and not group.offsets and not group.members
            ):
                self.cleanup(group, expired, now_ms)


def _expired(offset: CommittedOffset, now_ms: int, retention_ms: int, since: int | None) -> bool:
    if offset.expire_timestamp_ms is not None:  # committed with an explicit retention (v1-4)
        return now_ms >= offset.expire_timestamp_ms
    base = since if since is not None else offset.commit_timestamp_ms
    return now_ms - base >= retention_ms


def is_blank(group: Group) -> bool:
    """A group with nothing in it: no members, offsets or protocol, never rebalanced."""
    return (
        not group.members
        and not group.offsets
        and not group.pending_members
        and group.protocol_type is None
        and group.generation_id == 0
    )
