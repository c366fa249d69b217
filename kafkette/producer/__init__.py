"""kafkette.producer: AsyncProducer (anyio) and Producer (sync), and their parts."""

from kafkette.producer.futures import RecordFuture, RecordMetadata
from kafkette.producer.producer import AsyncProducer
from kafkette.producer.sync_producer import Producer

__all__ = ["AsyncProducer", "Producer", "RecordFuture", "RecordMetadata"]
