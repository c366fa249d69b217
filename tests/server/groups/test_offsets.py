"""The group engine's offsets and administration: OffsetCommit/Fetch/Delete, expiry
(KIP-211), ListGroups, DescribeGroups, DeleteGroups, and restoring from the store."""

from __future__ import annotations

from kafkette.server.groups.engine import GroupEngine
from kafkette.server.groups.group import ClassicGroupState
from kafkette.server.groups.offsets import OFFSETS_RETENTION_CHECK_INTERVAL_MS
from kafkette.server.groups.queries import DEAD_GROUP, GroupOverview, GroupSummary, MemberSummary
from kafkette.server.groups.store import CommittedOffset
from tests.server.groups.harness import NOW, SESSION, Harness, subscription

NONE = 0
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
OFFSET_METADATA_TOO_LARGE = 12
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86

RETENTION_MS = 60_000


def offset(value: int, at: int = NOW, metadata: str = "") -> CommittedOffset:
    return CommittedOffset(offset=value, metadata=metadata, commit_timestamp_ms=at)


def test_simple_commit_creates_an_empty_group() -> None:
    """Generation -1 and no member id: a standalone consumer's commit, fine while the group
    has no members; the group exists (Empty, no protocol) to hold the offsets."""
    h = Harness()
    assert h.commit({("t", 0): 5, ("t", 1): 7}) == {("t", 0): NONE, ("t", 1): NONE}
    group = h.group()
    assert (group.state, group.protocol_type) == (ClassicGroupState.EMPTY, None)
    assert h.store.offsets["g"] == {("t", 0): offset(5), ("t", 1): offset(7)}
    assert h.engine.fetch_offsets("g", [("t", 1), ("t", 9)]) == {
        ("t", 1): offset(7),
        ("t", 9): None,
    }
    assert h.engine.fetch_offsets("g", None) == {("t", 0): offset(5), ("t", 1): offset(7)}
    assert h.engine.fetch_offsets("nope", [("t", 0)]) == {("t", 0): None}
    assert h.engine.fetch_offsets("nope", None) == {}


def test_commit_checks_membership_and_generation() -> None:
    """Members commit with their generation; strangers and old generations are refused."""
    h = Harness()
    a, b = h.stable_group(2)
    key = ("t", 0)
    assert h.commit({key: 1}) == {key: UNKNOWN_MEMBER_ID}  # simple commit, group has members
    assert h.commit({key: 1}, member_id="ghost", generation=2) == {key: UNKNOWN_MEMBER_ID}
    assert h.commit({key: 1}, member_id=a, generation=1) == {key: ILLEGAL_GENERATION}
    assert h.commit({key: 1}, member_id=a, generation=2) == {key: NONE}
    assert h.commit({key: 1}, group="new", member_id=a, generation=3) == {key: ILLEGAL_GENERATION}
    assert "new" not in h.engine.groups
    # Generation -1 on an Empty (or new) group passes whoever sends it, as an admin's commit.
    assert h.commit({key: 1}, group="new", member_id=a, instance="i") == {key: NONE}
    assert h.engine.groups["new"].state is ClassicGroupState.EMPTY
    # PreparingRebalance still takes commits; CompletingRebalance does not.
    h.join_new()
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    assert h.commit({key: 2}, member_id=b, generation=2) == {key: NONE}
    h.join(a)
    h.join(b)
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.commit({key: 3}, member_id=b, generation=3) == {key: REBALANCE_IN_PROGRESS}
    assert h.engine.fetch_offsets("g", [key]) == {key: offset(2)}


def test_commit_keeps_the_session_alive() -> None:
    """A member's commit counts as a heartbeat."""
    h = Harness()
    (a,) = h.stable_group(1)
    h.advance(SESSION - 1)
    assert h.commit({("t", 0): 1}, member_id=a, generation=1) == {("t", 0): NONE}
    h.advance(SESSION - 1)
    assert h.group().has(a)


def test_commit_by_a_fenced_static_member() -> None:
    """A static member's old member id is fenced on commit too."""
    h = Harness()
    h.join(instance="i1")
    h.sync("i1-1", 1, instance="i1")
    h.join(instance="i1")
    assert h.commit({("t", 0): 1}, member_id="i1-1", instance="i1", generation=1) == {
        ("t", 0): FENCED_INSTANCE_ID
    }
    assert h.commit({("t", 0): 1}, member_id="i1-2", instance="i1", generation=1) == {
        ("t", 0): NONE
    }


