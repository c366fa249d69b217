"""kafkette: Kafka for Python.

Producers, consumers and an admin client speaking the Kafka wire protocol, a
bundled broker (``kafkette serve``) and an in-memory fake (``memory://``).
"""

__version__ = "0.1.0"  # before the imports below: kafkette.client reads it

from kafkette.admin import AdminClient, AsyncAdminClient, NewPartitions, NewTopic
from kafkette.consumer import (
    AsyncConsumer,
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
)
from kafkette.producer import AsyncProducer, Producer, RecordMetadata
from kafkette.structs import TopicPartition

__all__ = [
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
    "__version__",
]
