"""``range``: each topic's partitions cut into contiguous ranges, one per subscribed member
(Kafka's RangeAssignor for consumer groups).

Members are ordered static members first by instance id, then the others by member id,
so that a static member that restarts under a new member id keeps its ranges. For a
topic with ``n`` partitions and ``k`` subscribed members, each gets ``n // k``
partitions and the first ``n % k`` one more; members subscribed to the same topics with
the same partition counts get the same partition numbers of each (co-partitioning).
"""

from __future__ import annotations

import uuid

from kafkette.server.groups.consumer_protocol.assignors.spec import AssignmentSpec, MemberSpec
from kafkette.server.groups.consumer_protocol.partitions import Assignment


def _order(member: MemberSpec) -> tuple[int, str]:
    if member.instance_id is not None:
        return (0, member.instance_id)
    return (1, member.member_id)


class RangeAssignor:
    """Contiguous ranges per topic."""

    name = "range"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        """Every member's ranges."""
        members = sorted(spec.members, key=_order)
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in members}
        for topic_id, topic in spec.topics.items():
            subscribers = [m for m in members if topic_id in m.topics]
            if not subscribers:
                continue
            quota, extra = divmod(topic.partitions, len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                end = start + quota + (1 if i < extra else 0)
                if end > start:
                    result[member.member_id][topic_id] = frozenset(range(start, end))
                start = end
        return dict(result)
