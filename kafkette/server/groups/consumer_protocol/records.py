"""A consumer group as the records Kafka's group coordinator keeps for it in
``__consumer_offsets``, and back; without I/O.

Kafka (GroupCoordinatorRecordHelpers) keeps a consumer group as six kinds of record,
each key prefixed by its int16 version, which names the kind, and each value at
version 0:

=====  ======================================  ===============================
key    record                                  one per
=====  ======================================  ===============================
3      ConsumerGroupMetadata (group epoch)     group
4      ConsumerGroupPartitionMetadata          group (the subscribed topics)
5      ConsumerGroupMemberMetadata             member (its subscription)
6      ConsumerGroupTargetAssignmentMetadata   group (the assignment epoch)
7      ConsumerGroupTargetAssignmentMember     member (its target)
8      ConsumerGroupCurrentMemberAssignment    member (epochs, state, partitions)
=====  ======================================  ===============================

:func:`group_records` gives the latest record of every key for a group's state;
:func:`changes` the records to append to go from one such set to the next (tombstones,
``None``, for keys that went), in Kafka's order: tombstones of current assignments,
targets, the assignment epoch, member metadata, partition metadata and the group epoch,
then member metadata, partition metadata, group epoch, targets, assignment epoch and
current assignments. Since the offsets topic is compacted, the latest record
per key is the state: :func:`rebuild` makes the groups back from it, as Kafka's
GroupMetadataManager.replay does, and restarts their timers from the load time (as
Kafka's onLoaded: a member that does not heartbeat within its session timeout after a
restart is removed).
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Mapping

import attrs

from kafkette.protocol.codec import decode_message, encode_message
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kafkette.protocol.messages import consumer_group_current_member_assignment_value as current
from kafkette.protocol.messages import consumer_group_member_metadata_value as metadata
from kafkette.protocol.messages import consumer_group_partition_metadata_value as topics_msg
from kafkette.protocol.messages import consumer_group_target_assignment_member_value as target
from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.config import ConsumerGroupConfig
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup, PartitionOwnedTwiceError
from kafkette.server.groups.consumer_protocol.member import ClassicMember, Member, MemberState
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.topics import TopicInfo

logger = logging.getLogger("kafkette.server.groups.consumer")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1))
"""The key versions of consumer group records."""
VALUE_VERSION = 0

MEMBER_STATE_CODES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
"""Kafka's MemberState values, as the current assignment record holds them."""
_STATES_BY_CODE = {code: state for state, code in MEMBER_STATE_CODES.items()}

_VERSION = struct.Struct(">h")

# Tombstones first, then the new values, each in Kafka's order (GroupMetadataManager's
# removeMember, ConsumerGroup.createGroupTombstoneRecords, the heartbeat's records).
_TOMBSTONE_ORDER = (
    CURRENT_ASSIGNMENT,
    TARGET_MEMBER,
    TARGET_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    GROUP_METADATA,
)
_VALUE_ORDER = (
    MEMBER_METADATA,
    PARTITION_METADATA,
    GROUP_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    CURRENT_ASSIGNMENT,
)

RecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)


@attrs.frozen(order=True, cache_hash=True)
class RecordKey:
    """The key of one consumer group record: its kind (the key version), the group and,
    for member records, the member."""

    kind: int
    group_id: str
    member_id: str | None = None


RecordSet = dict[RecordKey, RecordValue]
Change = tuple[RecordKey, RecordValue | None]


# ---- state -> records


@attrs.define
class _GroupCache:
    members: dict[str, tuple[Member, RecordKey, RecordValue, RecordKey, RecordValue]] = (
        attrs.Factory(dict)
    )
    targets: dict[str, tuple[Assignment, RecordKey, RecordValue]] = attrs.Factory(dict)
    topics: tuple[Mapping[str, TopicInfo], RecordValue] | None = None
    epochs: tuple[int, int] | None = None
    """The group and assignment epochs last made."""


