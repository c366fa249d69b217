"""The simple share assignor: every partition shared by ceil(M/P) members, every
member its even share, current partitions kept where that stays balanced."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.server.share.assignor import TopicPartition, assign

TOPICS = [uuid.UUID(int=i + 1) for i in range(3)]
T1, T2 = TOPICS[0], TOPICS[1]


def shares(total: int, members: int) -> list[int]:
    """Each member's count, by Kafka's formula (member i in id order)."""
    return [-(-total * (i + 1) // members) - -(-total * i // members) for i in range(members)]


def check_pool(
    result: dict[str, frozenset[TopicPartition]], members: list[str], targets: set[TopicPartition]
) -> None:
    if not targets:
        assert all(not (result[m] & targets) for m in members)
        return
    sharing = -(-len(members) // len(targets))
    holders = {tp: [m for m in members if tp in result[m]] for tp in targets}
    assert {tp: len(h) for tp, h in holders.items()} == dict.fromkeys(targets, sharing)
    counts = [len(result[m] & targets) for m in sorted(members)]
    assert counts == shares(sharing * len(targets), len(members))


def test_fewer_members_than_partitions_split_them() -> None:
    got = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: 5}, {})
    assert got == {
        "a": frozenset({(T1, 0), (T1, 2), (T1, 4)}),
        "b": frozenset({(T1, 1), (T1, 3)}),
    }


def test_more_members_than_partitions_share_them() -> None:
    """Three members, two partitions: each partition read by two members."""
    members = {m: frozenset({T1}) for m in "abc"}
    assert assign(members, {T1: 2}, {}) == {
        "a": frozenset({(T1, 0), (T1, 1)}),
        "b": frozenset({(T1, 0)}),
        "c": frozenset({(T1, 1)}),
    }


def test_a_joining_member_takes_partitions_from_the_fullest_only() -> None:
    before = {
        "a": frozenset({(T1, 0), (T1, 1), (T1, 2)}),
        "b": frozenset({(T1, 3), (T1, 4), (T1, 5)}),
    }
    members = {m: frozenset({T1}) for m in "abc"}
    after = assign(members, {T1: 6}, before)
    assert after["a"] <= before["a"] and after["b"] <= before["b"]
    assert [len(after[m]) for m in "abc"] == [2, 2, 2]


def test_unsubscribed_and_vanished_partitions_are_taken_back() -> None:
    current = {"a": frozenset({(T1, 0), (T1, 7), (T2, 0)})}
    assert assign({"a": frozenset({T1})}, {T1: 2, T2: 1}, current) == {
        "a": frozenset({(T1, 0), (T1, 1)})
    }


def test_a_topic_that_does_not_exist_gives_nothing() -> None:
    assert assign({"a": frozenset({T1})}, {}, {}) == {"a": frozenset()}
    assert assign({}, {T1: 3}, {}) == {}


def test_heterogeneous_subscriptions_are_balanced_per_topic() -> None:
    """As Kafka's heterogeneous builder: m3 on T1 and T2 gets half of each."""
    subs = {"m1": frozenset({T1}), "m2": frozenset({T2}), "m3": frozenset({T1, T2})}
    got = assign(subs, {T1: 2, T2: 2}, {})
    assert got == {
        "m1": frozenset({(T1, 0)}),
        "m2": frozenset({(T2, 0)}),
        "m3": frozenset({(T1, 1), (T2, 1)}),
    }


@st.composite
def groups(
    draw: st.DrawFn,
) -> tuple[
    dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int], dict[str, frozenset[TopicPartition]]
]:
    members = [f"m{i}" for i in range(draw(st.integers(1, 8)))]
    counts = {t: draw(st.integers(0, 6)) for t in TOPICS if draw(st.booleans())}
    same = draw(st.booleans())
    topic_sets = st.frozensets(st.sampled_from(TOPICS), min_size=1)
    shared = draw(topic_sets)
    subs = {m: shared if same else draw(topic_sets) for m in members}
    every = [(t, i) for t in TOPICS for i in range(8)]
    current = {m: draw(st.frozensets(st.sampled_from(every), max_size=6)) for m in members}
    return subs, counts, current


@settings(max_examples=300, deadline=None)
@given(groups())
def test_every_partition_is_shared_evenly_and_the_result_is_stable(
    group: tuple[
        dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int], dict[str, frozenset[TopicPartition]]
    ],
) -> None:
    subs, counts, current = group
    result = assign(subs, counts, current)
    assert set(result) == set(subs)
    for member, owned in result.items():
        assert all(t in subs[member] and i < counts.get(t, 0) for t, i in owned)
    if len(set(subs.values())) == 1:
        topics = next(iter(subs.values()))
        check_pool(result, list(subs), {(t, i) for t in topics for i in range(counts.get(t, 0))})
    else:
        for topic in TOPICS:
            members = [m for m in subs if topic in subs[m]]
            check_pool(result, members, {(topic, i) for i in range(counts.get(topic, 0))})
    assert assign(subs, counts, result) == result
