"""The group engine's membership rules (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
with a fake clock and no sockets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.server.groups.group import ClassicGroupState, JoinResult, SyncResult
from kafkette.server.groups.store import MemoryGroupStore, StoredGroup, StoredMember
from tests.server.groups.harness import NOW, RANGE, REBALANCE, SESSION, Harness, subscription

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82


def test_new_member_gets_its_id_then_leads_generation_one() -> None:
    """JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED with ``client-uuid``; joining
    with that id completes the join at once (no initial delay) with the member as leader."""
    h = Harness()
    (first,) = h.join()
    assert first == JoinResult(error_code=MEMBER_ID_REQUIRED, member_id="c-1")
    assert h.group().pending_members == {"c-1": NOW + SESSION}
    (joined,) = h.join("c-1")
    assert joined == JoinResult(
        member_id="c-1",
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="c-1",
        members=(("c-1", None, b"range-meta"),),
    )
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().pending_members == {}


def test_join_before_v4_gets_a_member_id_directly() -> None:
    """Before v4 the coordinator makes the member id and adds the member in one go."""
    h = Harness()
    (joined,) = h.join(v4=False, client_id="app")
    assert (joined.error_code, joined.member_id, joined.leader_id) == (0, "app-1", "app-1")


def test_join_errors() -> None:
    """Bad session timeouts, empty group ids, unknown member ids and protocol mismatches."""
    h = Harness()
    assert h.join(session=999)[0].error_code == INVALID_SESSION_TIMEOUT
    assert h.join(session=60_001)[0].error_code == INVALID_SESSION_TIMEOUT
    assert h.join(group="")[0].error_code == INVALID_GROUP_ID
    assert h.join("ghost")[0] == JoinResult(error_code=UNKNOWN_MEMBER_ID, member_id="ghost")
    assert h.join(protocol_type="")[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=())[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert "g" not in h.engine.groups  # failed first joins leave no group behind
    h.stable_group(1)
    assert h.join(protocol_type="connect")[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[("sticky", b"")])[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join("ghost")[0].error_code == UNKNOWN_MEMBER_ID


def test_protocol_chosen_by_votes_among_common_protocols() -> None:
    """Every member votes for its most preferred protocol that all support."""
    h = Harness(group_initial_rebalance_delay_ms=100)
    a = h.join_new(protocols=[("roundrobin", b"a"), ("range", b"a"), ("sticky", b"a")])
    b = h.join_new(protocols=[("range", b"b"), ("roundrobin", b"b")])
    c = h.join_new(protocols=[("sticky", b"c"), ("roundrobin", b"c"), ("range", b"c")])
    assert a == b == c == []  # the initial delay is running
    h.advance(100)
    assert a == []  # members joined during the delay: it runs once more
    h.advance(100)
    assert [r[0].protocol_name for r in (a, b, c)] == ["roundrobin"] * 3
    assert a[0].members == (("c-1", None, b"a"), ("c-2", None, b"b"), ("c-3", None, b"c"))
    assert b[0].members == c[0].members == ()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.permutations(["range", "roundrobin", "sticky"]).flatmap(
            lambda order: st.integers(1, 3).map(lambda n: order[:n])
        ),
        min_size=1,
        max_size=5,
    )
)
def test_protocol_selection_property(preferences: list[list[str]]) -> None:
    """Whatever the preferences: a common protocol is chosen and no other common protocol
    got more first-choice votes."""
    h = Harness()
    common = set(preferences[0]).intersection(*map(set, preferences))
    for names in preferences:
        h.join(protocols=[(n, b"") for n in names], v4=False)
    group = h.group()
    if not common or len(group.members) != len(preferences):
        return
    chosen = group.select_protocol()
    votes = {
        name: sum(1 for p in preferences if next(n for n in p if n in common) == name)
        for name in common
    }
    assert chosen in common
    assert votes[chosen] == max(votes.values())


def test_second_member_triggers_a_rebalance_and_the_leader_assigns() -> None:
    """A new member makes the Stable group prepare a rebalance; the old member learns it from
    its heartbeat, rejoins, and both get generation 2; SyncGroup hands out the leader's
    assignment and the group's metadata is stored."""
    h = Harness()
    (a,) = h.stable_group(1)
    b_id = h.join()[0].member_id
    b = h.join(b_id)
    assert b == [] and h.group().state is ClassicGroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == REBALANCE_IN_PROGRESS
    assert h.sync(a, 1) == [SyncResult(error_code=REBALANCE_IN_PROGRESS)]
    (a_join,) = h.join(a)
    assert (a_join.generation_id, a_join.leader_id, b[0].generation_id, b[0].leader_id) == (
        2,
        a,
        2,
        a,
    )
    assert a_join.members == ((a, None, b"range-meta"), (b_id, None, b"range-meta"))
    assert b[0].members == ()
    assert h.heartbeat(b_id, 2) == NONE  # CompletingRebalance
    b_sync = h.sync(b_id, 2)
    assert b_sync == []
    a_sync = h.sync(a, 2, {a: b"A", b_id: b"B"})
    expected = SyncResult(protocol_type="consumer", protocol_name="range", assignment=b"B")
    assert b_sync == [expected]
    assert a_sync == [SyncResult(protocol_type="consumer", protocol_name="range", assignment=b"A")]
    assert h.group().state is ClassicGroupState.STABLE
    stored = h.store.groups["g"]
    assert stored == StoredGroup(
        protocol_type="consumer",
        generation=2,
        protocol_name="range",
        leader_id=a,
        current_state_timestamp_ms=NOW,
        members=tuple(
            StoredMember(
                member_id=m,
                group_instance_id=None,
                client_id="c",
                client_host="/10.0.0.1",
                rebalance_timeout_ms=REBALANCE,
                session_timeout_ms=SESSION,
                subscription=b"range-meta",
                assignment=assignment,
            )
            for m, assignment in ((a, b"A"), (b_id, b"B"))
        ),
    )
    # A Stable group answers SyncGroup at once with the stored assignment.
    assert h.sync(b_id, 2) == [expected]


