"""Offsets by timestamp and DeleteRecords as confluent-kafka (librdkafka) sees them."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.brokers import BrokerProcess

BASE = 1_700_000_000_000
N = 100


def produce_timed(bootstrap: str, topic: str) -> None:
    """Record i at timestamp BASE + 10 * i, in batches of various sizes."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 7})
    for i in range(N):
        producer.produce(
            topic, b"value-%d" % i, b"key-%d" % i, partition=0, timestamp=BASE + 10 * i
        )
    assert producer.flush(30) == 0


def test_offsets_for_times_is_exact(broker: BrokerProcess) -> None:
    produce_timed(broker.bootstrap, "timed")
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        wanted = [BASE - 5, BASE, BASE + 55, BASE + 60, BASE + 10 * (N - 1), BASE + 10 * N]
        found = [
            consumer.offsets_for_times([TopicPartition("timed", 0, ts)], timeout=10)[0]
            for ts in wanted
        ]
        assert [(tp.error, tp.offset) for tp in found] == [
            (None, 0),
            (None, 0),
            (None, 6),
            (None, 6),
            (None, N - 1),
            (None, -1),  # no record that late: the end (librdkafka's OFFSET_END)
        ]
    finally:
        consumer.close()


def test_delete_records_moves_the_low_watermark(broker: BrokerProcess) -> None:
    produce_timed(broker.bootstrap, "trimmed")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition("trimmed", 0, 40)])
    result = next(iter(futures.values())).result(timeout=30)
    assert result.low_watermark == 40
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=10) == (40, N)
        consumer.assign([TopicPartition("trimmed", 0, OFFSET_BEGINNING)])
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                first = message
        assert first is not None
        assert (first.offset(), first.key(), first.timestamp()[1]) == (40, b"key-40", BASE + 400)
    finally:
        consumer.close()


def test_long_poll_wakes_on_produce(memory_broker: BrokerProcess) -> None:
    """A consumer's fetch parked for up to 10 s returns as soon as a record arrives."""
    bootstrap = memory_broker.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("waiting", b"first", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10_000,
            "fetch.min.bytes": 1,
        }
    )
    try:
        consumer.assign([TopicPartition("waiting", 0, 1)])
        assert consumer.poll(1.0) is None  # nothing yet: the fetch is parked on the broker
        started = time.monotonic()
        producer.produce("waiting", b"second", partition=0)
        assert producer.flush(30) == 0
        message = None
        while message is None and time.monotonic() - started < 9:
            message = consumer.poll(0.1)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (1, b"second")
        assert time.monotonic() - started < 5  # well before the 10 s fetch.wait.max.ms
    finally:
        consumer.close()
