"""kafkette.consumer.group: the client side of a consumer group (classic protocol).

:mod:`.types` holds the public values (offsets to commit, the group's
metadata, the rebalance listener), :mod:`.timers` the heartbeat, session and
poll deadlines, :mod:`.offsets` the OffsetCommit/OffsetFetch exchanges,
:mod:`.rebalance` what a new assignment changes, :mod:`.membership` the
member's states and the requests and answers of join, sync, heartbeats and
leave (no I/O), and :mod:`.coordinator` the member's I/O: it sends those
requests, runs the rebalance listener and commits.

Usage, through the consumers::

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions):
            consumer.commit()            # commit what was processed

    with Consumer(bootstrap_servers=..., group_id="billing",
                  enable_auto_commit=False) as consumer:
        consumer.subscribe(["invoices"], listener=Listener())
        while True:
            for tp, records in consumer.poll(timeout_ms=1_000).items():
                process(records)
            consumer.commit_async()      # or commit({tp: OffsetAndMetadata(next_offset)})
"""

from kafkette.consumer.group.types import ConsumerRebalanceListener
from kafkette.errors import CommitFailedError
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata

__all__ = [
    "CommitFailedError",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "OffsetAndMetadata",
]
