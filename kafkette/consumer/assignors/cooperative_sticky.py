"""CooperativeStickyAssignor: the sticky assignment reached over two rebalances (KIP-429).

Members keep their partitions through a cooperative rebalance and send them as
owned partitions with their generation (subscription v1+/v2+). The target is
the same as :class:`~.sticky.StickyAssignor`'s, but a partition moving from
one member to another is only taken from its old owner this time: it is left
out of the new owner's assignment, because the old owner may still be
consuming it. The old owner then revokes it and rejoins, and the follow-up
rebalance gives it out. As in Java, "moving" means: assigned to a member that
does not own it while some member that owns it loses it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kafkette.consumer.assignors.base import (
    Assignment,
    Assignor,
    RebalanceProtocol,
    Subscription,
)
from kafkette.consumer.assignors.sticky_core import Claim, sticky_target
from kafkette.structs import TopicPartition

_GENERATION = struct.Struct(">i")


class CooperativeStickyAssignor(Assignor):
    """Kafka's ``cooperative-sticky`` strategy (cooperative, or eager in a mixed group)."""

    name = "cooperative-sticky"
    protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """The sticky target, minus partitions still owned by another member."""
        claims = {
            m: Claim(sub.owned_partitions, generation_of(sub)) for m, sub in subscriptions.items()
        }
        target = sticky_target(partitions_per_topic, subscriptions, claims)
        moving = _moving_partitions(target, subscriptions)
        return {
            m: Assignment(partitions=tuple(tp for tp in target[m] if tp not in moving))
            for m in subscriptions
        }


def generation_of(sub: Subscription) -> int:
    """The generation of a member's owned partitions.

    Subscriptions before v2 carry none; Java members then put it in their user
    data as one int32, which is read when present.
    """
    if sub.generation_id != -1 or sub.user_data is None or len(sub.user_data) < 4:
        return sub.generation_id
    generation: int = _GENERATION.unpack_from(sub.user_data, 0)[0]
    return generation


def _moving_partitions(
    target: Mapping[str, list[TopicPartition]], subscriptions: Mapping[str, Subscription]
) -> set[TopicPartition]:
    """Partitions some member gains while another member that owns them loses them."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member, sub in subscriptions.items():
        owned = set(sub.owned_partitions)
        assigned = set(target[member])
        added |= assigned - owned
        revoked |= owned - assigned
    return added & revoked
