"""KIP-848 regex subscriptions (SubscribedTopicRegex) against ``kafkette serve``, memory
and disk: librdkafka's (confluent-kafka 2.16) consumer and ours with
``group.protocol=consumer`` subscribe to librdkafka test 0033's pattern
``^.*[tToOpPiIcC]_0+[12]_[^_]+_<group>``, which the broker compiles with RE2 as Kafka
does with RE2/J; a pattern RE2 refuses gets Kafka's INVALID_REGULAR_EXPRESSION."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette import Consumer
from kafkette.errors import InvalidRegularExpressionError
from tests.brokers import BrokerProcess

WAIT_S = 30.0
GROUP = "4f2a6c01d9e3b7a5"
PREFIX = "rdkafkatest_rnd1a2b3c4d_regex_subscribe"
TOPICS = [
    f"{PREFIX}_TOPIC_0001_UNO_{GROUP}",
    f"{PREFIX}_topic_0002_dup_{GROUP}",
    f"{PREFIX}_TOOTHPIC_0003_3_{GROUP}",
    f"{PREFIX}_TOPIC_0001_UNO_0123456789abcdef",  # another run's topic
]
MATCHED = set(TOPICS[:2])
PATTERN = f"^.*[tToOpPiIcC]_0+[12]_[^_]+_{GROUP}"


@pytest.fixture(params=["memory", "disk"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    data_dir = tmp_path / "data" if request.param == "disk" else None
    broker = BrokerProcess(data_dir)
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(t, 2, 1) for t in TOPICS]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for topic in TOPICS:
            for partition in (0, 1):
                producer.produce(topic, value=f"{topic}/{partition}".encode(), partition=partition)
        assert producer.flush(30) == 0
        yield broker
    finally:
        broker.close()


def test_librdkafka_regex_subscription(server: BrokerProcess) -> None:
    """librdkafka sends the pattern to the broker, which assigns the partitions of the two
    matching topics and nothing else; their four records arrive."""
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([PATTERN])
        values: set[bytes] = set()
        deadline = time.monotonic() + WAIT_S
        while len(values) < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.add(message.value())
        assert values == {f"{t}/{p}".encode() for t in MATCHED for p in (0, 1)}
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert assigned == {(t, p) for t in MATCHED for p in (0, 1)}
    finally:
        consumer.close()


def test_our_consumer_regex_subscription(server: BrokerProcess) -> None:
    """Our consumer sends the pattern as SubscribedTopicRegex; the broker's matches are
    assigned and their records read."""
    with Consumer(
        bootstrap_servers=server.bootstrap,
        group_id=GROUP,
        group_protocol="consumer",
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.subscribe(PATTERN)
        values: set[bytes] = set()
        deadline = time.monotonic() + WAIT_S
        while len(values) < 4 and time.monotonic() < deadline:
            for records in consumer.poll(0.5).values():
                values.update(r.value for r in records if r.value is not None)
        assert values == {f"{t}/{p}".encode() for t in MATCHED for p in (0, 1)}
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {
            (t, p) for t in MATCHED for p in (0, 1)
        }


def test_our_consumer_gets_kafkas_error_for_a_pattern_re2_refuses(server: BrokerProcess) -> None:
    """Python's re accepts a backreference, RE2 (and RE2/J) does not: the heartbeat is
    answered INVALID_REGULAR_EXPRESSION with Kafka's message, and poll raises it."""
    pattern = r"^(rdkafkatest)_\1"
    with Consumer(
        bootstrap_servers=server.bootstrap, group_id="refused", group_protocol="consumer"
    ) as consumer:
        consumer.subscribe(pattern)
        with pytest.raises(InvalidRegularExpressionError) as info:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                consumer.poll(0.5)
        assert str(info.value.detail) == (
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
            "invalid escape sequence."
        )


def test_librdkafka_gets_kafkas_error_for_a_pattern_re2_refuses(server: BrokerProcess) -> None:
    """librdkafka checks patterns with its own engine, which accepts ``\\1``; the broker
    refuses it as RE2 does and librdkafka reports INVALID_REGULAR_EXPRESSION."""
    consumer = ConfluentConsumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "refused", "group.protocol": "consumer"}
    )
    try:
        consumer.subscribe([r"^(rdkafkatest)_\1"])
        error: KafkaError | None = None
        deadline = time.monotonic() + WAIT_S
        while error is None and time.monotonic() < deadline:
            try:
                message = consumer.poll(0.5)
            except KafkaException as e:
                error = e.args[0]
                break
            if message is not None and message.error() is not None:
                error = message.error()
        # librdkafka makes the heartbeat's error fatal (_FATAL) and names the broker's.
        assert error is not None
        assert error.code() == KafkaError._FATAL, error
        assert "Broker: The regular expression is not valid" in error.str(), error
    finally:
        consumer.close()
