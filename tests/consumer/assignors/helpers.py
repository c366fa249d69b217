"""Shared builders and checks for the assignor tests."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import strategies as st

from kafkette.consumer.assignors import Assignment, Subscription
from kafkette.structs import TopicPartition


def tps(spec: str) -> tuple[TopicPartition, ...]:
    """``"t0p0 t1p2"`` as topic partitions, in the order written."""
    out = []
    for item in spec.split():
        topic, _, partition = item.rpartition("p")
        out.append(TopicPartition(topic, int(partition)))
    return tuple(out)


def subs(**topics: str) -> dict[str, Subscription]:
    """Members named by keyword, each subscribed to the space-separated topics."""
    return {member: Subscription(topics=tuple(ts.split())) for member, ts in topics.items()}


def as_sets(result: Mapping[str, Assignment]) -> dict[str, set[TopicPartition]]:
    """Each member's partitions as a set."""
    return {m: set(a.partitions) for m, a in result.items()}


def check_valid(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    result: Mapping[str, Assignment],
) -> None:
    """Every subscribed, existing partition goes to exactly one subscriber; every member listed."""
    assert set(result) == set(subscriptions)
    seen: dict[TopicPartition, str] = {}
    for member, assignment in result.items():
        assert len(set(assignment.partitions)) == len(assignment.partitions)
        for tp in assignment.partitions:
            assert tp not in seen, f"{tp} given to {seen[tp]} and {member}"
            seen[tp] = member
            assert tp.topic in subscriptions[member].topics
            assert 0 <= tp.partition < partitions_per_topic[tp.topic]
    subscribed = {t for s in subscriptions.values() for t in s.topics if t in partitions_per_topic}
    expected = {TopicPartition(t, p) for t in subscribed for p in range(partitions_per_topic[t])}
    assert set(seen) == expected


def counts_spread(result: Mapping[str, Assignment]) -> int:
    """Largest minus smallest partition count over the members."""
    counts = [len(a.partitions) for a in result.values()]
    return max(counts) - min(counts)


member_ids = st.text(alphabet="abcdefgh0123-", min_size=1, max_size=6)
topic_names = st.sampled_from(["t0", "t1", "t2", "t3", "t4", "t5"])


@st.composite
def groups(
    draw: st.DrawFn, *, equal: bool = False, max_members: int = 8
) -> tuple[dict[str, int], dict[str, Subscription]]:
    """A cluster (topic -> partition count) and a group of subscriptions to it.

    Some subscribed topics may not exist, and static members are mixed in.
    With ``equal`` every member subscribes to the same topics.
    """
    partitions_per_topic = draw(
        st.dictionaries(topic_names, st.integers(0, 12), min_size=1, max_size=5)
    )
    members = draw(st.lists(member_ids, min_size=1, max_size=max_members, unique=True))
    shared = tuple(draw(st.lists(topic_names, min_size=1, max_size=4, unique=True)))
    subscriptions = {}
    for member in members:
        topics = shared if equal else tuple(draw(st.lists(topic_names, max_size=4, unique=True)))
        instance = draw(st.none() | st.sampled_from(["i1", "i2", "i3", "i4"]))
        subscriptions[member] = Subscription(topics=topics, group_instance_id=instance)
    return partitions_per_topic, subscriptions
