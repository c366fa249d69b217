"""A member's next step towards its target (Kafka's CurrentAssignmentBuilder), state by state."""

from __future__ import annotations

import uuid

import pytest

from kafkette.errors import FencedMemberEpochError
from kafkette.server.groups.consumer_protocol import Member, MemberState
from kafkette.server.groups.consumer_protocol.partitions import Assignment, make
from kafkette.server.groups.consumer_protocol.reconciliation import PartitionEpoch, reconcile

A = uuid.UUID(int=0xA)
B = uuid.UUID(int=0xB)


def tp(a: list[int] | None = None, b: list[int] | None = None) -> Assignment:
    return make([(A, a or []), (B, b or [])])


def free(topic_id: uuid.UUID, partition: int) -> int | None:
    return None


def held_by_others(*held: tuple[uuid.UUID, int]) -> PartitionEpoch:
    return lambda topic_id, partition: 7 if (topic_id, partition) in held else None


def stable(epoch: int, assigned: Assignment) -> Member:
    return Member(
        member_id="m", member_epoch=epoch, previous_member_epoch=epoch - 1, assigned=assigned
    )


def test_stable_at_target_epoch_is_unchanged() -> None:
    member = stable(3, tp([0]))
    assert reconcile(member, 3, tp([0, 1]), free, None) is member


def test_stable_member_gets_free_partitions_at_the_target_epoch() -> None:
    member = stable(3, tp([0]))
    after = reconcile(member, 5, tp([0, 1], [2]), free, tp([0]))
    assert after == Member(
        member_id="m",
        member_epoch=5,
        previous_member_epoch=3,
        state=MemberState.STABLE,
        assigned=tp([0, 1], [2]),
    )


def test_partitions_to_revoke_keep_the_epoch_until_acknowledged() -> None:
    member = stable(3, tp([0, 1], [0]))
    after = reconcile(member, 5, tp([0, 2]), free, tp([0, 1], [0]))
    assert after.state is MemberState.UNREVOKED_PARTITIONS
    assert (after.member_epoch, after.previous_member_epoch) == (3, 3)
    assert after.assigned == tp([0])
    assert after.pending_revocation == tp([1], [0])

    # Still reported: nothing moves.
    assert reconcile(after, 5, tp([0, 2]), free, tp([0, 1])) is after
    assert reconcile(after, 5, tp([0, 2]), free, None) is after
    # Reported gone: next epoch, and the new partition (free) is added.
    done = reconcile(after, 5, tp([0, 2]), free, tp([0]))
    assert done.state is MemberState.STABLE
    assert (done.member_epoch, done.previous_member_epoch) == (5, 3)
    assert (done.assigned, done.pending_revocation) == (tp([0, 2]), {})


def test_revocation_already_done_in_the_same_heartbeat_moves_on_at_once() -> None:
    """Partitions to revoke that the heartbeat no longer reports need no extra round."""
    member = stable(3, tp([0, 1]))
    after = reconcile(member, 4, tp([0]), free, tp([0]))
    assert (after.state, after.member_epoch, after.assigned) == (MemberState.STABLE, 4, tp([0]))


def test_partitions_held_by_others_are_unreleased() -> None:
    member = stable(3, tp([0]))
    others = held_by_others((A, 1))
    after = reconcile(member, 4, tp([0, 1, 2]), others, tp([0]))
    assert after.state is MemberState.UNRELEASED_PARTITIONS
    assert (after.member_epoch, after.assigned) == (4, tp([0, 2]))
    # Released later: the next heartbeat takes it.
    later = reconcile(after, 4, tp([0, 1, 2]), free, tp([0, 2]))
    assert (later.state, later.member_epoch, later.assigned) == (
        MemberState.STABLE,
        4,
        tp([0, 1, 2]),
    )


def test_unknown_state_fences_a_member_that_still_holds_partitions() -> None:
    member = Member(member_id="m", member_epoch=3, state=MemberState.UNKNOWN, assigned=tp([0]))
    with pytest.raises(FencedMemberEpochError):
        reconcile(member, 4, tp([0]), free, tp([0]))
    with pytest.raises(FencedMemberEpochError):
        reconcile(member, 4, tp([0]), free, None)
    after = reconcile(member, 4, tp([0]), free, {})
    assert (after.state, after.member_epoch, after.assigned) == (MemberState.STABLE, 4, tp([0]))
