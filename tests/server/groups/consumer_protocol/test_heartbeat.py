"""ConsumerGroupHeartbeat scenarios on the coordinator, time as integers: join, partial
heartbeats, leave, session expiry, a member that does not revoke in time, static members,
an assignor change, regex subscriptions, topic changes and the member epoch checks."""

from __future__ import annotations

import pytest

from kafkette.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from kafkette.server.groups.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupState,
    HeartbeatRequest,
    MemberState,
)
from kafkette.server.groups.timer import Timed
from tests.server.groups.consumer_protocol.harness import Client, Cluster


def test_first_member_joins_and_gets_every_partition() -> None:
    """Epoch 0 joins: group epoch 1, target computed, the member at epoch 1 holding all."""
    cluster = Cluster({"a": 4})
    c1 = Client(cluster, "m1")
    response = c1.join()
    assert response.member_id == "m1"
    assert response.member_epoch == 1
    assert response.heartbeat_interval_ms == 5_000
    assert cluster.named(response.assignment) == {"a": [0, 1, 2, 3]}
    group = cluster.group()
    assert (group.group_epoch, group.assignment_epoch, group.state) == (
        1,
        1,
        ConsumerGroupState.STABLE,
    )


def test_v0_join_without_member_id_gets_one_from_the_coordinator() -> None:
    """ConsumerGroupHeartbeat v0: the coordinator names a new member."""
    cluster = Cluster({"a": 1})
    response = cluster.coordinator.heartbeat(
        0,
        HeartbeatRequest(
            group_id="g",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=("a",),
            owned={},
            api_version=0,
        ),
    )
    assert response.member_id == "generated-1"
    assert list(cluster.group().members) == ["generated-1"]


def test_second_member_gets_partitions_only_after_the_first_revokes_them() -> None:
    """Incremental reconciliation: the joiner waits (UNRELEASED_PARTITIONS) until the
    owner's heartbeat no longer lists the partitions it was asked to give up."""
    cluster = Cluster({"a": 4})
    c1, c2 = Client(cluster, "m1"), Client(cluster, "m2")
    c1.join()
    r2 = c2.join()
    assert (r2.member_epoch, cluster.named(r2.assignment)) == (2, {})
    assert cluster.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    assert cluster.group().state is ConsumerGroupState.RECONCILING

    # m1 is told to keep 0 and 1 and stays at epoch 1 until it has revoked 2 and 3.
    c1.revokes = False
    r1 = c1.heartbeat()
    assert (r1.member_epoch, cluster.named(r1.assignment)) == (1, {"a": [0, 1]})
    m1 = cluster.group().members["m1"]
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    assert cluster.named(m1.pending_revocation) == {"a": [2, 3]}

    # Still owned by m1: nothing for m2, no assignment in the answer (unchanged).
    assert c2.heartbeat().assignment is None
    assert c1.heartbeat().member_epoch == 1

    # m1 reports {0, 1}: it moves to epoch 2; then m2 gets 2 and 3.
    c1.owned = cluster.tp({"a": [0, 1]})
    r1 = c1.heartbeat()
    assert (r1.member_epoch, r1.assignment) == (2, None)
    r2 = c2.heartbeat()
    assert (r2.member_epoch, cluster.named(r2.assignment)) == (2, {"a": [2, 3]})
    group = cluster.group()
    assert group.state is ConsumerGroupState.STABLE
    assert {k[1]: v for k, v in group.partition_epochs.items()} == {0: 2, 1: 2, 2: 2, 3: 2}