def test_sync_and_heartbeat_errors() -> None:
    """Wrong generation, unknown member, and (v5) a protocol type or name that differs."""
    h = Harness()
    a, b = h.stable_group(2)
    assert h.sync(a, 1) == [SyncResult(error_code=ILLEGAL_GENERATION)]
    assert h.sync("ghost", 2) == [SyncResult(error_code=UNKNOWN_MEMBER_ID)]
    assert h.sync(a, 2, group="other") == [SyncResult(error_code=UNKNOWN_MEMBER_ID)]
    assert h.sync(a, 2, protocol_type="connect")[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, 2, protocol_name="sticky")[0].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, 2, protocol_type="consumer", protocol_name="range")[0].error_code == NONE
    assert h.heartbeat(a, 1) == ILLEGAL_GENERATION
    assert h.heartbeat("ghost", 2) == UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 2, group="other") == UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 2, group="") == INVALID_GROUP_ID
    assert h.heartbeat(b, 2) == NONE


def test_rejoin_in_stable_group() -> None:
    """A follower rejoining with the same metadata gets the current generation back without a
    rebalance; the leader rejoining, or a follower with new metadata, starts one."""
    h = Harness()
    a, b = h.stable_group(2)
    (again,) = h.join(b)
    assert (again.error_code, again.generation_id, again.leader_id, again.members) == (
        0,
        2,
        a,
        (),
    )
    assert h.group().state is ClassicGroupState.STABLE
    assert h.join(b, protocols=[("range", b"new")]) == []
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    h2 = Harness()
    a, b = h2.stable_group(2)
    assert h2.join(a) == []
    assert h2.group().state is ClassicGroupState.PREPARING_REBALANCE