def test_metadata_over_4096_bytes_is_refused_per_partition() -> None:
    """offset.metadata.max.bytes: the partition is refused, the others of the request pass."""
    h = Harness()
    big = h.engine.commit(
        h.now,
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets={
            ("t", 0): offset(1, metadata="x" * 4097),
            ("t", 1): offset(2, metadata="y" * 4096),
        },
    )
    assert big == {("t", 0): OFFSET_METADATA_TOO_LARGE, ("t", 1): NONE}
    assert h.engine.fetch_offsets("g", None) == {("t", 1): offset(2, metadata="y" * 4096)}


def test_delete_offsets() -> None:
    """OffsetDelete: any offset of an Empty group; of an active consumer group only those of
    topics no member subscribes to; the last offset of an Empty group takes the group."""
    h = Harness()
    h.join(v4=False, protocols=[("range", subscription("t1"))])
    h.sync("c-1", 1)
    assert h.commit({("t1", 0): 1, ("t2", 0): 2}, member_id="c-1", generation=1) == {
        ("t1", 0): NONE,
        ("t2", 0): NONE,
    }
    assert h.engine.delete_offsets(h.now, "g", [("t1", 0), ("t2", 0)]) == (
        NONE,
        {("t1", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("t2", 0): NONE},
    )
    assert h.store.offsets["g"] == {("t1", 0): offset(1)}
    assert h.engine.delete_offsets(h.now, "nope", [("t1", 0)]) == (GROUP_ID_NOT_FOUND, {})

    h.engine.leave(h.now, "g", [("c-1", None)])
    assert h.engine.delete_offsets(h.now, "g", [("t1", 0), ("t1", 5)]) == (
        NONE,
        {("t1", 0): NONE, ("t1", 5): NONE},
    )
    assert "g" not in h.engine.groups
    assert "g" not in h.store.groups and "g" not in h.store.offsets


def test_delete_offsets_of_a_group_with_another_protocol_type() -> None:
    """A non-consumer group with members: NON_EMPTY_GROUP."""
    h = Harness()
    h.join(v4=False, protocol_type="connect")
    assert h.engine.delete_offsets(h.now, "g", [("t", 0)]) == (NON_EMPTY_GROUP, {})


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    """KIP-211: counted from when the group became Empty, not from the commit; the group goes
    with its last offset, and the store gets tombstones."""
    h = Harness(offsets_retention_minutes=1)
    h.join(v4=False, session=60_000)
    h.sync("c-1", 1)
    h.commit({("t", 0): 3}, member_id="c-1", generation=1)
    for _ in range(11):
        h.advance(50_000)
        assert h.heartbeat("c-1", 1) == NONE
    h.advance(40_000)
    h.engine.leave(h.now, "g", [("c-1", None)])
    assert (h.group().state, h.group().state_timestamp_ms) == (
        ClassicGroupState.EMPTY,
        NOW + 590_000,
    )
    h.advance(10_000)  # the check at 600 s: the offset is 600 s old, but Empty only 10 s
    assert h.engine.fetch_offsets("g", None) == {("t", 0): offset(3)}
    h.advance(OFFSETS_RETENTION_CHECK_INTERVAL_MS)
    assert "g" not in h.engine.groups
    assert "g" not in h.store.offsets and "g" not in h.store.groups


def test_offsets_of_a_stable_group_expire_only_for_unsubscribed_topics() -> None:
    """In a Stable consumer group, offsets of subscribed topics never expire; others do,
    counted from their commit."""
    h = Harness(offsets_retention_minutes=1)
    h.join(v4=False, protocols=[("range", subscription("t1"))], session=60_000)
    h.sync("c-1", 1)
    h.commit({("t1", 0): 1, ("t2", 0): 2}, member_id="c-1", generation=1)
    for _ in range(OFFSETS_RETENTION_CHECK_INTERVAL_MS // 30_000):
        h.advance(30_000)
        assert h.heartbeat("c-1", 1) == NONE
    assert h.engine.fetch_offsets("g", None) == {("t1", 0): offset(1)}


def test_offsets_committed_without_a_group_expire_from_their_commit() -> None:
    """A group that only holds a standalone consumer's offsets: each offset expires
    offsets.retention.minutes after its commit; an explicit retention (v2-4) wins."""
    h = Harness(offsets_retention_minutes=15)
    h.commit({("t", 0): 1})
    h.advance(9 * 60_000)
    h.commit({("t", 1): 2})
    h.engine.commit(
        h.now,
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets={
            ("t", 2): CommittedOffset(
                offset=3, commit_timestamp_ms=h.now, expire_timestamp_ms=h.now + 60_000
            )
        },
    )
    h.advance(60_000)  # the 600 s check: nothing is 15 min old; t-2's retention is over
    assert sorted(h.engine.fetch_offsets("g", None)) == [("t", 0), ("t", 1)]
    h.advance(OFFSETS_RETENTION_CHECK_INTERVAL_MS)  # 1200 s: t-0 is 20 min old
    assert sorted(h.engine.fetch_offsets("g", None)) == [("t", 1)]
    h.advance(OFFSETS_RETENTION_CHECK_INTERVAL_MS)  # 1800 s: t-1 is 20 min old
    assert "g" not in h.engine.groups


def test_list_describe_and_delete_groups() -> None:
    """ListGroups with state and type filters, DescribeGroups (metadata only when Stable,
    unknown groups Dead), DeleteGroups (Empty groups only)."""
    h = Harness()
    a, b = h.stable_group(2)
    h.commit({("t", 0): 1}, group="offsets-only")
    h.join_new(group="joining")
    assert h.engine.list_groups() == [
        GroupOverview("g", "consumer", "Stable"),
        GroupOverview("offsets-only", "", "Empty"),
        GroupOverview("joining", "consumer", "CompletingRebalance"),
    ]
    assert h.engine.list_groups(states=["STABLE", "empty"]) == [
        GroupOverview("g", "consumer", "Stable"),
        GroupOverview("offsets-only", "", "Empty"),
    ]
    assert h.engine.list_groups(types=["Classic"]) == h.engine.list_groups()
    assert h.engine.list_groups(types=["consumer"]) == []

    assert h.engine.describe("g") == GroupSummary(
        "Stable",
        "consumer",
        "range",
        tuple(MemberSummary(m, None, "c", "/10.0.0.1", b"range-meta", m.encode()) for m in (a, b)),
    )
    assert h.engine.describe("joining") == GroupSummary(
        "CompletingRebalance",
        "consumer",
        "",
        (MemberSummary("c-3", None, "c", "/10.0.0.1", b"", b""),),
    )
    assert h.engine.describe("nope") == DEAD_GROUP == GroupSummary("Dead", "", "", ())

    assert h.engine.delete_groups(h.now, ["g", "offsets-only", "nope"]) == {
        "g": NON_EMPTY_GROUP,
        "offsets-only": NONE,
        "nope": GROUP_ID_NOT_FOUND,
    }
    assert "offsets-only" not in h.engine.groups
    assert "offsets-only" not in h.store.offsets


def test_restore_from_the_store() -> None:
    """A new engine over the same store has the groups back: Stable members keep their
    generation and assignment with a fresh session each; offsets are there."""
    h = Harness()
    a, b = h.stable_group(2)
    h.commit({("t", 0): 9}, member_id=a, generation=2)
    h.commit({("u", 0): 4}, group="simple")
    later = NOW + 1_000_000
    engine = GroupEngine(h.config, h.store)
    engine.restore(h.store.load(), later)
    group = engine.groups["g"]
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (
        ClassicGroupState.STABLE,
        2,
        a,
        "range",
    )
    assert [(m.member_id, m.assignment) for m in group.members.values()] == [
        (a, a.encode()),
        (b, b.encode()),
    ]
    assert engine.heartbeat(later, group_id="g", generation_id=2, member_id=a) == NONE
    assert engine.fetch_offsets("g", None) == {("t", 0): offset(9)}
    assert engine.fetch_offsets("simple", None) == {("u", 0): offset(4)}
    assert engine.groups["simple"].state is ClassicGroupState.EMPTY
    engine.tick(later + SESSION)
    assert list(engine.groups["g"].members) == []  # neither heartbeats: both expire
    assert engine.groups["g"].state is ClassicGroupState.EMPTY


def test_offsets_of_deleted_topics_go() -> None:
    """Offsets of a deleted topic are removed from every group; a group left Empty without
    offsets goes too."""
    h = Harness()
    h.commit({("gone", 0): 1, ("kept", 0): 2}, group="a")
    h.commit({("gone", 1): 3}, group="b")
    assert h.engine.remove_topic_offsets(h.now, ["gone"]) == 2
    assert h.engine.fetch_offsets("a", None) == {("kept", 0): offset(2)}
    assert "b" not in h.engine.groups and "b" not in h.store.offsets
    assert h.store.offsets["a"] == {("kept", 0): offset(2)}