def test_full_heartbeat_always_carries_the_assignment_and_partial_only_when_changed() -> None:
    """Kafka's rule for the Assignment field."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1")
    c1.join()
    assert c1.heartbeat().assignment is None
    full = c1.heartbeat(
        rebalance_timeout_ms=1000, subscribed_topic_names=("a",), owned=dict(c1.owned)
    )
    assert cluster.named(full.assignment) == {"a": [0, 1]}


def test_leave_frees_partitions_at_once_and_bumps_the_epoch() -> None:
    """Epoch -1: the member is removed; the remaining member takes its partitions."""
    cluster = Cluster({"a": 4})
    c1, c2 = Client(cluster, "m1"), Client(cluster, "m2")
    c1.join()
    c2.join()
    c1.heartbeat()
    c1.heartbeat()
    c2.heartbeat()
    assert (c1.holds(), c2.holds()) == ({"a": [0, 1]}, {"a": [2, 3]})

    response = c2.leave()
    assert (response.member_id, response.member_epoch) == ("m2", -1)
    group = cluster.group()
    assert list(group.members) == ["m1"]
    assert (group.group_epoch, group.state) == (3, ConsumerGroupState.ASSIGNING)
    r1 = c1.heartbeat()
    assert (r1.member_epoch, cluster.named(r1.assignment)) == (3, {"a": [0, 1, 2, 3]})
    with pytest.raises(UnknownMemberIdError):
        c2.heartbeat()


def test_session_expiry_removes_a_silent_member() -> None:
    """group.consumer.session.timeout.ms after its last heartbeat, a member is removed."""
    cluster = Cluster({"a": 2}, session_timeout_ms=10_000, heartbeat_interval_ms=3_000)
    c1, c2 = Client(cluster, "m1"), Client(cluster, "m2")
    c1.join()
    cluster.advance(1_000)
    c2.join()
    assert c2.last is not None and c2.last.heartbeat_interval_ms == 3_000
    assert cluster.coordinator.next_deadline_ms() == 10_000
    for _ in range(5):  # m2 keeps its session; m1 says nothing after joining
        cluster.advance(1_999)
        c2.heartbeat()
    assert cluster.now == 10_995
    assert sorted(cluster.group().members) == ["m2"]
    assert cluster.group().group_epoch == 3
    # The last of those heartbeats, after the expiry, moved m2 to epoch 3 with both.
    assert (c2.epoch, c2.holds()) == (3, {"a": [0, 1]})
    with pytest.raises(UnknownMemberIdError):
        c1.heartbeat()


def test_session_deadline_is_exact() -> None:
    """Removed at the deadline, not a millisecond before."""
    cluster = Cluster({"a": 1}, session_timeout_ms=10_000, heartbeat_interval_ms=3_000)
    Client(cluster, "m1").join()
    cluster.advance(9_999)
    assert list(cluster.group().members) == ["m1"]
    cluster.advance(1)
    assert cluster.group().members == {}
    assert cluster.group().state is ConsumerGroupState.EMPTY
    assert cluster.coordinator.next_deadline_ms() is None


def test_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    """Partitions pending revocation past the rebalance timeout: the member is fenced and
    its partitions go to the member waiting for them."""
    cluster = Cluster({"a": 2})
    stuck = Client(cluster, "m1", revokes=False, rebalance_timeout_ms=8_000)
    c2 = Client(cluster, "m2")
    stuck.join()
    c2.join()
    cluster.advance(1_000)
    stuck.heartbeat()
    assert cluster.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert cluster.group().revocation_deadlines["m1"] == (1, 9_000)
    for _ in range(3):  # heartbeats keep the session but do not stop the revocation timer
        cluster.advance(2_000)
        stuck.heartbeat()
        c2.heartbeat()
    assert cluster.now == 7_000
    assert "m1" in cluster.group().members
    assert c2.holds() == {}
    cluster.advance(1_999)
    assert "m1" in cluster.group().members
    cluster.advance(1)
    assert sorted(cluster.group().members) == ["m2"]
    r2 = c2.heartbeat()
    assert (r2.member_epoch, cluster.named(r2.assignment)) == (3, {"a": [0, 1]})
    with pytest.raises(UnknownMemberIdError):
        stuck.heartbeat()


def test_revocation_timer_is_cancelled_once_the_member_revokes() -> None:
    """A member that revokes in time is not fenced by the old timer."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1", rebalance_timeout_ms=5_000)
    c2 = Client(cluster, "m2")
    c1.join()
    c2.join()
    c1.heartbeat()
    assert "m1" in cluster.group().revocation_deadlines
    c1.heartbeat()
    assert cluster.group().revocation_deadlines == {}
    cluster.advance(5_000)
    assert sorted(cluster.group().members) == ["m1", "m2"]


