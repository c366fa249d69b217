"""The consumer protocol's bytes: what members put in JoinGroup and get back in SyncGroup.

Both payloads are an int16 version followed by the ConsumerProtocolSubscription
(or ConsumerProtocolAssignment) struct at that version, in the non-flexible
encoding. The format only ever grows at the end, so bytes of a version newer
than ours are read with our highest version and the rest ignored, as Java's
``ConsumerProtocol`` does. Assignment bytes may also be empty: the broker sends
those to a member the leader gave nothing, and they mean "no partitions".
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kafkette.consumer.assignors.base import Assignment, Subscription
from kafkette.protocol.errors import TruncatedError, UnsupportedVersionError
from kafkette.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkette.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignmentTopic,
)
from kafkette.protocol.messages.consumer_protocol_subscription import (
    TopicPartition as SubscriptionTopic,
)
from kafkette.structs import TopicPartition

__all__ = [
    "ASSIGNMENT_VERSION",
    "SUBSCRIPTION_VERSION",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.VALID_VERSIONS[1]
"""The highest ConsumerProtocolSubscription version we know."""
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.VALID_VERSIONS[1]
"""The highest ConsumerProtocolAssignment version we know."""

_VERSION = struct.Struct(">h")


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """The JoinGroup protocol metadata of ``sub`` at ``version`` (clamped to what we know).

    Fields the version cannot carry (owned partitions before v1, the
    generation before v2, the rack before v3) are left out.
    """
    version = _check_version(version, SUBSCRIPTION_VERSION, "subscription")
    data = ConsumerProtocolSubscription(
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=[
            SubscriptionTopic(topic=topic, partitions=partitions)
            for topic, partitions in _group_by_topic(sub.owned_partitions)
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    out = bytearray(_VERSION.pack(version))
    data.encode_into(out, version)
    return bytes(out)


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Read a member's protocol metadata; ``group_instance_id`` comes from JoinGroup.

    Raises :class:`~kafkette.protocol.errors.DecodeError` (or a subclass) on
    malformed bytes, :class:`UnsupportedVersionError` on a negative version.
    """
    version, pos = _read_version(data, "subscription")
    version = _check_version(version, SUBSCRIPTION_VERSION, "subscription")
    decoded, _ = ConsumerProtocolSubscription.decode_from(data, pos, version)
    return Subscription(
        topics=tuple(decoded.topics),
        user_data=decoded.user_data,
        owned_partitions=tuple(
            TopicPartition(entry.topic, partition)
            for entry in decoded.owned_partitions
            for partition in entry.partitions
        ),
        generation_id=decoded.generation_id,
        rack_id=decoded.rack_id,
        group_instance_id=group_instance_id,
    )


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    """The SyncGroup assignment bytes of ``a`` at ``version`` (clamped to what we know)."""
    version = _check_version(version, ASSIGNMENT_VERSION, "assignment")
    data = ConsumerProtocolAssignment(
        assigned_partitions=[
            AssignmentTopic(topic=topic, partitions=partitions)
            for topic, partitions in _group_by_topic(a.partitions)
        ],
        user_data=a.user_data,
    )
    out = bytearray(_VERSION.pack(version))
    data.encode_into(out, version)
    return bytes(out)


def decode_assignment(data: bytes) -> Assignment:
    """Read the assignment a member got in SyncGroup; empty bytes are an empty assignment."""
    if not data:
        return Assignment(partitions=())
    version, pos = _read_version(data, "assignment")
    version = _check_version(version, ASSIGNMENT_VERSION, "assignment")
    decoded, _ = ConsumerProtocolAssignment.decode_from(data, pos, version)
    return Assignment(
        partitions=tuple(
            TopicPartition(entry.topic, partition)
            for entry in decoded.assigned_partitions
            for partition in entry.partitions
        ),
        user_data=decoded.user_data,
    )


def _read_version(data: bytes, what: str) -> tuple[int, int]:
    if len(data) < _VERSION.size:
        raise TruncatedError(f"consumer protocol {what} has no version header")
    return _VERSION.unpack_from(data, 0)[0], _VERSION.size


def _check_version(version: int, highest: int, what: str) -> int:
    if version < 0:
        raise UnsupportedVersionError(f"unsupported consumer protocol {what} version {version}")
    return min(version, highest)


def _group_by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics in order of first appearance."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())