class RecordCache:
    """The records last made for each group's members, targets and topics, reused while
    the object they came from is the same one (members are immutable and replaced on
    every change; targets and topics are replaced, never changed in place), so that a
    heartbeat that changes one member makes that member's records only."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupCache] = {}

    def of(self, group_id: str) -> _GroupCache:
        """The cache of one group."""
        return self._groups.setdefault(group_id, _GroupCache())

    def forget(self, group_id: str) -> None:
        """Drop a group that is gone."""
        self._groups.pop(group_id, None)


def group_records(group: ConsumerGroup, cache: RecordCache | None = None) -> RecordSet:
    """The latest record of every key for ``group``'s state (reusing ``cache``'s records
    for what did not change)."""
    return _made(group, cache)


def changed_records(group: ConsumerGroup, cache: RecordCache) -> RecordSet | None:
    """:func:`group_records`, or None when nothing changed since ``cache`` last made them."""
    if _unchanged(group, cache.of(group.group_id)):
        return None
    return _made(group, cache)


def _unchanged(group: ConsumerGroup, old: _GroupCache) -> bool:
    if (
        (group.group_epoch, group.assignment_epoch) != old.epochs
        or old.topics is None
        or old.topics[0] is not group.subscription_metadata
        or len(group.members) != len(old.members)
        or len(group.target) != len(old.targets)
    ):
        return False
    members, targets = old.members, old.targets
    for member_id, member in group.members.items():
        made = members.get(member_id)
        if made is None or made[0] is not member:
            return False
    for member_id, assignment in group.target.items():
        done = targets.get(member_id)
        if done is None or done[0] is not assignment:
            return False
    return True


def _made(group: ConsumerGroup, cache: RecordCache | None) -> RecordSet:
    gid = group.group_id
    old = cache.of(gid) if cache is not None else _GroupCache()
    epochs = (group.group_epoch, group.assignment_epoch)
    topics = old.topics
    if topics is None or topics[0] is not group.subscription_metadata:
        topics = (
            group.subscription_metadata,
            ConsumerGroupPartitionMetadataValue(
                topics=[
                    topics_msg.TopicMetadata(
                        topic_id=info.topic_id, topic_name=name, num_partitions=info.partitions
                    )
                    for name, info in sorted(group.subscription_metadata.items())
                ]
            ),
        )
    records: RecordSet = {
        RecordKey(GROUP_METADATA, gid): ConsumerGroupMetadataValue(epoch=group.group_epoch),
        RecordKey(PARTITION_METADATA, gid): topics[1],
        RecordKey(TARGET_METADATA, gid): ConsumerGroupTargetAssignmentMetadataValue(
            assignment_epoch=group.assignment_epoch
        ),
    }
    members: dict[str, tuple[Member, RecordKey, RecordValue, RecordKey, RecordValue]] = {}
    for member_id, member in group.members.items():
        made = old.members.get(member_id)
        if made is None or made[0] is not member:
            made = (
                member,
                RecordKey(MEMBER_METADATA, gid, member_id),
                _member_metadata(member),
                RecordKey(CURRENT_ASSIGNMENT, gid, member_id),
                _current_assignment(member),
            )
        members[member_id] = made
        records[made[1]] = made[2]
        records[made[3]] = made[4]
    targets: dict[str, tuple[Assignment, RecordKey, RecordValue]] = {}
    for member_id, assignment in group.target.items():
        done = old.targets.get(member_id)
        if done is None or done[0] is not assignment:
            done = (
                assignment,
                RecordKey(TARGET_MEMBER, gid, member_id),
                ConsumerGroupTargetAssignmentMemberValue(
                    topic_partitions=[
                        target.TopicPartition(topic_id=t, partitions=sorted(ps))
                        for t, ps in sorted(assignment.items())
                    ]
                ),
            )
        targets[member_id] = done
        records[done[1]] = done[2]
    if cache is not None:
        old.members, old.targets, old.topics, old.epochs = members, targets, topics, epochs
    return records


def _current_assignment(member: Member) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=MEMBER_STATE_CODES[member.state],
        assigned_partitions=_current_partitions(member.assigned),
        partitions_pending_revocation=_current_partitions(member.pending_revocation),
    )


def _member_metadata(member: Member) -> ConsumerGroupMemberMetadataValue:
    classic = member.classic
    return ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        classic_member_metadata=None
        if classic is None
        else metadata.ClassicMemberMetadata(
            session_timeout_ms=classic.session_timeout_ms,
            supported_protocols=[
                metadata.ClassicProtocol(name=name, metadata=data)
                for name, data in classic.protocols
            ],
        ),
    )


def _current_partitions(assignment: Assignment) -> list[current.TopicPartitions]:
    return [
        current.TopicPartitions(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(assignment.items())
    ]


def changes(
    old: Mapping[RecordKey, RecordValue], new: Mapping[RecordKey, RecordValue]
) -> list[Change]:
    """The records that take the log from ``old`` to ``new`` (None: a tombstone), in
    Kafka's order."""
    gone = sorted(
        (key for key in old if key not in new),
        key=lambda k: (_TOMBSTONE_ORDER.index(k.kind), k),
    )
    written = sorted(
        (key for key, value in new.items() if not _same(old.get(key), value)),
        key=lambda k: (_VALUE_ORDER.index(k.kind), k),
    )
    return [(key, None) for key in gone] + [(key, new[key]) for key in written]


