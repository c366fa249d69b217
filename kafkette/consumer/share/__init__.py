"""kafkette.consumer.share: share group members (KIP-932, Kafka's queues),
:class:`ShareConsumer` and :class:`AsyncShareConsumer`."""

from kafkette.consumer.share.async_consumer import AsyncShareConsumer
from kafkette.consumer.share.consumer import ShareConsumer
from kafkette.consumer.share.record import (
    AcknowledgementCommitCallback,
    AcknowledgeType,
    ShareConsumerRecord,
)

__all__ = [
    "AcknowledgeType",
    "AcknowledgementCommitCallback",
    "AsyncShareConsumer",
    "ShareConsumer",
    "ShareConsumerRecord",
]
