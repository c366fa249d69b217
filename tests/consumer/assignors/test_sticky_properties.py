"""Sticky and cooperative-sticky: validity, balance and minimal movement, for any group."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    StickyAssignor,
    Subscription,
)
from kafkette.structs import TopicPartition
from tests.consumer.assignors.helpers import check_valid, counts_spread, groups

Group = tuple[dict[str, int], dict[str, Subscription]]


def all_partitions(
    partitions_per_topic: Mapping[str, int], topics: tuple[str, ...]
) -> list[TopicPartition]:
    return [
        TopicPartition(t, p)
        for t in sorted(set(topics))
        for p in range(partitions_per_topic.get(t, 0))
    ]


def with_owned(
    subscriptions: Mapping[str, Subscription],
    owned: Mapping[str, tuple[TopicPartition, ...]],
    generation: int,
) -> dict[str, Subscription]:
    """The same members, now owning ``owned`` since ``generation``."""
    return {
        m: Subscription(
            topics=s.topics,
            owned_partitions=owned.get(m, ()),
            generation_id=generation if m in owned else -1,
            group_instance_id=s.group_instance_id,
        )
        for m, s in subscriptions.items()
    }


def owner_map(result: Mapping[str, Assignment]) -> dict[TopicPartition, str]:
    return {tp: m for m, a in result.items() for tp in a.partitions}


def moves(before: Mapping[TopicPartition, str], after: Mapping[TopicPartition, str]) -> int:
    """Partitions whose owner (still in the group) no longer has them."""
    members = set(after.values())
    return sum(1 for tp, m in before.items() if m in members and after.get(tp) != m)


def fewest_moves(total: int, kept: list[int]) -> int:
    """The fewest kept partitions that must move to balance ``total`` over these members.

    Counts must end at ``total // n`` or one more (for ``total % n`` members);
    member ``i`` can keep at most ``min(kept[i], its count)``, and the larger
    counts are best given to the members keeping the most.
    """
    base, extra = divmod(total, len(kept))
    ranked = sorted(kept, reverse=True)
    retained = sum(min(k, base + 1) for k in ranked[:extra]) + sum(
        min(k, base) for k in ranked[extra:]
    )
    return sum(kept) - retained


@st.composite
def reshaped_groups(
    draw: st.DrawFn,
) -> tuple[dict[str, int], dict[str, Subscription], dict[str, Subscription]]:
    """A group with equal subscriptions, then the same group after members join and leave."""
    partitions_per_topic, before = draw(groups(equal=True, max_members=7))
    topics = next(iter(before.values())).topics
    leaving = draw(st.sets(st.sampled_from(sorted(before)), max_size=len(before) - 1))
    joining = draw(st.lists(st.sampled_from(["j1", "j2", "j3"]), unique=True, max_size=3))
    after = {m: s for m, s in before.items() if m not in leaving}
    after.update({m: Subscription(topics=topics) for m in joining if m not in after})
    return partitions_per_topic, before, after


@st.composite
def claimed_groups(
    draw: st.DrawFn, *, equal: bool
) -> tuple[dict[str, int], dict[str, Subscription]]:
    """A group whose members claim arbitrary partitions, some twice, in various generations."""
    partitions_per_topic, subscriptions = draw(groups(equal=equal))
    universe = all_partitions(partitions_per_topic, (*partitions_per_topic, "gone"))
    claimed = {}
    for member, sub in subscriptions.items():
        owned = (
            draw(st.lists(st.sampled_from(universe), unique=True, max_size=8)) if universe else []
        )
        claimed[member] = Subscription(
            topics=sub.topics,
            owned_partitions=tuple(owned),
            generation_id=draw(st.integers(-1, 3)),
            group_instance_id=sub.group_instance_id,
        )
    return partitions_per_topic, claimed


def check_balanced(
    result: Mapping[str, Assignment], subscriptions: Mapping[str, Subscription]
) -> None:
    """No chain of hand-overs could take a partition from a member to one holding two fewer.

    A member can hand a partition to any member subscribed to its topic;
    moving one partition along a chain ``a -> x -> ... -> b`` changes only the
    counts of ``a`` and ``b``, so balance means no such chain from a member
    to one with at least two partitions fewer.
    """
    counts = {m: len(a.partitions) for m, a in result.items()}
    reach: dict[str, set[str]] = {
        giver: {
            taker
            for taker, sub in subscriptions.items()
            if any(tp.topic in sub.topics for tp in assignment.partitions)
        }
        for giver, assignment in result.items()
    }
    for start in result:
        seen = {start}
        todo = [start]
        while todo:
            for taker in reach[todo.pop()] - seen:
                seen.add(taker)
                todo.append(taker)
        assert all(counts[start] < counts[m] + 2 for m in seen), (start, counts)


@settings(max_examples=150, deadline=None)
@given(group=claimed_groups(equal=False))
def test_sticky_valid_and_balanced_for_any_claims(group: Group) -> None:
    """Whatever members claim, each partition goes to one subscriber, as balanced as possible."""
    partitions_per_topic, subscriptions = group
    result = StickyAssignor().assign(partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    check_balanced(result, subscriptions)
    assert (
        StickyAssignor().assign(partitions_per_topic, dict(reversed(subscriptions.items())))
        == result
    )


@settings(max_examples=150, deadline=None)
@given(group=claimed_groups(equal=True))
def test_sticky_equal_subscriptions_balanced_with_fewest_moves(group: Group) -> None:
    """Equal subscriptions: counts within one, and no kept partition moves beyond the minimum."""
    partitions_per_topic, subscriptions = group
    result = StickyAssignor().assign(partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    assert counts_spread(result) <= 1
    # Claims that stand: a lone claimant at the top generation, on a subscribed partition.
    best: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            if tp.topic in sub.topics and tp.partition < partitions_per_topic.get(tp.topic, 0):
                best.setdefault(tp, []).append((sub.generation_id, member))
    before = {}
    for tp, claims in best.items():
        top = max(g for g, _ in claims)
        winners = [m for g, m in claims if g == top]
        if len(winners) == 1:
            before[tp] = winners[0]
    kept = [sum(1 for m in before.values() if m == member) for member in subscriptions]
    total = len(all_partitions(partitions_per_topic, next(iter(subscriptions.values())).topics))
    assert moves(before, owner_map(result)) == fewest_moves(total, kept)


@settings(max_examples=150, deadline=None)
@given(change=reshaped_groups())
def test_sticky_join_and_leave_move_no_more_than_needed(
    change: tuple[dict[str, int], dict[str, Subscription], dict[str, Subscription]],
) -> None:
    """After members join and leave, only the partitions needed for balance change owner."""
    partitions_per_topic, before, after = change
    first = StickyAssignor().assign(partitions_per_topic, before)
    owned = {m: a.partitions for m, a in first.items() if m in after}
    second = StickyAssignor().assign(partitions_per_topic, with_owned(after, owned, 1))
    check_valid(partitions_per_topic, after, second)
    assert counts_spread(second) <= 1
    total = sum(len(a.partitions) for a in first.values())
    kept = [len(owned.get(m, ())) for m in after]
    assert moves(owner_map(first), owner_map(second)) <= fewest_moves(total, kept)


@settings(max_examples=150, deadline=None)
@given(change=reshaped_groups())
def test_cooperative_two_rebalances_after_join_and_leave(
    change: tuple[dict[str, int], dict[str, Subscription], dict[str, Subscription]],
) -> None:
    """A partition is revoked in one rebalance and given out in the next; the end is balanced.

    No partition is both taken from its owner and given to another member in
    the same rebalance, the follow-up moves nothing the first one kept, and
    the two together move no more than needed.
    """
    partitions_per_topic, before, after = change
    assignor = CooperativeStickyAssignor()
    start = assignor.assign(partitions_per_topic, before)
    check_valid(partitions_per_topic, before, start)  # nothing owned: nothing withheld
    owned = {m: a.partitions for m, a in start.items() if m in after}
    first = assignor.assign(partitions_per_topic, with_owned(after, owned, 1))
    check_no_transfer(with_owned(after, owned, 1), first)
    follow_up = assignor.assign(
        partitions_per_topic, with_owned(after, {m: a.partitions for m, a in first.items()}, 2)
    )
    check_no_transfer(with_owned(after, {m: a.partitions for m, a in first.items()}, 2), follow_up)
    check_valid(partitions_per_topic, after, follow_up)
    assert counts_spread(follow_up) <= 1
    for member, assignment in first.items():
        assert set(assignment.partitions) <= set(follow_up[member].partitions)
    total = sum(len(a.partitions) for a in start.values())
    kept = [len(owned.get(m, ())) for m in after]
    assert moves(owner_map(start), owner_map(follow_up)) <= fewest_moves(total, kept)


def check_no_transfer(
    subscriptions: Mapping[str, Subscription], result: Mapping[str, Assignment]
) -> None:
    """Nothing is given to a member in the rebalance that takes it from a member owning it."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member, sub in subscriptions.items():
        assigned = set(result[member].partitions)
        added |= assigned - set(sub.owned_partitions)
        revoked |= set(sub.owned_partitions) - assigned
    assert not added & revoked


@settings(max_examples=150, deadline=None)
@given(group=claimed_groups(equal=False))
def test_cooperative_any_claims_settle(group: Group) -> None:
    """From any claims, rebalances never transfer directly and settle to a full assignment."""
    partitions_per_topic, subscriptions = group
    assignor = CooperativeStickyAssignor()
    current = subscriptions
    for generation in range(4, 8):
        result = assignor.assign(partitions_per_topic, current)
        check_no_transfer(current, result)
        seen = [tp for a in result.values() for tp in a.partitions]
        assert len(seen) == len(set(seen))
        for member, assignment in result.items():
            assert all(tp.topic in current[member].topics for tp in assignment.partitions)
        current = with_owned(current, {m: a.partitions for m, a in result.items()}, generation)
        try:
            check_valid(partitions_per_topic, subscriptions, result)
        except AssertionError:
            continue
        assert StickyAssignor().assign(partitions_per_topic, current) == result
        return
    raise AssertionError("cooperative rebalances did not settle in four rounds")
