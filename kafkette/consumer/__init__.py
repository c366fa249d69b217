"""kafkette.consumer: AsyncConsumer and Consumer, on assigned partitions or in a group."""

from kafkette.consumer.async_consumer import AsyncConsumer
from kafkette.consumer.consumer import Consumer
from kafkette.consumer.group import (
    CommitFailedError,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.consumer.offsets import OffsetAndTimestamp
from kafkette.consumer.record import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    ConsumerRecord,
)
from kafkette.consumer.subscription import NoOffsetForPartitionError

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "AsyncConsumer",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerMetrics",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
]
