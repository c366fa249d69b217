"""One share group's members and assignment (KIP-932 ShareGroupHeartbeat), no I/O.

The rules are Kafka's ``GroupMetadataManager.shareGroupHeartbeat``:

- A member joins with epoch 0 and its own member id (a UUID the client made) and
  a subscription; it leaves with epoch -1; its session ends when no heartbeat
  came for ``share.session.timeout.ms``. Each of these, and a change of a
  subscription or of the subscribed topics' partitions, bumps the group epoch.
- When the group epoch passes the assignment epoch, the target assignment is
  computed again with the simple assignor (``assignor``). Share groups revoke
  nothing before moving a partition (records are locked one by one), so a
  member takes its target, and the target's epoch as its member epoch, at its
  next heartbeat.
- A heartbeat's epoch must be the member's, or the one before it (the answer
  with the new epoch may have been lost): else FENCED_MEMBER_EPOCH. A member id
  the group does not know with an epoch other than 0 is UNKNOWN_MEMBER_ID; a new
  member beyond ``group.share.max.size`` is GROUP_MAX_SIZE_REACHED.
- The answer carries the assignment when the member joined, sent its
  subscription (a full request) or its assignment changed; else null.

Topics come in as a read-out of the cluster: name -> (topic id, partition count).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence

import attrs

from kafkette.errors import (
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from kafkette.server.share.assignor import TopicPartition, assign

LEAVE_EPOCH = -1
"""The member epoch of a heartbeat that leaves the group."""


class ShareGroupState(enum.Enum):
    """A share group's state as ListGroups and ShareGroupDescribe name it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class ShareGroupConfig:
    """The share-group settings (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000
    """``group.share.session.timeout.ms`` (``share.session.timeout.ms`` per group)."""
    heartbeat_interval_ms: int = 5_000
    """``group.share.heartbeat.interval.ms`` (``share.heartbeat.interval.ms`` per group)."""
    max_size: int = 200
    """``group.share.max.size``."""


@attrs.frozen
class TopicImage:
    """What the group needs to know of a topic."""

    topic_id: uuid.UUID
    partitions: int


@attrs.define
class ShareMember:
    """One member of a share group (Kafka's ShareGroupMember)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: frozenset[TopicPartition] = frozenset()
    deadline_ms: int = 0
    """When its session ends without a heartbeat."""


@attrs.frozen
class HeartbeatAnswer:
    """A successful ShareGroupHeartbeat's answer."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, list[int]] | None
    """Partitions by topic id, or None when the member's assignment did not change."""


def check_heartbeat(
    group_id: str,
    member_id: str,
    member_epoch: int,
    rack_id: str | None,
    subscribed_topic_names: Sequence[str] | None,
) -> None:
    """The checks Kafka makes before looking at any group (INVALID_REQUEST)."""
    if not member_id:
        raise InvalidRequestError("MemberId can't be empty.")
    if not group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if rack_id is not None and not rack_id:
        raise InvalidRequestError("RackId can't be empty.")
    if member_epoch == 0:
        if not subscribed_topic_names:
            raise InvalidRequestError("SubscribedTopicNames must be set in first request.")
    elif member_epoch < LEAVE_EPOCH:
        raise InvalidRequestError("MemberEpoch is invalid.")


class ShareGroup:
    """A share group's members, epochs and target assignment."""

    def __init__(self, group_id: str, config: ShareGroupConfig | None = None) -> None:
        self.group_id = group_id
        self.config = config or ShareGroupConfig()
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self._metadata: tuple[tuple[str, uuid.UUID, int], ...] = ()

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        """Every topic name some member subscribes to."""
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        now_ms: int,
        topics: Mapping[str, TopicImage],
        *,
        subscribed_topic_names: Sequence[str] | None = None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatAnswer:
        """Serve one ShareGroupHeartbeat (epoch >= 0; epoch -1 is :meth:`leave`)."""
        check_heartbeat(self.group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
        if member_epoch == LEAVE_EPOCH:
            self.leave(member_id)
            return HeartbeatAnswer(member_id, LEAVE_EPOCH, self.config.heartbeat_interval_ms, None)
        member = self.members.get(member_id)
        if member is None:
            if len(self.members) >= self.config.max_size:
                raise GroupMaxSizeReachedError(
                    "The share group has reached its maximum capacity of "
                    f"{self.config.max_size} members."
                )
            if member_epoch != 0:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of share group {self.group_id}."
                )
            member = ShareMember(member_id)
        _check_epoch(member, member_epoch)
        changed = member_id not in self.members
        if subscribed_topic_names is not None:
            names = tuple(sorted(set(subscribed_topic_names)))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        self.members[member_id] = member
        metadata = self._metadata_of(topics)
        if changed or metadata != self._metadata:
            self.group_epoch += 1
            self._metadata = metadata
        if self.group_epoch > self.assignment_epoch:
            self._compute_target(topics)
        before = member.assignment
        if member.member_epoch != self.assignment_epoch or changed:
            if member.member_epoch != self.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = self.assignment_epoch
            member.assignment = self._filtered(member, topics)
        member.deadline_ms = now_ms + self.config.session_timeout_ms
        full = member_epoch == 0 or subscribed_topic_names is not None
        return HeartbeatAnswer(
            member_id,
            member.member_epoch,
            self.config.heartbeat_interval_ms,
            _by_topic(member.assignment) if full or member.assignment != before else None,
        )

    def leave(self, member_id: str) -> None:
        """The member leaves (epoch -1): gone, and the group epoch bumped."""
        if member_id not in self.members:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of share group {self.group_id}."
            )
        self._remove(member_id)

    def expire_sessions(self, now_ms: int) -> list[str]:
        """Remove the members whose session ended by ``now_ms``; their ids."""
        gone = sorted(m for m, member in self.members.items() if member.deadline_ms <= now_ms)
        for member_id in gone:
            self._remove(member_id)
        return gone

    def next_deadline(self) -> int | None:
        """The earliest session deadline, None without members."""
        return min((m.deadline_ms for m in self.members.values()), default=None)

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1

    def _metadata_of(
        self, topics: Mapping[str, TopicImage]
    ) -> tuple[tuple[str, uuid.UUID, int], ...]:
        return tuple(
            (name, topics[name].topic_id, topics[name].partitions)
            for name in sorted(self.subscribed_topic_names())
            if name in topics
        )

    def _compute_target(self, topics: Mapping[str, TopicImage]) -> None:
        subscriptions = {
            m.member_id: frozenset(
                topics[name].topic_id for name in m.subscribed_topic_names if name in topics
            )
            for m in self.members.values()
        }
        partitions = {image.topic_id: image.partitions for image in topics.values()}
        self.target = assign(subscriptions, partitions, self.target)
        self.assignment_epoch = self.group_epoch

    def _filtered(
        self, member: ShareMember, topics: Mapping[str, TopicImage]
    ) -> frozenset[TopicPartition]:
        ids = {topics[n].topic_id for n in member.subscribed_topic_names if n in topics}
        return frozenset(tp for tp in self.target.get(member.member_id, ()) if tp[0] in ids)


def _check_epoch(member: ShareMember, received: int) -> None:
    if received > member.member_epoch:
        raise FencedMemberEpochError(
            f"The share group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise FencedMemberEpochError(
            f"The share group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}), and it does not match "
            f"the previous member epoch ({member.previous_member_epoch}). The member must "
            "abandon all its partitions and rejoin."
        )


def _by_topic(assignment: frozenset[TopicPartition]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in sorted(assignment, key=lambda tp: (str(tp[0]), tp[1])):
        out.setdefault(topic_id, []).append(index)
    return out
