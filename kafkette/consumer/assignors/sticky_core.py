"""The balanced, sticky target assignment both sticky assignors compute.

Theory of operation. The goal, as for Java's sticky assignors, is first
balance (no member can take a partition from a member holding two or more
partitions more than it), then stickiness (as few partitions as possible leave
the member that owned them). Four steps:

1. Claims. Each member claims the partitions it owned, with the generation it
   owned them in. A claim counts only if the member still subscribes to the
   topic and the partition exists. Of several claims on one partition, the one
   from the highest generation wins; if two or more tie at the highest
   generation none does (Java's rule: the group state was inconsistent, so
   the partition is treated as free). Each member keeps its winning claims.
2. Fill. Free partitions are handed out one at a time, those with the fewest
   possible takers first (by topic), each to the subscriber holding the fewest
   partitions, ties going to the first member in Java's member order. This is
   Java's greedy start and gives Java's documented example results.
3. Balance. While some member holds at least two partitions more than another
   member it can pass work to, a partition is moved along the shortest chain
   of members ``a -> x1 -> ... -> b`` in which each hands the next a
   partition of a topic the next subscribes to: ``a`` loses one, ``b`` gains
   one, the members between keep their count. A member gives away a partition
   it got in this rebalance before one it kept, so kept partitions move only
   when balance needs it. Every step lowers the sum of squared counts, so this
   ends, and it ends with no such chain left: as balanced as the
   subscriptions allow. With equal subscriptions every chain has length one,
   and only members above their share give up kept partitions, which is the
   fewest moves possible.
4. Each member's partitions are listed sorted.

Everything is ordered (members in Java's order, topics and partitions sorted),
so the same inputs always give the same output.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import attrs

from kafkette.consumer.assignors.base import Subscription
from kafkette.consumer.assignors.ordering import sorted_members
from kafkette.structs import TopicPartition


@attrs.frozen
class Claim:
    """What one member says it owned, and in which generation (-1 when unknown)."""

    partitions: Sequence[TopicPartition]
    generation: int = -1


def resolve_claims(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    claims: Mapping[str, Claim],
) -> dict[TopicPartition, str]:
    """The owner each claimed partition keeps (see step 1 of the module docstring)."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member, claim in claims.items():
        topics = topics_of.get(member)
        if topics is None:
            continue
        for tp in set(claim.partitions):
            if tp.topic not in topics or not 0 <= tp.partition < partitions_per_topic.get(
                tp.topic, 0
            ):
                continue
            current = best.get(tp)
            if current is None or claim.generation > current[0]:
                best[tp] = (claim.generation, [member])
            elif claim.generation == current[0]:
                current[1].append(member)
    return {tp: members[0] for tp, (_, members) in best.items() if len(members) == 1}


def sticky_target(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    claims: Mapping[str, Claim],
) -> dict[str, list[TopicPartition]]:
    """:func:`sticky_assignment` for a group's subscriptions, members in Java's order."""
    return sticky_assignment(
        partitions_per_topic,
        {m: frozenset(sub.topics) for m, sub in subscriptions.items()},
        claims,
        sorted_members(subscriptions),
    )


def sticky_assignment(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    claims: Mapping[str, Claim],
    member_order: Sequence[str],
) -> dict[str, list[TopicPartition]]:
    """The balanced, sticky assignment of every subscribed partition.

    ``topics_of`` is each member's subscription, ``claims`` what members say
    they owned (members without a claim own nothing), ``member_order`` every
    member of ``topics_of`` in tie-break order.
    """
    return _Planner(partitions_per_topic, topics_of, member_order).run(claims)


