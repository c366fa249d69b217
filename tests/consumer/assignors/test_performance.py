"""Assignment time for large groups stays small (the leader assigns inside JoinGroup)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kafkette.consumer.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from kafkette.structs import TopicPartition

ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]


def best_of(runs: int, work: Callable[[], object]) -> float:
    """The fastest of ``runs`` timings, in seconds of this thread's CPU: the machine is
    shared, and time spent waiting for a core is not the assignor's."""
    timings = []
    for _ in range(runs):
        started = time.thread_time()
        work()
        timings.append(time.thread_time() - started)
    return min(timings)


def cluster(partitions: int, topics: int) -> dict[str, int]:
    return {f"topic-{i:02d}": partitions // topics for i in range(topics)}


@pytest.mark.parametrize("cls", ALL)
def test_200_partitions_20_members(cls: type[Assignor]) -> None:
    """200 partitions over 20 members, from scratch and after one member joins: < 100 ms."""
    topics = cluster(200, 10)
    group = {f"member-{j:02d}": Subscription(topics=tuple(topics)) for j in range(20)}
    first = cls().assign(topics, group)
    rejoined = {
        m: Subscription(topics=tuple(topics), owned_partitions=first[m].partitions, generation_id=1)
        for m in group
    }
    rejoined["member-new"] = Subscription(topics=tuple(topics))
    assert best_of(3, lambda: cls().assign(topics, group)) < 0.1
    assert best_of(3, lambda: cls().assign(topics, rejoined)) < 0.1


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor])
def test_2000_partitions_100_members(cls: type[Assignor]) -> None:
    """2,000 partitions, 100 members: a join, and the worst case of one member owning all."""
    topics = cluster(2000, 20)
    every = tuple(TopicPartition(t, p) for t, n in topics.items() for p in range(n))
    group = {f"member-{j:03d}": Subscription(topics=tuple(topics)) for j in range(100)}
    first = cls().assign(topics, group)
    rejoined = {
        m: Subscription(topics=tuple(topics), owned_partitions=first[m].partitions, generation_id=1)
        for m in group
    }
    rejoined["member-new"] = Subscription(topics=tuple(topics))
    hoarder = dict(group)
    hoarder["member-000"] = Subscription(
        topics=tuple(topics), owned_partitions=every, generation_id=1
    )
    assert best_of(1, lambda: cls().assign(topics, rejoined)) < 2.0
    assert best_of(1, lambda: cls().assign(topics, hoarder)) < 2.0
