"""kafkette.consumer.group: the client side of a consumer group (classic protocol).

:mod:`.types` holds the public values (offsets to commit, the group's
metadata, the rebalance listener), :mod:`.timers` the heartbeat, session and
poll deadlines, :mod:`.offsets` the OffsetCommit/OffsetFetch exchanges,
:mod:`.rebalance` what a new assignment changes, and :mod:`.coordinator` the
member itself: join, sync, heartbeats, commits, leave.
"""

from kafkette.consumer.group.types import (
    CommitFailedError,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)

__all__ = [
    "CommitFailedError",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "OffsetAndMetadata",
]