def test_session_expiry_removes_the_silent_member() -> None:
    """A member without heartbeats for its session timeout is removed and the others
    rebalance without it."""
    h = Harness()
    a, b = h.stable_group(2)
    h.advance(SESSION - 1)
    assert h.heartbeat(a, 2) == NONE
    assert h.group().has(b)
    h.advance(1)
    assert not h.group().has(b)
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, 2) == UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 2) == REBALANCE_IN_PROGRESS
    (rejoined,) = h.join(a)
    assert (rejoined.generation_id, rejoined.members) == (3, ((a, None, b"range-meta"),))


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    """The join phase ends after the rebalance timeout; members that did not rejoin (even if
    they heartbeat) are out, and the new generation goes on without them."""
    h = Harness()
    a, b = h.stable_group(2)
    c = h.join_new()
    assert c == []
    a_join = h.join(a)
    for _ in range(REBALANCE // 5_000 - 1):
        h.advance(5_000)
        assert h.heartbeat(b, 2) == REBALANCE_IN_PROGRESS
    assert a_join == []
    h.advance(5_000)
    assert [r.generation_id for r in a_join + c] == [3, 3]
    assert [m for m, _, _ in a_join[0].members] == [a, "c-3"]
    assert h.heartbeat(b, 3) == UNKNOWN_MEMBER_ID


def test_initial_delay_waits_and_extends_for_new_members() -> None:
    """A new group waits group.initial.rebalance.delay.ms, again for each further delay in
    which members joined, never past the rebalance timeout."""
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    a = h.join_new(rebalance=7_000)
    h.advance(2_000)
    b = h.join_new(rebalance=7_000)
    h.advance(1_000)
    assert a == b == []  # b joined during the delay: wait another 3 s
    h.advance(2_999)
    assert a == []
    c = h.join_new(rebalance=7_000)
    h.advance(1)  # at 6 s: 1 s of the 7 s rebalance timeout left
    assert a == []
    h.advance(999)
    assert a == []
    h.advance(1)
    assert [r[0].generation_id for r in (a, b, c)] == [1, 1, 1]

    quiet = Harness(group_initial_rebalance_delay_ms=3_000)
    alone = quiet.join_new()
    quiet.advance(2_999)
    assert alone == []
    quiet.advance(1)
    assert alone[0].generation_id == 1


def test_members_that_do_not_sync_in_time_are_removed() -> None:
    """After the join phase, members must send SyncGroup within the rebalance timeout."""
    h = Harness()
    a, b = h.stable_group(2)
    h.join_new()
    h.join(a)
    h.join(b)
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.sync(a, 3)[0].error_code == NONE  # the leader's sync makes the group Stable
    assert h.sync(b, 3)[0].error_code == NONE
    for _ in range(REBALANCE // 5_000):
        h.advance(5_000)
        for member in (a, b):
            assert h.heartbeat(member, 3) in (NONE, REBALANCE_IN_PROGRESS)
    assert list(h.group().members) == [a, b]  # c-3 never synced
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE


def test_leave_group() -> None:
    """Members leave one by one: a rebalance each time, and the group is Empty (stored with
    the next generation) once the last one is gone."""
    h = Harness()
    a, b = h.stable_group(2)
    assert h.engine.leave(h.now, "g", [(b, None), ("ghost", None)]) == (
        NONE,
        [NONE, UNKNOWN_MEMBER_ID],
    )
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    (a_join,) = h.join(a)
    assert a_join.generation_id == 3
    h.sync(a, 3, {a: b"all"})
    assert h.engine.leave(h.now, "g", [(a, None)]) == (NONE, [NONE])
    assert (h.group().state, h.group().generation_id) == (ClassicGroupState.EMPTY, 4)
    assert h.store.groups["g"] == StoredGroup(
        protocol_type="consumer",
        generation=4,
        protocol_name=None,
        leader_id=None,
        current_state_timestamp_ms=NOW,
    )
    assert h.engine.leave(h.now, "nope", [(a, None)]) == (NONE, [UNKNOWN_MEMBER_ID])
    assert h.engine.leave(h.now, "", [(a, None)]) == (INVALID_GROUP_ID, [])


def test_leaving_while_waiting_for_join_answers_the_join() -> None:
    """A member removed while its JoinGroup waits gets UNKNOWN_MEMBER_ID for it."""
    h = Harness()
    _, b = h.stable_group(2)
    b_join = h.join(b, protocols=[("range", b"changed")])
    assert b_join == []
    h.engine.leave(h.now, "g", [(b, None)])
    assert b_join == [JoinResult(error_code=UNKNOWN_MEMBER_ID, member_id="")]


def test_pending_member_expires_after_its_session() -> None:
    """A member id given with MEMBER_ID_REQUIRED but never used lapses."""
    h = Harness()
    (a,) = h.stable_group(1)
    pending = h.join()[0].member_id
    h.advance(SESSION - 1)
    assert h.heartbeat(a, 1) == NONE
    h.advance(1)
    assert h.group().pending_members == {}
    assert h.join(pending)[0].error_code == UNKNOWN_MEMBER_ID


def test_static_member_restart_keeps_its_assignment() -> None:
    """KIP-345: a known group.instance.id joining without member id takes a new member id and
    the old one is fenced; the Stable group does not rebalance, and its SyncGroup returns
    the assignment it had. From v9 the returning leader is told to skip the assignment."""
    h = Harness()
    (s1,) = h.join(instance="i1")
    assert (s1.error_code, s1.member_id, s1.leader_id) == (0, "i1-1", "i1-1")
    h.sync("i1-1", 1, {"i1-1": b"P0"}, instance="i1")
    (s2,) = h.join(instance="i1", client_id="c-new")
    assert s2 == JoinResult(
        member_id="i1-2",
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="i1-2",
        skip_assignment=True,
        members=(("i1-2", "i1", b"range-meta"),),
    )
    assert h.group().state is ClassicGroupState.STABLE
    assert h.heartbeat("i1-1", 1, instance="i1") == FENCED_INSTANCE_ID
    assert h.sync("i1-1", 1, instance="i1") == [SyncResult(error_code=FENCED_INSTANCE_ID)]
    assert h.join("i1-1", instance="i1")[0].error_code == FENCED_INSTANCE_ID
    assert h.sync("i1-2", 1, instance="i1")[0].assignment == b"P0"
    assert [m.member_id for m in h.store.groups["g"].members] == ["i1-2"]
    assert h.store.groups["g"].members[0].assignment == b"P0"
    # Before v9 the leader is given the old leader id, so it does not assign.
    (s3,) = h.join(instance="i1", v9=False)
    assert (s3.member_id, s3.leader_id, s3.skip_assignment, s3.members) == (
        "i1-3",
        "i1-2",
        False,
        (),
    )


def test_static_member_takeover_reverted_when_the_store_fails() -> None:
    """If the new member id cannot be stored, the old one stays and the new instance gets
    COORDINATOR_NOT_AVAILABLE (Kafka reverts the replacement the same way)."""
    h = Harness()
    h.join(instance="i1")
    h.sync("i1-1", 1, {"i1-1": b"P0"}, instance="i1")

    class FullDisk(MemoryGroupStore):
        def write_group(self, group_id: str, group: StoredGroup | None) -> None:
            raise OSError("disk full")

    h.engine.store = FullDisk()
    (failed,) = h.join(instance="i1", protocols=[("range", b"other")])
    assert failed == JoinResult(
        error_code=COORDINATOR_NOT_AVAILABLE,
        member_id="",
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="i1-1",
    )
    assert h.group().static_members == {"i1": "i1-1"}
    assert h.group().members["i1-1"].protocols == list(RANGE)
    assert h.heartbeat("i1-1", 1, instance="i1") == NONE


def test_static_member_with_another_protocol_triggers_a_rebalance() -> None:
    """When the restarted static member would change the chosen protocol, the group rebalances."""
    h = Harness()
    h.join(instance="i1", protocols=[("range", b""), ("sticky", b"")])
    h.sync("i1-1", 1, instance="i1")
    (rejoined,) = h.join(instance="i1", protocols=[("sticky", b"")])
    assert (rejoined.member_id, rejoined.generation_id, rejoined.protocol_name) == (
        "i1-2",
        2,
        "sticky",
    )
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE


def test_static_member_duplicate_is_fenced_while_waiting() -> None:
    """A second instance with the same id joining while the first waits in JoinGroup fences
    the first's request."""
    h = Harness()
    h.stable_group(2)
    first = h.join(instance="i1")
    assert first == []  # joining the rebalance it started
    second = h.join(instance="i1")
    assert first == [JoinResult(error_code=FENCED_INSTANCE_ID, member_id="i1-3")]
    assert second == []
    assert h.group().static_members == {"i1": "i1-4"}


def test_static_member_kept_through_a_rebalance_it_missed() -> None:
    """A static member that does not rejoin in time stays a member (until its session ends)."""
    h = Harness()
    (d,) = h.stable_group(1)
    s = h.join(instance="i1", session=60_000)
    h.join(d)
    h.sync(d, 2)
    assert s[0].generation_id == 2
    h.join_new()
    d_join = h.join(d)
    h.advance(REBALANCE)
    assert d_join[0].generation_id == 3
    assert "i1-2" in h.group().members  # not rejoined, still a member
    assert h.engine.leave(h.now, "g", [("", "i1")]) == (NONE, [NONE])
    assert "i1-2" not in h.group().members
    assert h.engine.leave(h.now, "g", [("", "i1")]) == (NONE, [UNKNOWN_MEMBER_ID])
    assert h.engine.leave(h.now, "g", [("x", "nope"), (d, "i9")]) == (
        NONE,
        [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID],  # d exists, but not as instance i9
    )


def test_subscribed_topics_from_consumer_protocol_metadata() -> None:
    """The group knows which topics its members consume from their subscriptions."""
    h = Harness()
    h.join(v4=False, protocols=[("range", subscription("t1", "t2"))])
    h.join(v4=False, protocols=[("range", subscription("t3"))])
    assert h.group().subscribed_topics == frozenset({"t1", "t2"})  # generation 1's, until the next
    h.join("c-1", protocols=[("range", subscription("t1", "t2"))])
    assert h.group().subscribed_topics == frozenset({"t1", "t2", "t3"})
