"""kafkette.consumer: AsyncConsumer and Consumer, on assigned partitions or in a group.

The names below are imported on first use (:mod:`kafkette._lazy`): a module of this
package (a record, an assignor) does not load both consumers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette._lazy import lazy_names

if TYPE_CHECKING:
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

_HOMES = {
    "AsyncConsumer": "kafkette.consumer.async_consumer",
    "Consumer": "kafkette.consumer.consumer",
    "CommitFailedError": "kafkette.consumer.group",
    "ConsumerGroupMetadata": "kafkette.consumer.group",
    "ConsumerRebalanceListener": "kafkette.consumer.group",
    "OffsetAndMetadata": "kafkette.consumer.group",
    "ConsumerMetrics": "kafkette.consumer.metrics",
    "OffsetAndTimestamp": "kafkette.consumer.offsets",
    "CREATE_TIME": "kafkette.consumer.record",
    "LOG_APPEND_TIME": "kafkette.consumer.record",
    "NO_TIMESTAMP_TYPE": "kafkette.consumer.record",
    "ConsumerRecord": "kafkette.consumer.record",
    "NoOffsetForPartitionError": "kafkette.consumer.subscription",
}

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

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