def test_static_member_temporary_leave_keeps_partitions_until_replaced() -> None:
    """Epoch -2 keeps the static member's place and partitions; a new member id with its
    instance id takes them over at once, without a new group epoch."""
    cluster = Cluster({"a": 4})
    s1 = Client(cluster, "s1", instance_id="i1")
    c2 = Client(cluster, "m2")
    s1.join()
    c2.join()
    s1.heartbeat()
    s1.heartbeat()
    c2.heartbeat()
    assert (s1.holds(), c2.holds()) == ({"a": [0, 1]}, {"a": [2, 3]})
    epoch = cluster.group().group_epoch

    response = s1.leave(epoch=-2)
    assert (response.member_id, response.member_epoch) == ("s1", -2)
    group = cluster.group()
    assert group.group_epoch == epoch
    assert group.members["s1"].member_epoch == -2
    assert c2.heartbeat().assignment is None  # s1's partitions are not handed out

    # Another incarnation with a new member id and the same instance id.
    s1b = Client(cluster, "s1-again", instance_id="i1")
    response = s1b.join()
    assert (response.member_epoch, cluster.named(response.assignment)) == (epoch, {"a": [0, 1]})
    assert sorted(group.members) == ["m2", "s1-again"]
    assert group.static_members == {"i1": "s1-again"}
    assert group.group_epoch == epoch
    assert group.state is ConsumerGroupState.STABLE

    with pytest.raises(FencedInstanceIdError):
        Client(cluster, "s1", instance_id="i1", epoch=epoch).heartbeat(instance_id="i1")


def test_static_member_in_use_cannot_be_joined_again() -> None:
    """A second instance with a live member's instance id gets UNRELEASED_INSTANCE_ID."""
    cluster = Cluster({"a": 1})
    Client(cluster, "s1", instance_id="i1").join()
    with pytest.raises(UnreleasedInstanceIdError):
        Client(cluster, "s2", instance_id="i1").join()
    assert sorted(cluster.group().members) == ["s1"]


