"""The consumer protocol embedded in the classic group APIs, as the broker reads and writes
it for classic members of a consumer group: the subscription a member puts in JoinGroup,
the assignment it gets back in SyncGroup.

Both are an int16 version followed by the ConsumerProtocolSubscription (or
ConsumerProtocolAssignment) struct at that version; bytes of a version newer than ours are
read with our highest (the format only grows at the end), as Java's ConsumerProtocol does.
Topics are named here and keyed by topic id in the group: topics the image does not know
are left out, as Kafka's ``toTopicPartitionMap`` does.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkette.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignmentTopic,
)
from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.topics import TopicInfo

_VERSION = struct.Struct(">h")


class MalformedProtocolError(ValueError):
    """Subscription or assignment bytes that do not parse."""


@attrs.frozen(kw_only=True)
class EmbeddedSubscription:
    """A classic member's ConsumerProtocolSubscription."""

    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    rack_id: str | None = None


def _version(data: bytes) -> int:
    if len(data) < _VERSION.size:
        raise MalformedProtocolError("no version header")
    version: int = _VERSION.unpack_from(data, 0)[0]
    if version < 0:
        raise MalformedProtocolError(f"version {version}")
    return version


def version_of(data: bytes) -> int:
    """The version of consumer protocol bytes (0 when they do not say)."""
    try:
        return _version(data)
    except MalformedProtocolError:
        return 0


def parse_subscription(data: bytes) -> EmbeddedSubscription:
    """Read a ConsumerProtocolSubscription; :class:`MalformedProtocolError` if it does not
    parse."""
    version = _version(data)
    try:
        decoded: Any
        decoded, _ = ConsumerProtocolSubscription.decode_from(
            data, _VERSION.size, min(version, ConsumerProtocolSubscription.VALID_VERSIONS[1])
        )
    except (ProtocolError, ValueError, struct.error) as exc:
        raise MalformedProtocolError(str(exc)) from None
    return EmbeddedSubscription(
        version=version,
        topics=tuple(decoded.topics),
        owned=tuple((t.topic, tuple(t.partitions)) for t in decoded.owned_partitions),
        rack_id=decoded.rack_id,
    )


def parse_assignment(data: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Read a ConsumerProtocolAssignment's partitions by topic name (empty bytes: none)."""
    if not data:
        return ()
    version = _version(data)
    try:
        decoded: Any
        decoded, _ = ConsumerProtocolAssignment.decode_from(
            data, _VERSION.size, min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1])
        )
    except (ProtocolError, ValueError, struct.error) as exc:
        raise MalformedProtocolError(str(exc)) from None
    return tuple((t.topic, tuple(t.partitions)) for t in decoded.assigned_partitions)


def by_topic_id(
    named: tuple[tuple[str, tuple[int, ...]], ...], topics: Mapping[str, TopicInfo]
) -> dict[uuid.UUID, frozenset[int]]:
    """Partitions by topic name as an :data:`Assignment` keyed by topic id; unknown topics
    and partitions out of range are left out."""
    return partitions.make(
        (topics[name].topic_id, [p for p in ps if 0 <= p < topics[name].partitions])
        for name, ps in named
        if name in topics
    )


def encode_assignment(
    assignment: Assignment, topics: Mapping[str, TopicInfo], version: int
) -> bytes:
    """ConsumerProtocolAssignment bytes at ``version`` (clamped to what we know) naming the
    topics of ``assignment``; a topic the image no longer has is left out."""
    version = min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1])
    names = {info.topic_id: name for name, info in topics.items()}
    data = ConsumerProtocolAssignment(
        assigned_partitions=[
            AssignmentTopic(topic=names[topic_id], partitions=sorted(assignment[topic_id]))
            for topic_id in sorted(assignment, key=lambda t: names.get(t, ""))
            if topic_id in names
        ],
    )
    out = bytearray(_VERSION.pack(version))
    data.encode_into(out, version)
    return bytes(out)
