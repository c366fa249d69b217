"""The server assignors: exact assignments for known inputs, and properties over random
groups (every partition once, only to subscribers; uniform balanced and sticky)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.server.groups.consumer_protocol import TopicInfo
from kafkette.server.groups.consumer_protocol import partitions as ps
from kafkette.server.groups.consumer_protocol.assignors import (
    AssignmentSpec,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
)
from kafkette.server.groups.consumer_protocol.partitions import Assignment

T = {
    name: TopicInfo(uuid.uuid5(uuid.NAMESPACE_DNS, name), name, n)
    for name, n in [("a", 3), ("b", 3), ("c", 7)]
}


def ids(*names: str) -> frozenset[uuid.UUID]:
    return frozenset(T[n].topic_id for n in names)


def named(assignment: Assignment) -> dict[str, list[int]]:
    by_id = {info.topic_id: name for name, info in T.items()}
    return {by_id[t]: sorted(p) for t, p in sorted(assignment.items(), key=lambda kv: by_id[kv[0]])}


def spec(members: list[MemberSpec], current: dict[str, Assignment] | None = None) -> AssignmentSpec:
    return AssignmentSpec(
        members=tuple(members),
        topics={info.topic_id: info for info in T.values()},
        current=current or {},
    )


def test_range_cuts_each_topic_into_ranges_static_members_first() -> None:
    members = [
        MemberSpec("m-b", None, ids("a", "c")),
        MemberSpec("m-a", None, ids("a", "c")),
        MemberSpec("m-z", "instance-1", ids("a", "b", "c")),
    ]
    result = {m: named(a) for m, a in RangeAssignor().assign(spec(members)).items()}
    assert result == {
        "m-z": {"a": [0], "b": [0, 1, 2], "c": [0, 1, 2]},
        "m-a": {"a": [1], "c": [3, 4]},
        "m-b": {"a": [2], "c": [5, 6]},
    }


def test_range_with_more_members_than_partitions() -> None:
    members = [MemberSpec(f"m{i}", None, ids("a")) for i in range(5)]
    result = {m: named(a) for m, a in RangeAssignor().assign(spec(members)).items()}
    assert result == {"m0": {"a": [0]}, "m1": {"a": [1]}, "m2": {"a": [2]}, "m3": {}, "m4": {}}


def test_uniform_spreads_evenly() -> None:
    """A fresh assignment: each partition in turn to the member with the fewest."""
    members = [MemberSpec(f"m{i}", None, ids("a", "b", "c")) for i in range(3)]
    result = {m: named(a) for m, a in UniformAssignor().assign(spec(members)).items()}
    assert result == {
        "m0": {"a": [0], "b": [0], "c": [0, 3, 6]},
        "m1": {"a": [1], "b": [1], "c": [1, 4]},
        "m2": {"a": [2], "b": [2], "c": [2, 5]},
    }


def test_uniform_keeps_partitions_where_they_were() -> None:
    """A member joining takes only as many partitions as balance needs, from the fullest."""
    members = [MemberSpec(f"m{i}", None, ids("c")) for i in range(2)]
    before = UniformAssignor().assign(spec(members))
    after = UniformAssignor().assign(spec([*members, MemberSpec("m2", None, ids("c"))], before))
    moved = sum(ps.count(ps.minus(before[m], after[m])) for m in before)
    assert moved == 2  # 7 partitions: 4+3 -> 3+2+2 at best
    assert sorted(ps.count(a) for a in after.values()) == [2, 2, 3]


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers() -> None:
    members = [
        MemberSpec("m0", None, ids("a")),
        MemberSpec("m1", None, ids("a", "c")),
        MemberSpec("m2", None, ids("c")),
    ]
    result = {m: named(a) for m, a in UniformAssignor().assign(spec(members)).items()}
    assert result == {"m0": {"a": [0, 1, 2]}, "m1": {"c": [1, 3, 5]}, "m2": {"c": [0, 2, 4, 6]}}


member_lists = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sets(st.sampled_from(["a", "b", "c"]))),
    min_size=1,
    max_size=6,
)


def _members(drawn: list[tuple[str, set[str]]]) -> list[MemberSpec]:
    return [MemberSpec(f"m{i}", None, ids(*topics)) for i, (_, topics) in enumerate(drawn)]


def _check_valid(members: list[MemberSpec], result: dict[str, Assignment], complete: bool) -> None:
    assert set(result) == {m.member_id for m in members}
    seen: set[tuple[uuid.UUID, int]] = set()
    for member in members:
        for topic_id, p in ps.each(result[member.member_id]):
            assert topic_id in member.topics
            assert (topic_id, p) not in seen
            seen.add((topic_id, p))
    if complete:
        subscribed = {t for m in members for t in m.topics}
        by_id = {info.topic_id: info for info in T.values()}
        assert len(seen) == sum(by_id[t].partitions for t in subscribed)


@settings(max_examples=200, deadline=None)
@given(member_lists, member_lists)
def test_uniform_properties(
    first: list[tuple[str, set[str]]], second: list[tuple[str, set[str]]]
) -> None:
    """Every subscribed partition given once, to a subscriber; when all share a
    subscription the counts differ by at most one; the same group again moves nothing; a
    different group starting from that result is again valid and complete."""
    members = _members(first)
    result = UniformAssignor().assign(spec(members))
    _check_valid(members, result, complete=True)
    if len({m.topics for m in members}) == 1:
        counts = [ps.count(a) for a in result.values()]
        assert max(counts) - min(counts) <= 1
    # Same members again: nothing moves.
    assert UniformAssignor().assign(spec(members, result)) == result
    others = _members(second)
    again = UniformAssignor().assign(spec(others, result))
    _check_valid(others, again, complete=True)


@settings(max_examples=200, deadline=None)
@given(member_lists)
def test_range_properties(drawn: list[tuple[str, set[str]]]) -> None:
    """Every subscribed partition given once, to a subscriber, in contiguous ranges whose
    sizes differ by at most one per topic."""
    members = _members(drawn)
    result = RangeAssignor().assign(spec(members))
    _check_valid(members, result, complete=True)
    subscriptions = {m.member_id: m.topics for m in members}
    for info in T.values():
        sizes = [
            len(a.get(info.topic_id, ()))
            for m, a in result.items()
            if info.topic_id in subscriptions[m]
        ]
        if sizes:
            assert max(sizes) - min(sizes) <= 1
        for a in result.values():
            got = sorted(a.get(info.topic_id, ()))
            if got:
                assert got == list(range(got[0], got[0] + len(got)))
