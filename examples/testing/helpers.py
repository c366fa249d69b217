"""Reading a topic back in the example tests, on any Kafka."""

from __future__ import annotations

from kafkette import Consumer, ConsumerRecord, TopicPartition


def read_all(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    *,
    isolation_level: str = "read_committed",
) -> list[ConsumerRecord]:
    """Every record of ``topic`` up to its end, partition by partition."""
    with Consumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    ) as consumer:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        ends = consumer.end_offsets(assigned, timeout=10.0)
        consumer.assign(assigned)
        records: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in assigned}
        while any(consumer.position(tp, timeout=10.0) < ends[tp] for tp in assigned):
            for tp, batch in consumer.poll(1.0).items():
                records[tp].extend(batch)
        return [record for tp in assigned for record in records[tp]]
