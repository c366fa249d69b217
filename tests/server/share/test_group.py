"""A share group's membership: ShareGroupHeartbeat's epochs, errors and assignments."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkette.errors import (
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from kafkette.server.share.group import (
    HeartbeatAnswer,
    ShareGroup,
    ShareGroupConfig,
    ShareGroupState,
    TopicImage,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"orders": TopicImage(T1, 2), "payments": TopicImage(T2, 1)}
SESSION, INTERVAL = 45_000, 5_000


def join(
    group: ShareGroup, member: str, now: int = 0, topics: list[str] | None = None
) -> HeartbeatAnswer:
    return group.heartbeat(member, 0, now, TOPICS, subscribed_topic_names=topics or ["orders"])


def test_members_joining_share_the_partitions_and_learn_their_epoch() -> None:
    group = ShareGroup("g")
    assert group.state == ShareGroupState.EMPTY
    assert join(group, "a") == HeartbeatAnswer("a", 1, INTERVAL, {T1: [0, 1]})
    assert join(group, "b") == HeartbeatAnswer("b", 2, INTERVAL, {T1: [1]})
    # a still holds its old target until its next heartbeat, which brings the new one.
    assert group.heartbeat("a", 1, 10, TOPICS) == HeartbeatAnswer("a", 2, INTERVAL, {T1: [0]})
    assert group.heartbeat("a", 2, 20, TOPICS) == HeartbeatAnswer("a", 2, INTERVAL, None)
    c = join(group, "c")
    assert c.member_epoch == 3 and c.assignment == {T1: [0]}
    assert group.heartbeat("a", 2, 30, TOPICS).assignment == {T1: [0, 1]}
    assert group.state == ShareGroupState.STABLE


def test_the_previous_epoch_is_accepted_other_epochs_are_fenced() -> None:
    group = ShareGroup("g")
    join(group, "a")
    join(group, "b")
    assert group.heartbeat("a", 1, 1, TOPICS).member_epoch == 2
    assert group.heartbeat("a", 1, 2, TOPICS).member_epoch == 2  # the answer was lost
    with pytest.raises(FencedMemberEpochError, match="greater member epoch"):
        group.heartbeat("a", 3, 3, TOPICS)
    with pytest.raises(FencedMemberEpochError, match="smaller member epoch"):
        group.heartbeat("a", 0, 3, TOPICS, subscribed_topic_names=["orders"])


def test_unknown_members_and_a_full_group_are_refused() -> None:
    group = ShareGroup("g", ShareGroupConfig(max_size=1))
    with pytest.raises(UnknownMemberIdError):
        group.heartbeat("x", 4, 0, TOPICS)
    join(group, "a")
    with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 1 members"):
        join(group, "b")
    assert list(group.members) == ["a"]


@pytest.mark.parametrize(
    ("member_id", "epoch", "rack", "topics", "message"),
    [
        ("", 0, None, ["orders"], "MemberId can't be empty"),
        ("a", 0, "", ["orders"], "RackId can't be empty"),
        ("a", 0, None, None, "SubscribedTopicNames must be set"),
        ("a", 0, None, [], "SubscribedTopicNames must be set"),
        ("a", -2, None, None, "MemberEpoch is invalid"),
    ],
)
def test_malformed_heartbeats_are_invalid_requests(
    member_id: str, epoch: int, rack: str | None, topics: list[str] | None, message: str
) -> None:
    group = ShareGroup("g")
    with pytest.raises(InvalidRequestError, match=message):
        group.heartbeat(member_id, epoch, 0, TOPICS, subscribed_topic_names=topics, rack_id=rack)
    assert group.members == {} and group.group_epoch == 0


def test_leaving_and_session_expiry_bump_the_epoch_and_free_the_partitions() -> None:
    group = ShareGroup("g")
    join(group, "a", now=0)
    join(group, "b", now=1000)
    assert group.heartbeat("a", 1, 1500, TOPICS).assignment == {T1: [0]}
    assert group.heartbeat("b", -1, 2000, TOPICS) == HeartbeatAnswer("b", -1, INTERVAL, None)
    assert group.group_epoch == 3 and list(group.members) == ["a"]
    assert group.heartbeat("a", 2, 3000, TOPICS).assignment == {T1: [0, 1]}
    assert group.next_deadline() == 3000 + SESSION
    assert group.expire_sessions(3000 + SESSION - 1) == []
    assert group.expire_sessions(3000 + SESSION) == ["a"]
    assert group.state == ShareGroupState.EMPTY and group.group_epoch == 4
    with pytest.raises(UnknownMemberIdError):
        group.heartbeat("a", -1, 0, TOPICS)


def test_a_new_subscription_or_new_partitions_reassign() -> None:
    group = ShareGroup("g")
    join(group, "a")
    answer = group.heartbeat("a", 1, 1, TOPICS, subscribed_topic_names=["orders", "payments"])
    assert answer == HeartbeatAnswer("a", 2, INTERVAL, {T1: [0, 1], T2: [0]})
    grown = {**TOPICS, "payments": TopicImage(T2, 2)}
    assert group.heartbeat("a", 2, 2, grown).assignment == {T1: [0, 1], T2: [0, 1]}
    assert group.heartbeat("a", 3, 3, grown).assignment is None
    assert group.heartbeat("a", 3, 4, grown, subscribed_topic_names=["missing"]).assignment == {}


class GroupMachine(RuleBasedStateMachine):
    """Any sequence of joins, heartbeats, leaves and expiries: every live member of
    a settled group reads its partitions, and each partition is shared evenly."""

    def __init__(self) -> None:
        super().__init__()
        self.group = ShareGroup("g", ShareGroupConfig(max_size=5))
        self.epochs: dict[str, int] = {}
        self.now = 0

    @rule(member=st.sampled_from("abcdef"))
    def heartbeat(self, member: str) -> None:
        epoch = self.epochs.get(member, 0)
        topics = ["orders"] if epoch == 0 else None
        try:
            answer = self.group.heartbeat(
                member, epoch, self.now, TOPICS, subscribed_topic_names=topics
            )
        except GroupMaxSizeReachedError:
            assert len(self.group.members) == 5 and member not in self.group.members
            return
        assert answer.member_epoch == self.group.assignment_epoch
        self.epochs[member] = answer.member_epoch

    @rule(member=st.sampled_from("abcdef"))
    def leave(self, member: str) -> None:
        if member in self.epochs:
            self.group.heartbeat(member, -1, self.now, TOPICS)
            del self.epochs[member]
        else:
            with pytest.raises(UnknownMemberIdError):
                self.group.heartbeat(member, -1, self.now, TOPICS)

    @rule(ms=st.integers(1, SESSION))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        for member in self.group.expire_sessions(self.now):
            del self.epochs[member]

    @invariant()
    def settled_members_share_evenly(self) -> None:
        assert set(self.epochs) == set(self.group.members)
        for member in list(self.group.members):
            self.group.heartbeat(member, self.epochs[member], self.now, TOPICS)
            self.epochs[member] = self.group.members[member].member_epoch
        if not self.group.members:
            return
        holders = dict.fromkeys(range(2), 0)
        for member in self.group.members.values():
            assert member.member_epoch == self.group.group_epoch
            for _, index in member.assignment:
                holders[index] += 1
        sharing = -(-len(self.group.members) // 2)
        assert holders == {0: sharing, 1: sharing}


GroupMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_membership_follows_the_rules = GroupMachine.TestCase
