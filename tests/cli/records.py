"""Reading and writing records in-process, to check what the command line did."""

from __future__ import annotations

from kafkette import AdminClient, Consumer, NewTopic, TopicPartition
from kafkette.consumer.fetch_buffer import FetchedBatch

Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)]).all()


def read_all(
    bootstrap: str, topic: str, partitions: int = 1, isolation: str = "read_uncommitted"
) -> list[Row]:
    """Every record of ``topic`` as (partition, offset, key, value, headers), in that order."""
    rows: list[Row] = []
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, fetch_max_wait_ms=10
    ) as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout=1.0).values():
                rows += [(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records]
    return sorted(rows, key=lambda row: (row[0], row[1]))


def batches(bootstrap: str, topic: str) -> list[FetchedBatch]:
    """The record batches of partition 0 of ``topic``, whole."""
    tp = TopicPartition(topic, 0)
    found: list[FetchedBatch] = []
    with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=10) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        while consumer.position(tp) < end:
            for got in consumer.poll_batches(timeout_ms=1000).values():
                found += got
    return found