def _same(old: RecordValue | None, new: RecordValue) -> bool:
    return old is new or old == new


# ---- bytes


def _with_version(version: int, message: object) -> bytes:
    out = bytearray(_VERSION.pack(version))
    encode_message(message, version, out)  # type: ignore[arg-type]
    return bytes(out)


def encode_key(key: RecordKey) -> bytes:
    """The record key: its int16 version, then Kafka's key struct at that version."""
    gid, mid = key.group_id, key.member_id or ""
    message: object
    if key.kind == GROUP_METADATA:
        message = ConsumerGroupMetadataKey(group_id=gid)
    elif key.kind == PARTITION_METADATA:
        message = ConsumerGroupPartitionMetadataKey(group_id=gid)
    elif key.kind == TARGET_METADATA:
        message = ConsumerGroupTargetAssignmentMetadataKey(group_id=gid)
    elif key.kind == MEMBER_METADATA:
        message = ConsumerGroupMemberMetadataKey(group_id=gid, member_id=mid)
    elif key.kind == TARGET_MEMBER:
        message = ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid)
    elif key.kind == CURRENT_ASSIGNMENT:
        message = ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid)
    else:
        raise ValueError(f"not a consumer group record kind: {key.kind}")
    return _with_version(key.kind, message)


def encode_value(value: RecordValue) -> bytes:
    """The record value: version 0 of its struct, prefixed by that version."""
    return _with_version(VALUE_VERSION, value)


_VALUE_TYPES: dict[int, type[RecordValue]] = {
    GROUP_METADATA: ConsumerGroupMetadataValue,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataValue,
    MEMBER_METADATA: ConsumerGroupMemberMetadataValue,
    TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataValue,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberValue,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentValue,
}


def decode_key(version: int, data: bytes, pos: int) -> RecordKey:
    """A consumer group record key of ``version`` (3-8) from ``data[pos:]``."""
    if version == GROUP_METADATA:
        group, _ = decode_message(ConsumerGroupMetadataKey, data, pos, version)
        return RecordKey(version, group.group_id)
    if version == PARTITION_METADATA:
        topics, _ = decode_message(ConsumerGroupPartitionMetadataKey, data, pos, version)
        return RecordKey(version, topics.group_id)
    if version == TARGET_METADATA:
        epoch, _ = decode_message(ConsumerGroupTargetAssignmentMetadataKey, data, pos, version)
        return RecordKey(version, epoch.group_id)
    if version == MEMBER_METADATA:
        member, _ = decode_message(ConsumerGroupMemberMetadataKey, data, pos, version)
        return RecordKey(version, member.group_id, member.member_id)
    if version == TARGET_MEMBER:
        target_, _ = decode_message(ConsumerGroupTargetAssignmentMemberKey, data, pos, version)
        return RecordKey(version, target_.group_id, target_.member_id)
    if version == CURRENT_ASSIGNMENT:
        assigned, _ = decode_message(ConsumerGroupCurrentMemberAssignmentKey, data, pos, version)
        return RecordKey(version, assigned.group_id, assigned.member_id)
    raise ProtocolError(f"not a consumer group record key version: {version}")


