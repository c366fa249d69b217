"""RangeAssignor and RoundRobinAssignor: Java's documented results and properties."""

from __future__ import annotations

from hypothesis import given, settings

from kafkette.consumer.assignors import (
    Assignment,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
)
from kafkette.structs import TopicPartition
from tests.consumer.assignors.helpers import as_sets, check_valid, counts_spread, groups, subs, tps


def test_range_java_example() -> None:
    """RangeAssignor javadoc: C0 and C1 on t0, t1 with 3 partitions each."""
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, subs(C0="t0 t1", C1="t0 t1"))
    assert result == {
        "C0": Assignment(partitions=tps("t0p0 t0p1 t1p0 t1p1")),
        "C1": Assignment(partitions=tps("t0p2 t1p2")),
    }


def test_range_per_topic_subscribers() -> None:
    """Each topic is cut over its own subscribers only; extras go to the first ones."""
    result = RangeAssignor().assign(
        {"a": 5, "b": 2, "missing-not-listed": 4},
        subs(m3="a", m1="a b", m2="a b nope"),
    )
    assert result == {
        "m1": Assignment(partitions=tps("ap0 ap1 bp0")),
        "m2": Assignment(partitions=tps("ap2 ap3 bp1")),
        "m3": Assignment(partitions=tps("ap4")),
    }


def test_range_more_members_than_partitions() -> None:
    """Members past the partition count get nothing but still get an entry."""
    result = RangeAssignor().assign({"t": 2}, subs(a="t", b="t", c="t", d="other"))
    assert as_sets(result) == {"a": set(tps("tp0")), "b": set(tps("tp1")), "c": set(), "d": set()}


def test_static_members_sort_first_by_instance_id() -> None:
    """Java's MemberInfo order: static members by group.instance.id, then the rest by id."""
    subscriptions = {
        "a-dynamic": Subscription(topics=("t",)),
        "z-static": Subscription(topics=("t",), group_instance_id="inst-1"),
        "m-static": Subscription(topics=("t",), group_instance_id="inst-2"),
    }
    result = RangeAssignor().assign({"t": 3}, subscriptions)
    assert as_sets(result) == {
        "z-static": set(tps("tp0")),
        "m-static": set(tps("tp1")),
        "a-dynamic": set(tps("tp2")),
    }
    result = RoundRobinAssignor().assign({"t": 4}, subscriptions)
    assert as_sets(result) == {
        "z-static": set(tps("tp0 tp3")),
        "m-static": set(tps("tp1")),
        "a-dynamic": set(tps("tp2")),
    }


def test_member_ids_compare_as_java_strings() -> None:
    """Java orders by UTF-16 unit: U+FF5E sorts after U+1F600 (a surrogate pair), unlike Python."""
    result = RangeAssignor().assign({"t": 2}, subs(**{"\uff5e": "t", "\U0001f600": "t"}))
    assert as_sets(result) == {"\U0001f600": set(tps("tp0")), "\uff5e": set(tps("tp1"))}


def test_roundrobin_java_example_equal_subscriptions() -> None:
    """RoundRobinAssignor javadoc, first example."""
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs(C0="t0 t1", C1="t0 t1"))
    assert result == {
        "C0": Assignment(partitions=tps("t0p0 t0p2 t1p1")),
        "C1": Assignment(partitions=tps("t0p1 t1p0 t1p2")),
    }


def test_roundrobin_java_example_unequal_subscriptions() -> None:
    """RoundRobinAssignor javadoc, second example: non-subscribers are skipped."""
    result = RoundRobinAssignor().assign(
        {"t0": 1, "t1": 2, "t2": 3}, subs(C0="t0", C1="t0 t1", C2="t0 t1 t2")
    )
    assert result == {
        "C0": Assignment(partitions=tps("t0p0")),
        "C1": Assignment(partitions=tps("t1p0")),
        "C2": Assignment(partitions=tps("t1p1 t2p0 t2p1 t2p2")),
    }


def test_eager_protocol_only() -> None:
    """Both are eager assignors with Kafka's protocol names."""
    assert (RangeAssignor.name, RoundRobinAssignor.name) == ("range", "roundrobin")
    assert RangeAssignor.protocols == RoundRobinAssignor.protocols == (RebalanceProtocol.EAGER,)


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_range_valid(group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    """Range gives every subscribed partition to exactly one subscriber, in ranges."""
    partitions_per_topic, subscriptions = group
    result = RangeAssignor().assign(partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    for assignment in result.values():
        by_topic: dict[str, list[int]] = {}
        for tp in assignment.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for partitions in by_topic.values():
            assert partitions == list(range(partitions[0], partitions[0] + len(partitions)))
    assert RangeAssignor().assign(partitions_per_topic, dict(reversed(subscriptions.items()))) == (
        result
    )


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_roundrobin_valid(group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    """Round robin is valid and does not depend on the order members are listed in."""
    partitions_per_topic, subscriptions = group
    result = RoundRobinAssignor().assign(partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    assert (
        RoundRobinAssignor().assign(partitions_per_topic, dict(reversed(subscriptions.items())))
        == result
    )


@settings(max_examples=100, deadline=None)
@given(group=groups(equal=True))
def test_roundrobin_balanced_with_equal_subscriptions(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    """With the same topics everywhere, counts differ by at most one."""
    partitions_per_topic, subscriptions = group
    result = RoundRobinAssignor().assign(partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    assert counts_spread(result) <= 1


def test_partitions_of_one_member_listed_sorted() -> None:
    """Assignments list partitions by topic then partition."""
    result = RoundRobinAssignor().assign({"b": 2, "a": 2}, subs(x="b a"))
    assert result["x"].partitions == (
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 0),
        TopicPartition("b", 1),
    )
