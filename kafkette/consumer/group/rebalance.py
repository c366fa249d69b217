"""What a rebalance changes for one member: protocols, revocations, additions.

Pure functions over sets of partitions, following Java's ConsumerCoordinator:
in the eager protocol a member gives up everything before it joins; in the
cooperative one (KIP-429) it keeps what it still owns, gives up only what the
new assignment moved away, and then joins again at once so that the moved
partitions can be handed out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from kafkette.consumer.assignors.base import Assignor, RebalanceProtocol
from kafkette.structs import TopicPartition


def rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """COOPERATIVE when every configured assignor supports it, else EAGER."""
    if assignors and all(RebalanceProtocol.COOPERATIVE in a.protocols for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER


def revoked_before_join(
    protocol: RebalanceProtocol, owned: set[TopicPartition], subscribed: Iterable[str]
) -> set[TopicPartition]:
    """What to give up before JoinGroup: all (eager) or the unsubscribed topics' (cooperative)."""
    if protocol is RebalanceProtocol.EAGER:
        return set(owned)
    topics = set(subscribed)
    return {tp for tp in owned if tp.topic not in topics}


@attrs.frozen
class AssignmentChange:
    """The difference between what a member owned and what it was just given."""

    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    kept: frozenset[TopicPartition]

    @classmethod
    def between(
        cls, owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
    ) -> AssignmentChange:
        before, after = frozenset(owned), frozenset(assigned)
        return cls(added=after - before, revoked=before - after, kept=before & after)
