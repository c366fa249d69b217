"""What every partition assignor is: the leader's function from subscriptions to assignments.

The group leader (one consumer of the group, chosen by the broker) runs the
assignor the group agreed on over every member's :class:`Subscription` and
sends each member its :class:`Assignment` through SyncGroup. Both travel as
the standard ConsumerProtocolSubscription/Assignment bytes, so a group can
mix kafkette with librdkafka or Java consumers using the same assignor name.

An assignor supports the eager protocol (every member gives up all its
partitions before a rebalance), the cooperative one (KIP-429: a member keeps
what it still owns and only revoked partitions move, over two rebalances), or
both; the consumer picks the rebalance protocol every configured assignor
supports.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping
from typing import ClassVar

import attrs

from kafkette.structs import TopicPartition


class RebalanceProtocol(enum.Enum):
    """How members give up partitions in a rebalance."""

    EAGER = 0
    COOPERATIVE = 1


@attrs.frozen(kw_only=True)
class Subscription:
    """One member's side of the join, as the leader's assignor sees it."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    """What the member owns now (subscription v1+); cooperative assignors keep it in place."""
    generation_id: int = -1
    """Generation in which the member got ``owned_partitions`` (v2+), -1 when unknown."""
    rack_id: str | None = None
    group_instance_id: str | None = None
    """The member's static id (from JoinGroup, not from the subscription bytes)."""


@attrs.frozen(kw_only=True)
class Assignment:
    """What one member is given."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


class Assignor(abc.ABC):
    """A partition assignment strategy; subclass it to plug in your own.

    ``name`` is the protocol name members agree on in JoinGroup.
    """

    name: ClassVar[str]
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @abc.abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Assign every partition of the subscribed topics; keyed by member id.

        ``partitions_per_topic`` holds the partition count of every topic some
        member subscribes to and that exists. Every member id of
        ``subscriptions`` gets an entry, possibly with no partitions.
        """

    def user_data(self, topics: Iterable[str]) -> bytes | None:
        """Bytes this member puts in its subscription (e.g. sticky's current assignment)."""
        return None

    def on_assignment(  # noqa: B027  (a hook: doing nothing is the default)
        self, assignment: Assignment, generation_id: int
    ) -> None:
        """Told what this member got, after each rebalance (sticky assignors remember it)."""
