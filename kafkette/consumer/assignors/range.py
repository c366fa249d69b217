"""RangeAssignor: each topic's partitions cut into contiguous ranges, one per subscriber.

Per topic, the members subscribed to it are sorted (see :mod:`.ordering`) and
member ``i`` of ``m`` gets a range of ``n // m`` partitions, plus one more for
the first ``n % m`` members. Topics are handled independently, so with many
topics the first members get the extra partitions of each one: that is the
known imbalance of range, kept for compatibility with Java and librdkafka.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkette.consumer.assignors.base import Assignment, Assignor, Subscription
from kafkette.consumer.assignors.ordering import sorted_members
from kafkette.structs import TopicPartition


class RangeAssignor(Assignor):
    """Kafka's ``range`` strategy (eager)."""

    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Cut every subscribed topic into ranges over its sorted subscribers."""
        members_per_topic: dict[str, list[str]] = {}
        for member_id, sub in subscriptions.items():
            for topic in set(sub.topics):
                if topic in partitions_per_topic:
                    members_per_topic.setdefault(topic, []).append(member_id)

        assigned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in sorted(members_per_topic):
            members = sorted_members(subscriptions, members_per_topic[topic])
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(members))
            start = 0
            for i, member_id in enumerate(members):
                length = per_member + (1 if i < extra else 0)
                assigned[member_id].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
                start += length
        return {m: Assignment(partitions=tuple(tps)) for m, tps in assigned.items()}