def decode_value(key: RecordKey, data: bytes) -> RecordValue:
    """The value of a record with ``key`` (a ProtocolError for bytes that do not decode
    or a version other than 0)."""
    if len(data) < 2:
        raise ProtocolError(f"record value of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version != VALUE_VERSION:
        raise ProtocolError(f"{_VALUE_TYPES[key.kind].__name__} version {version} is unknown")
    value, _ = decode_message(_VALUE_TYPES[key.kind], data, 2, version)
    return value


# ---- records -> state


def rebuild(
    records: Mapping[RecordKey, RecordValue], config: ConsumerGroupConfig, now_ms: int
) -> dict[str, ConsumerGroup]:
    """The groups the latest records describe, with every member's session timer (and
    revocation timer, for a member with partitions to revoke) started at ``now_ms``.

    A group whose records contradict each other (one partition held by two members) is
    left out with a log line, as is a member's assignment without its metadata record.
    """
    by_group: dict[str, dict[RecordKey, RecordValue]] = {}
    for key, value in records.items():
        by_group.setdefault(key.group_id, {})[key] = value
    groups: dict[str, ConsumerGroup] = {}
    for group_id, group_records_ in sorted(by_group.items()):
        try:
            group = _rebuild_group(group_id, group_records_, config, now_ms)
        except PartitionOwnedTwiceError as exc:
            logger.warning("consumer group %s not loaded: %s", group_id, exc)
            continue
        groups[group_id] = group
    return groups


def _rebuild_group(
    group_id: str,
    records: Mapping[RecordKey, RecordValue],
    config: ConsumerGroupConfig,
    now_ms: int,
) -> ConsumerGroup:
    group = ConsumerGroup(group_id)
    members: dict[str, Member] = {}
    assignments: dict[str, ConsumerGroupCurrentMemberAssignmentValue] = {}
    for key, value in sorted(records.items(), key=lambda kv: kv[0]):
        if isinstance(value, ConsumerGroupMetadataValue):
            group.group_epoch = value.epoch
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            group.subscription_metadata = {
                t.topic_name: TopicInfo(t.topic_id, t.topic_name, t.num_partitions)
                for t in value.topics
            }
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            assert key.member_id is not None
            group.target[key.member_id] = partitions.make(
                (tp.topic_id, tp.partitions) for tp in value.topic_partitions
            )
        elif isinstance(value, ConsumerGroupMemberMetadataValue):
            assert key.member_id is not None
            members[key.member_id] = _member(key.member_id, value)
        else:
            assert key.member_id is not None
            assignments[key.member_id] = value
    for member_id in assignments:
        if member_id not in members:
            logger.warning(
                "consumer group %s: assignment of member %s without its metadata, skipped",
                group_id,
                member_id,
            )
    for member_id, member in members.items():
        assignment = assignments.get(member_id)
        if assignment is not None:
            member = attrs.evolve(
                member,
                member_epoch=assignment.member_epoch,
                previous_member_epoch=assignment.previous_member_epoch,
                state=_STATES_BY_CODE.get(assignment.state, MemberState.UNKNOWN),
                assigned=_assignment(assignment.assigned_partitions),
                pending_revocation=_assignment(assignment.partitions_pending_revocation),
            )
        group.put(member)
        # Kafka's onLoaded: group.consumer.session.timeout.ms for every member, also one
        # using the classic protocol (its own session timeout applies from its next request).
        group.session_deadlines[member_id] = now_ms + config.session_timeout_ms
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            group.revocation_deadlines[member_id] = (
                member.member_epoch,
                now_ms + max(member.rebalance_timeout_ms, 0),
            )
    # A target for a member that is gone is not kept (Kafka removes both together).
    group.target = {m: a for m, a in group.target.items() if m in group.members}
    return group


def _member(member_id: str, value: ConsumerGroupMemberMetadataValue) -> Member:
    classic = value.classic_member_metadata
    return Member(
        member_id=member_id,
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(value.subscribed_topic_names))),
        subscribed_topic_regex=value.subscribed_topic_regex or None,
        server_assignor=value.server_assignor,
        classic=ClassicMember(
            session_timeout_ms=classic.session_timeout_ms,
            protocols=tuple((p.name, p.metadata) for p in classic.supported_protocols),
        )
        if classic is not None
        else None,
    )


def _assignment(topics: list[current.TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    return partitions.make((tp.topic_id, tp.partitions) for tp in topics)
