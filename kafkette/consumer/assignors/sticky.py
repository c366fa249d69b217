"""StickyAssignor: balanced, and keeps partitions where they were (eager protocol).

Members give up everything before an eager rebalance, so what each owned
travels in its subscription's user data (see :mod:`.sticky_user_data`), as
Java's StickyAssignor does. Owned partitions in the subscription itself
(v1+) are used instead when a member sends them. The assignment is computed
by :mod:`.sticky_core`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkette.consumer.assignors.base import Assignment, Assignor, Subscription
from kafkette.consumer.assignors.sticky_core import Claim, sticky_target
from kafkette.consumer.assignors.sticky_user_data import (
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kafkette.structs import TopicPartition


class StickyAssignor(Assignor):
    """Kafka's ``sticky`` strategy (eager).

    An instance belongs to one consumer: it remembers that consumer's last
    assignment and generation and sends them as user data on the next join.
    """

    name = "sticky"

    def __init__(self) -> None:
        self._owned: tuple[TopicPartition, ...] | None = None
        self._generation = -1

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Balance every subscribed partition, keeping each where it was when possible."""
        claims = {m: claim_of(sub) for m, sub in subscriptions.items()}
        target = sticky_target(partitions_per_topic, subscriptions, claims)
        return {m: Assignment(partitions=tuple(target[m])) for m in subscriptions}

    def user_data(self, topics: Iterable[str]) -> bytes | None:
        """The last assignment and its generation, in Java's StickyAssignorUserData v1."""
        if self._owned is None:
            return None
        return encode_sticky_user_data(self._owned, self._generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Remember the assignment for the next join."""
        self._owned = assignment.partitions
        self._generation = generation_id


def claim_of(sub: Subscription) -> Claim:
    """What a member owned: its owned partitions if it sent any, else its user data."""
    from_user_data = decode_sticky_user_data(sub.user_data)
    if sub.owned_partitions:
        generation = sub.generation_id
        if generation == -1 and from_user_data is not None:
            generation = from_user_data.generation
        return Claim(sub.owned_partitions, generation)
    if from_user_data is not None:
        return from_user_data
    return Claim((), sub.generation_id)
