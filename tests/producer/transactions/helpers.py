"""Reading a topic back to its end, with either isolation level, sync or async."""

from __future__ import annotations

import time

import anyio

from kafkette import AsyncConsumer, Consumer, TopicPartition

Stored = tuple[int, int, bytes | None]
"""(partition, offset, value) of one record read back."""


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    timeout_s: float = 20,
    *,
    fetch_max_wait_ms: int = 50,
) -> list[Stored]:
    """Every record of ``topic`` up to the end offsets (the LSO with read_committed),
    sorted by partition and offset.

    ``fetch_max_wait_ms=0`` for a broker on a ManualClock, where a parked fetch would
    wait for the clock to move.
    """
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=fetch_max_wait_ms,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Stored] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"read {len(records)} records, ends {ends}"
            for tp, batch in consumer.poll(100).items():
                records += [(tp.partition, r.offset, r.value) for r in batch]
        return sorted(records)
    finally:
        consumer.close()


async def read_all_async(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 20
) -> list[Stored]:
    """:func:`read_all` with the AsyncConsumer."""
    async with AsyncConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Stored] = []
        with anyio.fail_after(timeout_s):
            while True:
                positions = [await consumer.position(tp) for tp in tps]
                if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                    return sorted(records)
                for tp, batch in (await consumer.poll(100)).items():
                    records += [(tp.partition, r.offset, r.value) for r in batch]


def values(records: list[Stored]) -> list[bytes | None]:
    return [value for _, _, value in records]


def confluent_read(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 20
) -> list[Stored]:
    """:func:`read_all` with confluent-kafka (librdkafka) as an independent reader:
    until every partition reports its end (the LSO with read_committed)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"oracle-{topic}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([ConfluentPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: list[Stored] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"read {len(records)} records"
            for message in consumer.consume(1000, 0.1):
                error = message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                    continue
                assert error is None and offset is not None, str(error)
                at_end.discard(partition)
                records.append((partition, offset, message.value()))
        return sorted(records)
    finally:
        consumer.close()
