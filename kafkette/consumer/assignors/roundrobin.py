"""RoundRobinAssignor: every partition dealt in turn to the members, like cards.

All partitions of all subscribed topics are sorted by (topic, partition) and
handed out one at a time to the members in sorted order (see
:mod:`.ordering`), cycling; a member not subscribed to a partition's topic is
skipped for that partition. With equal subscriptions the counts differ by at
most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkette.consumer.assignors.base import Assignment, Assignor, Subscription
from kafkette.consumer.assignors.ordering import sorted_members
from kafkette.structs import TopicPartition


class RoundRobinAssignor(Assignor):
    """Kafka's ``roundrobin`` strategy (eager)."""

    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Deal the sorted partitions over the sorted members, skipping non-subscribers."""
        members = sorted_members(subscriptions)
        topics_of = {m: frozenset(subscriptions[m].topics) for m in members}
        assigned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        topics = sorted({t for ts in topics_of.values() for t in ts if t in partitions_per_topic})
        cursor = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                # Some member subscribes to the topic, so this loop ends.
                while topic not in topics_of[members[cursor]]:
                    cursor = (cursor + 1) % len(members)
                assigned[members[cursor]].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % len(members)
        return {m: Assignment(partitions=tuple(assigned[m])) for m in subscriptions}
