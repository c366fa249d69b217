"""Reading back what the sink wrote: with kafkette's Consumer and with confluent-kafka's."""

from __future__ import annotations

import time
from typing import Any

from kafkette import AdminClient, Consumer, NewTopic, TopicPartition

Written = tuple[str, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""(topic, partition, key, value, headers) of one record."""

READ_TIMEOUT_S = 30.0


def create_topics(bootstrap: str, partitions: int, *topics: str) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).all()


def read_all(
    bootstrap: str, partitions_each: int, *topics: str, read_committed: bool = True
) -> list[Written]:
    """Every record of ``topics`` (``partitions_each`` partitions each) up to their ends
    now, in (topic, partition, offset) order."""
    isolation = "read_committed" if read_committed else "read_uncommitted"
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation) as consumer:
        partitions = [TopicPartition(t, p) for t in topics for p in range(partitions_each)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records: dict[TopicPartition, list[Any]] = {tp: [] for tp in partitions}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "the records did not arrive"
            for tp, batch in consumer.poll(timeout_ms=500).items():
                records[tp] += batch
    return [
        (r.topic, r.partition, r.key, r.value, [tuple(h) for h in r.headers])
        for tp in partitions
        for r in records[tp]
    ]


def read_with_confluent(bootstrap: str, topic: str, count: int) -> list[Written]:
    """``count`` records of ``topic`` read by confluent-kafka, read_committed, in
    (partition, offset) order."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"confluent-reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in metadata.topics[topic].partitions
            ]
        )
        messages: list[Any] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(messages) < count:
            assert time.monotonic() < deadline, f"{len(messages)} of {count} records arrived"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
        assert consumer.poll(0.5) is None  # and no more
    finally:
        consumer.close()
    messages.sort(key=lambda m: (m.partition(), m.offset()))
    return [
        (m.topic(), m.partition(), m.key(), m.value(), list(m.headers() or [])) for m in messages
    ]
