"""``uniform``: every partition given out, as evenly as the subscriptions allow, leaving
partitions with their previous owners where balance allows (the behaviour of Kafka's
UniformAssignor; our own algorithm).

1. Each member keeps the partitions of its previous target that still exist and that
   it is still subscribed to.
2. When every member has the same subscription (the usual case): each gets
   total // n partitions, the remainder going one each to the members holding most;
   a member above its quota gives up its last topic's last partitions, and each free
   partition goes to the member with the fewest (ties: the lowest member id).
3. Otherwise each free partition goes to the subscribed member with the fewest; then,
   while a partition can move from a member to another subscribed member holding at
   least two fewer, it moves (last partitions first). Each move lowers the sum of the
   squared counts, so this ends.

Rack awareness (Kafka's rack-matching preference) is not applied.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable

from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.assignors.spec import AssignmentSpec
from kafkette.server.groups.consumer_protocol.partitions import Assignment

TopicPartition = tuple[uuid.UUID, int]


class UniformAssignor:
    """Balanced and sticky."""

    name = "uniform"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        """Every member's share."""
        order = sorted(m.member_id for m in spec.members)
        rank = {member_id: i for i, member_id in enumerate(order)}
        topics_of = {m.member_id: frozenset(m.topics & spec.topics.keys()) for m in spec.members}

        held: dict[str, set[TopicPartition]] = {m: set() for m in order}
        owned: set[TopicPartition] = set()
        for member_id in order:
            for topic_id, p in partitions.each(spec.current.get(member_id, {})):
                tp = (topic_id, p)
                if (
                    topic_id in topics_of[member_id]
                    and p < spec.topics[topic_id].partitions
                    and tp not in owned
                ):
                    owned.add(tp)
                    held[member_id].add(tp)

        def by_name(tp: TopicPartition) -> tuple[str, uuid.UUID, int]:
            return (spec.topics[tp[0]].name, tp[0], tp[1])

        subscribed = sorted(
            set().union(*topics_of.values()), key=lambda t: (spec.topics[t].name, t)
        )
        free = [
            (t, p)
            for t in subscribed
            for p in range(spec.topics[t].partitions)
            if (t, p) not in owned
        ]
        if len({topics_of[m] for m in order}) == 1:
            _fill_same_subscriptions(order, rank, held, free, by_name)
        else:
            _fill_mixed_subscriptions(order, rank, topics_of, held, free, by_name)
        return {m: partitions.make((t, [p]) for t, p in held[m]) for m in order}


def _fill_same_subscriptions(
    order: list[str],
    rank: dict[str, int],
    held: dict[str, set[TopicPartition]],
    free: list[TopicPartition],
    by_name: Callable[[TopicPartition], tuple[str, uuid.UUID, int]],
) -> None:
    """Every member may take every partition: quotas of total // n, the extra ones to the
    members holding most; members above their quota give up their last partitions, then
    each free partition goes to the member with the fewest."""
    total = len(free) + sum(len(h) for h in held.values())
    base, extra = divmod(total, len(order))
    by_holding = sorted(order, key=lambda m: (-len(held[m]), rank[m]))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    for member_id in order:
        surplus = len(held[member_id]) - quota[member_id]
        if surplus > 0:
            given_up = sorted(held[member_id], key=by_name, reverse=True)[:surplus]
            held[member_id].difference_update(given_up)
            free.extend(given_up)
    heap = [(len(held[m]), rank[m], m) for m in order if len(held[m]) < quota[m]]
    heapq.heapify(heap)
    for tp in sorted(free, key=by_name):
        count, r, taker = heapq.heappop(heap)
        held[taker].add(tp)
        if count + 1 < quota[taker]:
            heapq.heappush(heap, (count + 1, r, taker))


def _fill_mixed_subscriptions(
    order: list[str],
    rank: dict[str, int],
    topics_of: dict[str, frozenset[uuid.UUID]],
    held: dict[str, set[TopicPartition]],
    free: list[TopicPartition],
    by_name: Callable[[TopicPartition], tuple[str, uuid.UUID, int]],
) -> None:
    """Members subscribed to different topics: each free partition to the subscriber with
    the fewest, then single moves from a member to a subscriber holding two fewer while
    any is possible."""
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in order:
        for topic_id in topics_of[member_id]:
            subscribers.setdefault(topic_id, []).append(member_id)

    def fewest(topic_id: uuid.UUID) -> str:
        return min(subscribers[topic_id], key=lambda m: (len(held[m]), rank[m]))

    for tp in free:
        held[fewest(tp[0])].add(tp)
    moved = True
    while moved:
        moved = False
        for donor in sorted(order, key=lambda m: (-len(held[m]), rank[m])):
            if len(held[donor]) - 1 <= min(len(h) for h in held.values()):
                continue  # no member anywhere holds two fewer
            for tp in sorted(held[donor], key=by_name, reverse=True):
                taker = fewest(tp[0])
                if len(held[taker]) < len(held[donor]) - 1:
                    held[donor].remove(tp)
                    held[taker].add(tp)
                    moved = True
