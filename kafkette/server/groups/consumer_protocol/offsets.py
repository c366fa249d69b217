"""Offset commits and fetches of consumer-type groups checked against member epochs."""

from __future__ import annotations

from kafkette.errors import (
    IllegalGenerationError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup

MIN_COMMIT_VERSION = 9
"""The first OffsetCommit version a member of the consumer protocol may use."""


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    *,
    api_version: int,
    transactional: bool = False,
) -> None:
    """Raise Kafka's error for an OffsetCommit the group must refuse (Kafka's
    ConsumerGroup.validateOffsetCommit): an unknown member (UNKNOWN_MEMBER_ID), a
    non-transactional commit below OffsetCommit v9 from a member of the consumer protocol
    (UNSUPPORTED_VERSION; a classic member commits with any version), or an epoch that is
    not the member's (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member). A
    negative epoch commits without a member (an admin client, or a consumer with manual
    assignment) and is accepted while the group has no members."""
    if member_epoch < 0 and not group.members:
        return
    member = group.members.get(member_id)
    if member is None:
        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
    if not transactional and not member.uses_classic_protocol and api_version < MIN_COMMIT_VERSION:
        raise UnsupportedVersionError(
            f"OffsetCommit version {MIN_COMMIT_VERSION} or above must be used "
            "by members using the consumer group protocol"
        )
    _check(member_epoch, member.member_epoch, classic=member.uses_classic_protocol)


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    """Raise Kafka's error for an OffsetFetch naming a member (OffsetFetch v9+): an unknown
    member or a stale epoch. Without a member id and with a negative epoch, always accepted."""
    if member_id is None and member_epoch < 0:
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
    _check(member_epoch, member.member_epoch, classic=member.uses_classic_protocol)


def _check(received: int, expected: int, *, classic: bool) -> None:
    if received != expected and classic:
        raise IllegalGenerationError(
            f"The received generation id {received} does not match the expected member "
            f"epoch {expected}."
        )
    if received != expected:
        raise StaleMemberEpochError(
            f"The received member epoch {received} does not match the expected member "
            f"epoch {expected}."
        )