def test_static_member_that_left_for_now_expires_with_its_session() -> None:
    """A static member gone with -2 and not back within its session is removed."""
    cluster = Cluster({"a": 2}, session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    s1 = Client(cluster, "s1", instance_id="i1")
    c2 = Client(cluster, "m2")
    s1.join()
    c2.join()
    s1.heartbeat()
    s1.leave(epoch=-2)
    for _ in range(4):
        cluster.advance(2_500)
        c2.heartbeat()
    assert sorted(cluster.group().members) == ["m2"]
    assert cluster.group().static_members == {}
    assert c2.heartbeat().member_epoch == 3
    assert c2.holds() == {"a": [0, 1]}


def test_assignor_change_applies_at_the_next_target_assignment() -> None:
    """group.remote.assignor: the group uses the assignor most members ask for; a change
    alone does not bump the group epoch (as in Kafka), the next target uses it."""
    cluster = Cluster({"a": 3, "b": 3})
    m1 = Client(cluster, "m1", topics=("a", "b"), assignor="uniform")
    m2 = Client(cluster, "m2", topics=("a", "b"), assignor="range")
    m1.join()
    m2.join()
    m1.heartbeat()
    m1.heartbeat()
    m2.heartbeat()
    # One vote each: the tie goes to the first of group.consumer.assignors (uniform).
    assert cluster.coordinator.describe("g").assignor_name == "uniform"
    assert (m1.holds(), m2.holds()) == ({"a": [0, 1, 2]}, {"b": [0, 1, 2]})

    m1.heartbeat(server_assignor="range")
    assert cluster.coordinator.describe("g").assignor_name == "range"
    assert cluster.group().group_epoch == 2

    m3 = Client(cluster, "m3", topics=("a",))
    m3.join()
    target = {m: cluster.named(t) for m, t in cluster.group().target.items()}
    assert target == {
        "m1": {"a": [0], "b": [0, 1]},
        "m2": {"a": [1], "b": [2]},
        "m3": {"a": [2]},
    }


def test_unknown_assignor_in_config_order_is_the_default() -> None:
    """Without any member asking, the first of group.consumer.assignors is used."""
    cluster = Cluster({"a": 3, "b": 3}, assignors=("range", "uniform"))
    m1 = Client(cluster, "m1", topics=("a", "b"))
    m2 = Client(cluster, "m2", topics=("a", "b"))
    m1.join()
    m2.join()
    target = {m: cluster.named(t) for m, t in cluster.group().target.items()}
    assert target == {"m1": {"a": [0, 1], "b": [0, 1]}, "m2": {"a": [2], "b": [2]}}


def test_regex_subscription_picks_up_a_new_topic() -> None:
    """SubscribedTopicRegex matches whole names; a topic created later joins the
    subscription, whether the coordinator is told (topics_changed) or a heartbeat sees it."""
    cluster = Cluster({"other": 1, "orders-1x": 1})
    c1 = Client(cluster, "m1", topics=None, regex=r"orders-\d")
    response = c1.join()
    assert (response.member_epoch, cluster.named(response.assignment)) == (1, {})

    cluster.create("orders-1", 2)
    cluster.coordinator.topics_changed()
    assert cluster.group().group_epoch == 2
    response = c1.heartbeat()
    assert (response.member_epoch, cluster.named(response.assignment)) == (2, {"orders-1": [0, 1]})

    cluster.create("orders-2", 1)
    response = c1.heartbeat()
    assert response.member_epoch == 3
    assert cluster.named(response.assignment) == {"orders-1": [0, 1], "orders-2": [0]}
    assert sorted(cluster.group().subscription_metadata) == ["orders-1", "orders-2"]


def test_changing_the_subscription_bumps_the_epoch() -> None:
    """A partial heartbeat with new topic names: new target, partitions of the dropped topic
    revoked first."""
    cluster = Cluster({"a": 1, "b": 1})
    c1 = Client(cluster, "m1", topics=("a",))
    c1.join()
    response = c1.heartbeat(subscribed_topic_names=("b",))
    assert cluster.group().group_epoch == 2
    assert (response.member_epoch, cluster.named(response.assignment)) == (1, {})
    response = c1.heartbeat()
    assert (response.member_epoch, cluster.named(response.assignment)) == (2, {"b": [0]})


def test_deleted_topic_is_revoked_and_a_recreated_one_is_new() -> None:
    """Topic ids: partitions of a deleted topic are revoked; a topic recreated under the
    same name is another topic."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1")
    c1.join()
    old = cluster.topics.pop("a")
    cluster.coordinator.topics_changed()
    response = c1.heartbeat()
    assert response.assignment == {}
    assert cluster.group().members["m1"].pending_revocation == {old.topic_id: frozenset({0, 1})}
    c1.owned = {}
    c1.heartbeat()
    assert cluster.group().partition_epochs == {}


def test_epoch_ahead_or_behind_the_coordinator_is_fenced() -> None:
    """FENCED_MEMBER_EPOCH for a greater epoch, and for a smaller one that is not the
    previous epoch; the member is unchanged."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1")
    c1.join()
    with pytest.raises(FencedMemberEpochError):
        c1.heartbeat(member_epoch=2)
    Client(cluster, "m2").join()
    c1.heartbeat()
    c1.heartbeat()
    Client(cluster, "m3").join()
    c1.heartbeat()
    member = cluster.group().members["m1"]
    assert (member.member_epoch, member.previous_member_epoch) == (3, 2)
    with pytest.raises(FencedMemberEpochError):
        c1.heartbeat(member_epoch=1)
    assert cluster.group().members["m1"] == member


