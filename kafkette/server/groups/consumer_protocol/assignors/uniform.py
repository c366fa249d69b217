"""``uniform``: every partition given out, as evenly as the subscriptions allow, leaving
partitions with their previous owners where balance allows (the behaviour of Kafka's
UniformAssignor; our own algorithm).

1. Each member keeps the partitions of its previous target that still exist and that
   it is still subscribed to.
2. Each partition left over goes to the subscribed member with the fewest partitions
   (ties: the lowest member id).
3. While a partition can move from a member to another subscribed member holding at
   least two fewer, it moves (a member gives up its last topic's last partitions
   first). Each move lowers the sum of the squared counts, so this ends; when all
   members share the same subscription their counts then differ by at most one.

Rack awareness (Kafka's rack-matching preference) is not applied.
"""

from __future__ import annotations

import uuid

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
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member in sorted(spec.members, key=lambda m: m.member_id):
            for topic_id in member.topics:
                if topic_id in spec.topics:
                    subscribers.setdefault(topic_id, []).append(member.member_id)

        held: dict[str, set[TopicPartition]] = {m: set() for m in order}
        owner: dict[TopicPartition, str] = {}
        for member_id in order:
            for topic_id, p in partitions.each(spec.current.get(member_id, {})):
                topic = spec.topics.get(topic_id)
                tp = (topic_id, p)
                if (
                    topic is not None
                    and p < topic.partitions
                    and member_id in subscribers.get(topic_id, ())
                    and tp not in owner
                ):
                    owner[tp] = member_id
                    held[member_id].add(tp)

        topics_by_name = sorted(subscribers, key=lambda t: (spec.topics[t].name, t))
        for topic_id in topics_by_name:
            candidates = subscribers[topic_id]
            for p in range(spec.topics[topic_id].partitions):
                tp = (topic_id, p)
                if tp not in owner:
                    taker = min(candidates, key=lambda m: (len(held[m]), rank[m]))
                    owner[tp] = taker
                    held[taker].add(tp)

        def by_name(tp: TopicPartition) -> tuple[str, uuid.UUID, int]:
            return (spec.topics[tp[0]].name, tp[0], tp[1])

        moved = True
        while moved:
            moved = False
            for donor in sorted(order, key=lambda m: (-len(held[m]), rank[m])):
                for tp in sorted(held[donor], key=by_name, reverse=True):
                    taker = min(subscribers[tp[0]], key=lambda m: (len(held[m]), rank[m]))
                    if len(held[taker]) < len(held[donor]) - 1:
                        held[donor].remove(tp)
                        held[taker].add(tp)
                        moved = True
        return {m: partitions.make((t, [p]) for t, p in held[m]) for m in order}
