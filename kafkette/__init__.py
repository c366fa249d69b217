"""kafkette: Kafka for Python.

Producers, consumers and an admin client speaking the Kafka wire protocol, a
bundled broker (``kafkette serve``) and an in-memory fake (``memory://``).
"""

from kafkette._version import __version__
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