def test_previous_epoch_with_owned_subset_is_accepted() -> None:
    """The answer that moved the member on may have been lost: its previous epoch is
    accepted if it owns no more than it was given, otherwise fenced."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1")
    c1.join()
    c2 = Client(cluster, "m2")
    c2.join()
    c1.heartbeat()
    c1.heartbeat()
    assert (c1.epoch, c1.holds()) == (2, {"a": [0]})
    response = c1.heartbeat(member_epoch=1, owned=cluster.tp({"a": [0]}))
    assert response.member_epoch == 2
    with pytest.raises(FencedMemberEpochError):
        c1.heartbeat(member_epoch=1, owned=cluster.tp({"a": [0, 1]}))
    with pytest.raises(FencedMemberEpochError):
        c1.heartbeat(member_epoch=1, owned=None)


def test_rejoin_with_epoch_zero_starts_the_member_again() -> None:
    """A member joining again with its member id (after a fence, or a lost answer) holds
    nothing: it restarts from epoch 0 and gets its target back without a new group epoch."""
    cluster = Cluster({"a": 2})
    c1 = Client(cluster, "m1")
    c1.join()
    response = c1.join()
    assert (response.member_epoch, cluster.named(response.assignment)) == (1, {"a": [0, 1]})
    c2 = Client(cluster, "m2")
    c2.join()
    c1.heartbeat()
    c1.heartbeat()
    c2.heartbeat()
    assert (c1.epoch, c1.holds(), c2.holds()) == (2, {"a": [0]}, {"a": [1]})
    response = c1.join()
    assert (response.member_epoch, cluster.named(response.assignment)) == (2, {"a": [0]})
    assert cluster.group().group_epoch == 2
    static = Client(cluster, "s1", instance_id="i1")
    static.join()
    response = static.join()
    assert (response.member_id, response.member_epoch) == ("s1", 3)


def test_heartbeat_to_unknown_group_or_member() -> None:
    """GROUP_ID_NOT_FOUND for a group that does not exist (as Kafka: only a join creates
    one), UNKNOWN_MEMBER_ID for a member the group does not have; nothing is created."""
    cluster = Cluster({"a": 1})
    with pytest.raises(GroupIdNotFoundError):
        Client(cluster, "m1", epoch=3).heartbeat()
    with pytest.raises(GroupIdNotFoundError):
        Client(cluster, "m1").leave()
    assert cluster.coordinator.groups == {}
    Client(cluster, "m1").join()
    with pytest.raises(UnknownMemberIdError):
        Client(cluster, "nobody", epoch=1).heartbeat()
    with pytest.raises(UnknownMemberIdError):
        Client(cluster, "nobody").leave()
    with pytest.raises(UnknownMemberIdError):
        Client(cluster, "nobody", instance_id="i9").leave(epoch=-2)


def test_group_max_size() -> None:
    """GROUP_MAX_SIZE_REACHED for a new member beyond group.consumer.max.size; members
    already in keep heartbeating."""
    cluster = Cluster({"a": 2}, max_size=2)
    c1, c2 = Client(cluster, "m1"), Client(cluster, "m2")
    c1.join()
    c2.join()
    with pytest.raises(GroupMaxSizeReachedError):
        Client(cluster, "m3").join()
    assert sorted(cluster.group().members) == ["m1", "m2"]
    assert cluster.group().group_epoch == 2
    assert c1.heartbeat().member_epoch == 1


def test_heartbeat_after_the_session_deadline_is_refused_even_before_tick() -> None:
    """The group's due timers run before the heartbeat: a member whose session ended is
    gone, however late the broker's timer loop is."""
    cluster = Cluster({"a": 1}, session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    c1 = Client(cluster, "m1")
    c1.join()
    cluster.now = 10_000  # no tick
    with pytest.raises(UnknownMemberIdError):
        c1.heartbeat()
    assert cluster.group().members == {}
    assert cluster.group().group_epoch == 2


def test_delete_group_only_when_empty() -> None:
    cluster = Cluster({"a": 1})
    c1 = Client(cluster, "m1")
    c1.join()
    with pytest.raises(NonEmptyGroupError):
        cluster.coordinator.delete_group("g")
    c1.leave()
    cluster.coordinator.delete_group("g")
    assert cluster.coordinator.groups == {}
    with pytest.raises(GroupIdNotFoundError):
        cluster.coordinator.delete_group("g")


def test_coordinator_runs_under_the_broker_timer_loop() -> None:
    """It has the Timed shape group_timer_loop drives: the next deadline, then tick."""
    cluster = Cluster({"a": 2}, session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    timed: Timed = cluster.coordinator
    assert timed.next_deadline_ms() is None
    stuck = Client(cluster, "m1", revokes=False, rebalance_timeout_ms=3_000)
    stuck.join()
    cluster.now = 500
    Client(cluster, "m2").join()
    stuck.heartbeat()
    assert timed.next_deadline_ms() == 3_500  # m1's revocation, before both sessions
    timed.tick(3_500)
    assert sorted(cluster.group().members) == ["m2"]
    assert timed.next_deadline_ms() == 10_500
    with pytest.raises(TypeError, match="no clock"):
        timed.tick()
    clocked = ConsumerGroupCoordinator(
        ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000),
        lambda: cluster.topics,
        clock=lambda: 20_000,
    )
    clocked.groups["g"] = cluster.group()
    clocked.tick()
    assert cluster.group().members == {}
