"""Kafka's ``simple`` share-group assignor (KIP-932), deterministic.

Share groups let several members read one partition, so the rule is about
*sharing*: with M members and P partitions, every partition goes to
``ceil(M / P)`` members (one each while members are no more than partitions),
and every member gets its even share of the ``ceil(M / P) * P`` assignments
(member i: ``ceil(S*P*(i+1)/M) - ceil(S*P*i/M)``, in member id order). The
steps are Kafka's ``SimpleHomogeneousAssignmentBuilder``: keep each member's
current partitions that are still assignable, take back what a member holds
beyond its share and what a partition has beyond its sharing, then hand the
partitions that lack members to the members that lack partitions, in order.
Balance comes before stickiness.

When all members subscribe to the same topics their partitions form one pool;
otherwise (Kafka's heterogeneous builder) each topic is a pool of its own,
shared by the members subscribed to it. Kafka iterates hash maps where this
module iterates sorted members and partitions, so the same rule may pick other
members than Kafka does for a given partition; and where Kafka's last step can
leave a partition short (every member lacking partitions already reads it),
this one swaps a partition with a member that does not (``_swap``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

TopicPartition = tuple[uuid.UUID, int]
"""A partition by topic id and index."""


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> dict[str, frozenset[TopicPartition]]:
    """The target assignment of every member.

    ``subscriptions``: each member's subscribed topic ids; ``partitions``: each
    existing topic's partition count (a subscribed topic missing here has none);
    ``current``: each member's current target assignment (missing: none).
    """
    members = sorted(subscriptions)
    if not members:
        return {}
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    distinct = {subscriptions[m] for m in members}
    pools: list[tuple[list[str], frozenset[uuid.UUID]]]
    if len(distinct) == 1:
        pools = [(members, next(iter(distinct)))]
    else:
        every = sorted(frozenset[uuid.UUID]().union(*distinct), key=str)
        pools = [([m for m in members if t in subscriptions[m]], frozenset({t})) for t in every]
    for pool_members, topics in pools:
        targets = [
            (topic, index)
            for topic in sorted(topics, key=str)
            for index in range(max(partitions.get(topic, 0), 0))
        ]
        pool_current = {
            m: [tp for tp in sorted(current.get(m, ()), key=_order) if tp[0] in topics]
            for m in pool_members
        }
        for member, owned in _assign_pool(pool_members, targets, pool_current).items():
            result[member].update(owned)
    return {m: frozenset(owned) for m, owned in result.items()}


def _order(tp: TopicPartition) -> tuple[str, int]:
    return str(tp[0]), tp[1]


def _assign_pool(
    members: Sequence[str],
    targets: Sequence[TopicPartition],
    current: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    if not members or not targets:
        return {m: [] for m in members}
    count, size = len(members), len(targets)
    sharing = -(-count // size)
    total = sharing * size
    desired = {
        m: -(-total * (i + 1) // count) - -(-total * i // count) for i, m in enumerate(members)
    }
    assignable = set(targets)
    owned: dict[str, list[TopicPartition]] = {}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
    # Keep what is still assignable, up to each member's share.
    for member in members:
        kept = [tp for tp in current.get(member, ()) if tp in assignable][: desired[member]]
        owned[member] = kept
        for tp in kept:
            holders[tp].append(member)
    # Take back the partitions shared by more members than the sharing allows.
    for tp in targets:
        while len(holders[tp]) > sharing:
            member = holders[tp].pop()
            owned[member].remove(tp)
    # Hand out the partitions lacking members to the members lacking partitions.
    unfilled = [m for m in members if len(owned[m]) < desired[m]]
    turn = 0  # round robin over the unfilled members, as Kafka's iterator
    for tp in targets:
        while len(holders[tp]) < sharing and unfilled:
            n = len(unfilled)
            pick = next(
                (k % n for k in range(turn, turn + n) if tp not in owned[unfilled[k % n]]), None
            )
            if pick is None:
                if not _swap(tp, targets, owned, holders, unfilled, desired):
                    break
                continue
            member = unfilled[pick]
            owned[member].append(tp)
            holders[tp].append(member)
            if len(owned[member]) >= desired[member]:
                unfilled.pop(pick)
                turn = pick
            else:
                turn = pick + 1
            if unfilled:
                turn %= len(unfilled)
    return owned


def _swap(
    tp: TopicPartition,
    targets: Sequence[TopicPartition],
    owned: dict[str, list[TopicPartition]],
    holders: dict[TopicPartition, list[str]],
    unfilled: list[str],
    desired: Mapping[str, int],
) -> bool:
    """Every member lacking partitions already reads ``tp``: one of them takes a
    partition ``q`` from a member that does not read ``tp``, which reads ``tp``
    instead. ``tp`` gains a member, ``q`` keeps its count. (Kafka stops there,
    leaving ``tp`` short; the same rule, one step further.)"""
    for taker in unfilled:
        for q in targets:
            if q in owned[taker]:
                continue
            giver = next((m for m in holders[q] if tp not in owned[m]), None)
            if giver is None:
                continue
            owned[giver].remove(q)
            owned[giver].append(tp)
            holders[q].remove(giver)
            holders[q].append(taker)
            holders[tp].append(giver)
            owned[taker].append(q)
            if len(owned[taker]) >= desired[taker]:
                unfilled.remove(taker)
            return True
    return False
