"""The rebalance listener of the group consumer (its value types are in :mod:`kafkette.structs`)."""

from __future__ import annotations

from typing import Any

from kafkette.structs import TopicPartition


class ConsumerRebalanceListener:
    """Told about assignment changes; subclass it and override what you need.

    The methods run on the application's thread (or task, for
    :class:`~kafkette.AsyncConsumer`, where they may be ``async def``) from
    inside ``poll``, ``close`` or ``unsubscribe``, as in Java:

    - ``on_partitions_revoked``: partitions given up in a rebalance (all of
      them in the eager protocol, only those that move in the cooperative
      one), before they go; commit their offsets here when committing by hand;
    - ``on_partitions_assigned``: partitions gained (eager: the whole new
      assignment; cooperative: the added ones, possibly none);
    - ``on_partitions_lost``: partitions that already belong to someone else
      (the member was fenced or timed out): no commit can succeed for them.
    """

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        """Partitions about to be given up."""

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        """Partitions just received."""

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        """Partitions already owned by someone else; defaults to ``on_partitions_revoked``."""
        return self.on_partitions_revoked(partitions)
