"""Kafka's per-request partition limit as clients see it, against ``kafkette serve``.

The frame of the issue (CreateTopics for 16,777,215 partitions, which
librdkafka will not send: it stops at 100,000) gets POLICY_VIOLATION at once,
without the broker growing; confluent-kafka's ``create_topics`` and
``create_partitions`` show Kafka's message over 10,000 new partitions, and
10,000 partitions in one request still work.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import CreateTopicsRequest
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from tests.brokers import BrokerProcess

TIMEOUT_S = 30.0
MESSAGE = "Excessively large number of partitions per request."


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(None) as process:
        yield process


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def rss_bytes(broker: BrokerProcess) -> int:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def create_error(admin: AdminClient, topic: NewTopic) -> KafkaError | None:
    future = admin.create_topics([topic], request_timeout=TIMEOUT_S)[topic.topic]
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def create_raw(broker: BrokerProcess, name: str, partitions: int) -> tuple[int, str | None]:
    """CreateTopics v5 on a raw socket: the topic's error code and message."""
    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    body = encode_request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 5, 1, None)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        file = sock.makefile("rb")
        size = struct.unpack(">i", file.read(4))[0]
        _, response = decode_response(file.read(size), CreateTopicsRequest.API_KEY, 5)
    (result,) = response.topics
    return result.error_code, result.error_message


def test_sixteen_million_partitions_are_refused_at_once(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    """The issue's frame: before the limit it grew the broker to 4 GB for 30 s."""
    assert create_raw(broker, "warm-up", 1) == (0, None)
    before = rss_bytes(broker)
    assert create_raw(broker, "huge", 16_777_215) == (KafkaError.POLICY_VIOLATION, MESSAGE)
    assert rss_bytes(broker) - before < 4 * 1024 * 1024
    assert "huge" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_confluent_kafka_shows_kafkas_message(admin: AdminClient) -> None:
    error = create_error(admin, NewTopic("huge", 100_000, 1))  # librdkafka's largest
    assert error is not None
    assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION, MESSAGE)


def test_ten_thousand_partitions_work_and_ten_thousand_and_one_are_refused(
    admin: AdminClient,
) -> None:
    assert create_error(admin, NewTopic("ten-thousand", 10_000, 1)) is None
    error = create_error(admin, NewTopic("one-more", 10_001, 1))
    assert error is not None
    assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION, MESSAGE)
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert len(topics["ten-thousand"].partitions) == 10_000
    assert "one-more" not in topics


def test_create_partitions_over_the_limit_is_refused(admin: AdminClient) -> None:
    assert create_error(admin, NewTopic("grows", 1, 1)) is None
    future = admin.create_partitions([NewPartitions("grows", 10_002)], request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        future["grows"].result(timeout=TIMEOUT_S)
    error = raised.value.args[0]
    assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION, MESSAGE)
    future = admin.create_partitions([NewPartitions("grows", 10_001)], request_timeout=TIMEOUT_S)
    future["grows"].result(timeout=TIMEOUT_S)
    assert len(admin.list_topics("grows", timeout=TIMEOUT_S).topics["grows"].partitions) == 10_001
