"""``kafkette serve`` with SASL, used by confluent-kafka, kafka-python, kcat and our clients.

One broker (SASL_PLAINTEXT, PLAIN and SCRAM-SHA-256/512 enabled) serves the
module. Each client produces records with each mechanism and reads them back;
wrong passwords fail fast with the client's authentication error.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from tests.brokers import BrokerProcess, kafkette_broker

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USER, PASSWORD = "alice", "s3cret,=:pw"
TIMEOUT_S = 30.0
RECORDS = [(b"k%d" % i, b"value-%d" % i) for i in range(5)]


@pytest.fixture(scope="module")
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(
        None, "--sasl-user", f"{USER}:{PASSWORD}", "--sasl-user", "bob:other"
    )


def ours(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
    }


def librdkafka(server: BrokerProcess, mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
    }


def kafka_python(server: BrokerProcess, mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap_servers": server.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": password,
    }


def read_ours(server: BrokerProcess, mechanism: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    with Consumer(bootstrap_servers=server.bootstrap, **_kw(ours(mechanism))) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        rows: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(RECORDS) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
        return rows


def _kw(settings: dict[str, Any]) -> dict[str, Any]:
    return {k.replace(".", "_"): v for k, v in settings.items()}


EXPECTED = [(i, key, value) for i, (key, value) in enumerate(RECORDS)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_our_clients(server: BrokerProcess, mechanism: str) -> None:
    """AdminClient, Producer and Consumer authenticate with each mechanism."""
    topic = f"ours-{mechanism}"
    with AdminClient(bootstrap_servers=server.bootstrap, **_kw(ours(mechanism))) as admin:
        admin.create_topics([NewTopic(topic, 1)]).all()
    with Producer({"bootstrap.servers": server.bootstrap, **ours(mechanism)}) as producer:
        futures = [producer.send(topic, value, key=key) for key, value in RECORDS]
        producer.flush()
        assert [f.result(timeout=TIMEOUT_S).offset for f in futures] == list(range(len(RECORDS)))
    assert read_ours(server, mechanism, topic) == EXPECTED


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_our_clients_refuse_wrong_password_fast(server: BrokerProcess, mechanism: str) -> None:
    """A wrong password raises SaslAuthenticationFailedError at once, from every client."""
    settings = {"bootstrap.servers": server.bootstrap, **ours(mechanism, "wrong")}
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as info, AdminClient(settings) as admin:
        admin.list_topics()
    assert "Authentication failed" in str(info.value)
    with pytest.raises(SaslAuthenticationFailedError), Producer(settings) as producer:
        producer.send("t", b"v").result(timeout=TIMEOUT_S)
    with pytest.raises(SaslAuthenticationFailedError), Consumer(settings) as consumer:
        consumer.assign([TopicPartition("t", 0)])
        consumer.poll(timeout_ms=10_000)
    assert time.monotonic() - started < 8


def test_our_client_names_the_enabled_mechanisms() -> None:
    """A broker that does not enable the mechanism says which it does."""
    broker = BrokerProcess(
        None, args=("--sasl-user", f"{USER}:{PASSWORD}", "--sasl-mechanisms", "SCRAM-SHA-512")
    )
    with broker:
        settings = {"bootstrap.servers": broker.bootstrap, **ours("PLAIN")}
        with pytest.raises(UnsupportedSaslMechanismError) as info, AdminClient(settings) as admin:
            admin.list_topics()
    assert info.value.detail is not None and info.value.detail.endswith(
        "does not enable SASL mechanism PLAIN (it offers: SCRAM-SHA-512)"
    )


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(server: BrokerProcess, mechanism: str) -> None:
    """librdkafka produces with SASL; we and it read the records back."""
    topic = f"confluent-{mechanism}"
    producer = ConfluentProducer({**librdkafka(server, mechanism), "linger.ms": 5})
    for key, value in RECORDS:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = ConfluentConsumer(
        {**librdkafka(server, mechanism), "group.id": f"g-{mechanism}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        rows: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                offset, got_key, got_value = message.offset(), message.key(), message.value()
                assert offset is not None and got_key is not None and got_value is not None
                rows.append((offset, got_key, got_value))
    finally:
        consumer.close()
    assert rows == EXPECTED
    assert read_ours(server, mechanism, topic) == EXPECTED


def test_confluent_kafka_wrong_password() -> None:
    """librdkafka reports the broker's message as an authentication error."""
    errors: list[ConfluentError] = []
    broker = BrokerProcess(None, args=("--sasl-user", f"{USER}:{PASSWORD}"))
    with broker:
        producer = ConfluentProducer(
            {**librdkafka(broker, "SCRAM-SHA-256", "wrong"), "error_cb": errors.append}
        )
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            producer.poll(0.05)
    assert errors and errors[0].code() == ConfluentError._AUTHENTICATION
    assert "Authentication failed during authentication due to invalid credentials" in (
        errors[0].str()
    )


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(server: BrokerProcess, mechanism: str) -> None:
    """kafka-python produces and consumes with SASL."""
    topic = f"kafka-python-{mechanism}"
    producer = KafkaProducer(**kafka_python(server, mechanism))
    try:
        for key, value in RECORDS:
            producer.send(topic, value=value, key=key, partition=0)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**kafka_python(server, mechanism), enable_auto_commit=False)
    try:
        partition = KpTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        rows: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(RECORDS) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    assert rows == EXPECTED
    assert read_ours(server, mechanism, topic) == EXPECTED


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_legacy_handshake_v0(server: BrokerProcess, mechanism: str) -> None:
    """kafka-python told the broker is 0.10.1 uses SaslHandshake v0 and unframed tokens."""
    topic = f"legacy-{mechanism}"
    with AdminClient({"bootstrap.servers": server.bootstrap, **ours(mechanism)}) as admin:
        admin.create_topics([NewTopic(topic, 1)]).all()
    consumer = KafkaConsumer(**kafka_python(server, mechanism), api_version=(0, 10, 1))
    try:
        assert topic in consumer.topics()
    finally:
        consumer.close()
    assert (
        f"authenticated as User:{USER} with {mechanism} (SaslHandshake v0, unframed tokens)"
        in server.log()
    )


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(server: BrokerProcess, mechanism: str) -> None:
    """aiokafka produces and consumes with SASL."""
    topic = f"aiokafka-{mechanism}"
    sasl: dict[str, Any] = {
        "bootstrap_servers": server.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }

    async def run() -> list[tuple[int, bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(**sasl)
        await producer.start()
        try:
            for key, value in RECORDS:
                await producer.send_and_wait(topic, value, key=key, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**sasl, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = AioTopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            batches = await consumer.getmany(partition, timeout_ms=5000)
            return [(r.offset, r.key, r.value) for r in batches.get(partition, [])]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == EXPECTED
    assert read_ours(server, mechanism, topic) == EXPECTED


KAFKA_PYTHON_WRONG_PASSWORD = """
import logging, sys
from kafka import KafkaProducer
from kafka.errors import KafkaError
logging.basicConfig(level=logging.WARNING)
try:
    KafkaProducer(
        bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
        sasl_plain_password="wrong", bootstrap_timeout_ms=1000,
    )
except KafkaError as exc:
    print("raised", type(exc).__name__)
"""


def test_kafka_python_wrong_password(server: BrokerProcess) -> None:
    """kafka-python gets SASL_AUTHENTICATION_FAILED with our message (it then retries
    until its bootstrap timeout, as it would against Kafka). In a child process: its
    failed constructor leaks sockets."""
    result = subprocess.run(
        [sys.executable, "-c", KAFKA_PYTHON_WRONG_PASSWORD, server.bootstrap],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.stdout == "raised KafkaTimeoutError\n", result.stderr
    assert (
        "SaslAuthenticationFailedError: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512"
    ) in result.stderr


def kcat(
    server: BrokerProcess, mechanism: str, *args: str, password: str = PASSWORD, **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    command = ["kcat", "-b", server.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT"]
    command += ["-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={USER}"]
    command += ["-X", f"sasl.password={password}", *args]
    return subprocess.run(command, capture_output=True, timeout=TIMEOUT_S, **kw)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat(server: BrokerProcess, mechanism: str) -> None:
    topic = f"kcat-{mechanism}"
    lines = b"".join(key + b":" + value + b"\n" for key, value in RECORDS)
    produced = kcat(server, mechanism, "-P", "-t", topic, "-p", "0", "-K:", input=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(
        server, mechanism, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o|%k|%s\n"
    )
    assert consumed.returncode == 0, consumed.stderr
    rows = [line.split(b"|") for line in consumed.stdout.splitlines()]
    assert [(int(o), k, v) for o, k, v in rows] == EXPECTED
    assert read_ours(server, mechanism, topic) == EXPECTED


def test_kcat_without_or_with_wrong_credentials(server: BrokerProcess) -> None:
    """No SASL: the broker closes the connection; a wrong password: kcat reports the failure."""
    plain = subprocess.run(
        ["kcat", "-b", server.bootstrap, "-L", "-m", "1"], capture_output=True, timeout=TIMEOUT_S
    )
    assert plain.returncode != 0 and b"Broker: " not in plain.stdout
    wrong = kcat(server, "PLAIN", "-L", "-m", "1", password="wrong")
    assert wrong.returncode != 0
    assert b"Authentication failed: Invalid username or password" in wrong.stderr
