"""Idempotent producers (confluent-kafka, aiokafka) against ``kafkette serve``: 50,000
records to 3 partitions, the broker SIGKILLed and restarted (disk) in the middle; every
record must be there exactly once, in the order sent per partition.

Across the restart the clients retry the requests whose answers were lost with the same
sequence numbers; the broker, whose producer state is rebuilt from the log, acknowledges
those already written with their original offsets instead of writing them twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.brokers import BrokerProcess, kafkette_broker

N = 50_000
PARTITIONS = 3
TIMEOUT_S = 90.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from kafkette_broker(tmp_path / "data", "--set", f"num.partitions={PARTITIONS}")


def value(i: int) -> bytes:
    return b"%06d" % i


def check_exactly_once(consumed: dict[int, list[tuple[int, bytes]]]) -> None:
    """Each partition holds its records once each, in the order sent, at offsets 0..n-1."""
    for partition in range(PARTITIONS):
        rows = consumed.get(partition, [])
        want = [value(i) for i in range(N) if i % PARTITIONS == partition]
        assert [offset for offset, _ in rows] == list(range(len(rows)))
        got = [v for _, v in rows]
        assert len(got) == len(set(got)), "duplicates"
        assert got == want


def consume_all(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    consumed: dict[int, list[tuple[int, bytes]]] = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while count < N and time.monotonic() < deadline:
            for message in consumer.consume(5000, 0.5):
                assert message.error() is None, message.error()
                consumed.setdefault(message.partition() or 0, []).append(
                    (message.offset() or 0, message.value() or b"")
                )
                count += 1
        # anything beyond N would be a duplicate: give it a chance to show up
        for message in consumer.consume(5000, 0.5):
            consumed.setdefault(message.partition() or 0, []).append(
                (message.offset() or 0, message.value() or b"")
            )
    finally:
        consumer.close()
    return consumed


def test_confluent_kafka_idempotent_across_restart(server: BrokerProcess) -> None:
    errors: list[KafkaError] = []
    delivered = 0

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal delivered
        if error is not None:
            errors.append(error)
        else:
            delivered += 1

    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 500,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )
    for i in range(N):
        if i == N // 2:
            while delivered < N // 8:
                producer.poll(0.001)
            server.kill()  # while the first half is still being sent
            server.start()
        while True:
            try:
                producer.produce(
                    "idem", value(i), partition=i % PARTITIONS, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    assert delivered == N
    check_exactly_once(consume_all(server.bootstrap, "idem"))


def test_aiokafka_idempotent_across_restart(server: BrokerProcess) -> None:
    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=server.bootstrap,
            enable_idempotence=True,
            linger_ms=5,
            retry_backoff_ms=20,
            request_timeout_ms=int(TIMEOUT_S * 1000),
        )
        await producer.start()
        try:
            futures = []
            for i in range(N):
                if i == N // 2:
                    await asyncio.to_thread(server.kill)
                    await asyncio.to_thread(server.start)
                futures.append(await producer.send("aio-idem", value(i), partition=i % PARTITIONS))
            await producer.flush()
            results = await asyncio.gather(*futures)
            assert len(results) == N
        finally:
            await producer.stop()

    asyncio.run(produce())
    check_exactly_once(consume_all(server.bootstrap, "aio-idem"))
