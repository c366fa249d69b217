"""``__share_group_state`` in the broker's logs: the share coordinator's records
appended, and read back when the broker starts.

The topic is made on first use with Kafka's partition count and configs
(:mod:`.persistence`); a record goes to the partition of its coordinator key
(``group:topicId:partition``), as Kafka's share coordinator places it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkette.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches
from kafkette.server.internal_topic import InternalTopic
from kafkette.server.share.persistence import (
    STATE_TOPIC,
    STATE_TOPIC_CONFIGS,
    STATE_TOPIC_PARTITIONS,
)

if TYPE_CHECKING:
    from kafkette.backends import Log
    from kafkette.server.cluster import Cluster

logger = logging.getLogger("kafkette.server.share")

READ_CHUNK_BYTES = 1 << 20


def share_state_topic(
    cluster: Cluster, *, clock: Callable[[], int], appended: Callable[[Log], None]
) -> InternalTopic:
    """``__share_group_state`` as Kafka creates it."""
    return InternalTopic(
        cluster,
        STATE_TOPIC,
        partitions=STATE_TOPIC_PARTITIONS,
        configs=STATE_TOPIC_CONFIGS,
        clock=clock,
        appended=appended,
        logger=logger,
    )


class ShareStateLog:
    """Appends share-state records to ``topic`` and reads them back."""

    def __init__(self, topic: InternalTopic) -> None:
        self.topic = topic

    def append(self, coordinator_key: str, key: bytes, value: bytes | None) -> None:
        """Append one record to the partition of ``coordinator_key``."""
        builder = RecordBatchBuilder()
        builder.append(self.topic.now_ms(), key, value)
        self.topic.append(self.topic.partition(coordinator_key), builder.build())

    def load(self) -> list[tuple[bytes, bytes | None]]:
        """Every record, partition by partition in offset order (none without the topic)."""
        topic = self.topic.existing()
        if topic is None:
            return []
        found: list[tuple[bytes, bytes | None]] = []
        for partition in topic.partitions:
            log = partition.log
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                data = log.read(offset, READ_CHUNK_BYTES, end).to_bytes()
                if not data:
                    break
                for batch in iter_batches(data, allow_partial=False):
                    assert isinstance(batch, RecordBatch)
                    offset = batch.next_offset
                    if not batch.is_control:
                        found.extend((r.key, r.value) for r in batch if r.key is not None)
        return found