class _Planner:
    """The working state of one sticky assignment."""

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        topics_of: Mapping[str, frozenset[str]],
        member_order: Sequence[str],
    ) -> None:
        self.partitions_per_topic = partitions_per_topic
        self.order = list(member_order)
        self.rank = {m: i for i, m in enumerate(self.order)}
        self.topics_of = {
            m: frozenset(t for t in topics_of[m] if partitions_per_topic.get(t, 0) > 0)
            for m in self.order
        }
        subscribers: dict[str, list[str]] = {}
        for member in self.order:
            for topic in sorted(self.topics_of[member]):
                subscribers.setdefault(topic, []).append(member)
        self.subscribers = subscribers
        # Topics with the same subscribers form one group, numbered in topic order.
        group_ids: dict[tuple[str, ...], int] = {}
        self.group_of: dict[str, int] = {}
        for topic in sorted(subscribers):
            self.group_of[topic] = group_ids.setdefault(tuple(subscribers[topic]), len(group_ids))
        self.group_members = [list(members) for members in group_ids]
        self.counts = dict.fromkeys(self.order, 0)
        # member -> topic -> partitions; ``kept`` were owned before, ``fresh`` came now
        self.kept: dict[str, dict[str, list[int]]] = {m: {} for m in self.order}
        self.fresh: dict[str, dict[str, list[int]]] = {m: {} for m in self.order}

    def run(self, claims: Mapping[str, Claim]) -> dict[str, list[TopicPartition]]:
        owners = resolve_claims(self.partitions_per_topic, self.topics_of, claims)
        for tp in sorted(owners):
            self._give(owners[tp], tp.topic, tp.partition, self.kept)
        self._fill(owners)
        self._balance()
        return {m: self._partitions_of(m) for m in self.order}

    def _give(
        self, member: str, topic: str, partition: int, into: dict[str, dict[str, list[int]]]
    ) -> None:
        into[member].setdefault(topic, []).append(partition)
        self.counts[member] += 1

    def _fill(self, owners: Mapping[TopicPartition, str]) -> None:
        """Step 2: free partitions to the least loaded subscriber."""
        # One heap of (count, rank, member) per distinct subscriber list; counts
        # only grow, so an entry whose count is stale is pushed back updated.
        heaps: dict[tuple[str, ...], list[tuple[int, int, str]]] = {}
        topics = sorted(self.subscribers, key=lambda t: (len(self.subscribers[t]), t))
        for topic in topics:
            members = tuple(self.subscribers[topic])
            heap = heaps.get(members)
            if heap is None:
                heap = [(self.counts[m], self.rank[m], m) for m in members]
                heapq.heapify(heap)
                heaps[members] = heap
            for partition in range(self.partitions_per_topic[topic]):
                if TopicPartition(topic, partition) in owners:
                    continue
                while True:
                    count, rank, member = heap[0]
                    if count == self.counts[member]:
                        break
                    heapq.heapreplace(heap, (self.counts[member], rank, member))
                self._give(member, topic, partition, self.fresh)
                heapq.heapreplace(heap, (self.counts[member], rank, member))

    def _balance(self) -> None:
        """Step 3: move partitions along chains until no chain lowers the spread."""
        while self.order:
            low = min(self.counts.values())
            levels = sorted({c for c in self.counts.values() if c >= low + 2}, reverse=True)
            if not any(self._shift_from_level(level) for level in levels):
                return

    def _shift_from_level(self, level: int) -> bool:
        """Move one partition from a member at ``level`` to one at ``level - 2`` or below.

        A breadth-first search from every member at ``level`` at once, one
        layer at a time; the target is a member of the first layer holding
        one, with the fewest partitions. Topics with the same subscribers are
        expanded once (many topics usually share them).
        """
        frontier = [m for m in self.order if self.counts[m] == level]
        parent: dict[str, tuple[str, str] | None] = dict.fromkeys(frontier)
        expanded: set[int] = set()
        while frontier:
            layer: list[str] = []
            for giver in frontier:
                for group, topic in self._edges(giver):
                    if group in expanded:
                        continue
                    expanded.add(group)
                    for taker in self.group_members[group]:
                        if taker not in parent:
                            parent[taker] = (giver, topic)
                            layer.append(taker)
            targets = [m for m in layer if self.counts[m] <= level - 2]
            if targets:
                self._shift_along(
                    parent, min(targets, key=lambda m: (self.counts[m], self.rank[m]))
                )
                return True
            frontier = layer
        return False

    def _shift_along(self, parent: Mapping[str, tuple[str, str] | None], target: str) -> None:
        taker = target
        link = parent[taker]
        while link is not None:
            giver, topic = link
            self._give(taker, topic, self._take(giver, topic), self.fresh)
            taker = giver
            link = parent[taker]

    def _edges(self, giver: str) -> list[tuple[int, str]]:
        """(subscriber group, topic) for each group ``giver`` can pass a partition to.

        The topic is one the giver holds a fresh partition of when it can be.
        """
        best: dict[int, str] = {}
        for held in (self.fresh[giver], self.kept[giver]):
            for topic in sorted(t for t, ps in held.items() if ps):
                best.setdefault(self.group_of[topic], topic)
        return sorted(best.items())

    def _take(self, member: str, topic: str) -> int:
        """Remove one of ``member``'s partitions of ``topic``: a fresh one if any."""
        self.counts[member] -= 1
        fresh = self.fresh[member].get(topic)
        if fresh:
            return fresh.pop()
        return self.kept[member][topic].pop()

    def _partitions_of(self, member: str) -> list[TopicPartition]:
        return sorted(
            TopicPartition(topic, p)
            for held in (self.kept[member], self.fresh[member])
            for topic, partitions in held.items()
            for p in partitions
        )
