"""One member's next step towards the group's target assignment (Kafka's
CurrentAssignmentBuilder), as a pure function.

Theory of operation. The group computes a target assignment at its epoch; each member
walks towards its part of it on its own heartbeats, never taking a partition another
member may still hold:

- partitions it holds that are not in its target are put *pending revocation*; the
  member stays at its epoch (UNREVOKED_PARTITIONS) until a heartbeat reports owned
  partitions without them, then moves to the next epoch;
- partitions of its target are *assigned* only once no member holds them (their
  partition epoch is gone); until then the member waits at the target epoch
  (UNRELEASED_PARTITIONS) and gets them on a later heartbeat;
- with nothing to revoke or wait for, it is STABLE at the target epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs

from kafkette.errors import FencedMemberEpochError
from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.member import Member, MemberState
from kafkette.server.groups.consumer_protocol.partitions import Assignment

PartitionEpoch = Callable[[uuid.UUID, int], int | None]
"""The epoch at which some member holds a partition, or None when no member holds it."""


def reconcile(
    member: Member,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
) -> Member:
    """The member after one step towards ``target`` (itself when nothing changes).

    ``owned`` is what the member's heartbeat reported holding, None when the heartbeat
    left it out (then the member is taken to still hold everything it was given).
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or partitions.count(owned):
        raise FencedMemberEpochError(
            "The consumer group member is in an unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _still_owns(owned: Assignment | None, revoked: Assignment) -> bool:
    return owned is None or partitions.overlaps(owned, revoked)


def _next(
    member: Member,
    epoch_if_revoking: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
) -> Member:
    kept = partitions.intersect(member.assigned, target)
    revoking = partitions.minus(member.assigned, kept)
    wanted = partitions.minus(target, kept)
    free = partitions.make(
        (topic_id, [p for p in ps if partition_epoch(topic_id, p) is None])
        for topic_id, ps in wanted.items()
    )
    unreleased = partitions.count(free) < partitions.count(wanted)

    if revoking and _still_owns(owned, revoking):
        return attrs.evolve(
            member.with_epoch(epoch_if_revoking),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
        )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return attrs.evolve(
        member.with_epoch(target_epoch),
        state=state,
        assigned=partitions.union(kept, free),
        pending_revocation={},
    )
