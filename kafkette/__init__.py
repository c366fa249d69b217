"""kafkette: Kafka for Python.

Producers, consumers and an admin client speaking the Kafka wire protocol, a
bundled broker (``kafkette serve``) and an in-memory fake (``memory://``).

The names below are imported on first use: ``from kafkette import Producer``
loads the producer, not the consumers and the admin client too (importing
them all takes most of a second, which every script and CLI command paid).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette._lazy import lazy_names
from kafkette._version import __version__

if TYPE_CHECKING:
    from kafkette.admin import AdminClient, AsyncAdminClient, NewPartitions, NewTopic
    from kafkette.consumer import (
        AsyncConsumer,
        Consumer,
        ConsumerGroupMetadata,
        ConsumerRebalanceListener,
        ConsumerRecord,
        OffsetAndMetadata,
    )
    from kafkette.consumer.share import (
        AcknowledgeType,
        AsyncShareConsumer,
        ShareConsumer,
        ShareConsumerRecord,
    )
    from kafkette.producer import AsyncProducer, Producer, RecordMetadata
    from kafkette.structs import TopicPartition

_HOMES = {
    "AdminClient": "kafkette.admin",
    "AsyncAdminClient": "kafkette.admin",
    "NewPartitions": "kafkette.admin",
    "NewTopic": "kafkette.admin",
    "AsyncConsumer": "kafkette.consumer",
    "Consumer": "kafkette.consumer",
    "ConsumerGroupMetadata": "kafkette.consumer",
    "ConsumerRebalanceListener": "kafkette.consumer",
    "ConsumerRecord": "kafkette.consumer",
    "OffsetAndMetadata": "kafkette.consumer",
    "AcknowledgeType": "kafkette.consumer.share",
    "AsyncShareConsumer": "kafkette.consumer.share",
    "ShareConsumer": "kafkette.consumer.share",
    "ShareConsumerRecord": "kafkette.consumer.share",
    "AsyncProducer": "kafkette.producer",
    "Producer": "kafkette.producer",
    "RecordMetadata": "kafkette.producer",
    "TopicPartition": "kafkette.structs",
}
"""Each public name and the module it is imported from on first use."""

__all__ = [
    "AcknowledgeType",
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncProducer",
    "AsyncShareConsumer",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
    "__version__",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
