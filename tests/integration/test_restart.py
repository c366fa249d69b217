"""Durability across a crash: records acknowledged with acks=all survive a SIGKILL of
``kafkette serve --data-dir`` and are read back, in order, at their acknowledged offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.brokers import BrokerProcess, kafkette_broker

PARTITIONS = 2
FIRST = 5_000
SECOND = 20_000
TIMEOUT_S = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from kafkette_broker(tmp_path / "data", "--set", f"num.partitions={PARTITIONS}")


def read_all(bootstrap: str, topic: str, counts: dict[int, int]) -> dict[int, list[bytes]]:
    """Every record of each partition, from offset 0 up to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    rows: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while (
            any(len(rows[p]) < counts[p] for p in range(PARTITIONS)) and time.monotonic() < deadline
        ):
            for message in consumer.consume(5000, 0.5):
                assert message.error() is None, message.error()
                partition = message.partition() or 0
                assert message.offset() == len(rows[partition])  # contiguous from 0
                rows[partition].append(message.value() or b"")
    finally:
        consumer.close()
    return rows


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def test_acknowledged_records_survive_sigkill(server: BrokerProcess) -> None:
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked[(message.partition() or 0, message.offset() or 0)] = message.value() or b""

    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "batch.num.messages": 200,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )

    def send(start: int, stop: int) -> None:
        for i in range(start, stop):
            while True:
                try:
                    producer.produce(
                        "durable",
                        b"record-%06d" % i,
                        partition=i % PARTITIONS,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)

    send(0, FIRST)
    assert producer.flush(TIMEOUT_S) == 0
    assert len(acked) == FIRST
    server.kill()
    server.start()
    # All of the first part is back, in the order sent, at the acknowledged offsets.
    rows = read_all(
        server.bootstrap, "durable", dict.fromkeys(range(PARTITIONS), FIRST // PARTITIONS)
    )
    for p in range(PARTITIONS):
        assert rows[p] == [b"record-%06d" % i for i in range(FIRST) if i % PARTITIONS == p]

    # Now a crash in the middle of a stream of acks=all requests.
    send(FIRST, FIRST + SECOND // 2)
    while len(acked) < FIRST + SECOND // 8:
        producer.poll(0.001)
    server.kill()
    before_restart = dict(acked)
    server.start()
    send(FIRST + SECOND // 2, FIRST + SECOND)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    marks = high_watermarks(server.bootstrap, "durable")
    rows = read_all(server.bootstrap, "durable", marks)
    assert {p: len(rows[p]) for p in range(PARTITIONS)} == marks
    for (partition, offset), value in before_restart.items():
        assert rows[partition][offset] == value
    for (partition, offset), value in acked.items():
        assert rows[partition][offset] == value
    # Without idempotence a retried batch may be written twice, but nothing acknowledged
    # is missing: every value sent is there.
    stored = {v for p in range(PARTITIONS) for v in rows[p]}
    assert stored == {b"record-%06d" % i for i in range(FIRST + SECOND)}
