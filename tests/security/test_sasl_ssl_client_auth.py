"""KIP-684: the broker-wide ``ssl.client.auth`` applies to SSL listeners only; a SASL_SSL
listener asks for a client certificate only with its own
``listener.name.<listener>.ssl.client.auth`` (Kafka's ``ChannelBuilders``). Checked with
librdkafka (confluent-kafka) and our clients, on memory and disk storage (librdkafka's
test 0097 on SASL_SSL)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.errors import KafkaTimeoutError
from tests.security.servers import STORAGES, ListenerBroker, Pki, storage_args
from tests.security.test_tls_clients import confluent_errors, wait_for_log

USER, PASSWORD = "alice", "alice-secret"
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(params=STORAGES)
def storage(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def start(pki: Pki, storage: str, directory: Path, *extra: str) -> ListenerBroker:
    return ListenerBroker(
        *storage_args(storage, directory),
        "--listener", "SSL://127.0.0.1:0",
        "--listener", "SASL_SSL://127.0.0.1:0",
        "--sasl-user", f"{USER}:{PASSWORD}",
        "--sasl-mechanisms", "SCRAM-SHA-256",
        *pki.server_properties("required"),
        *extra,
    ).start()  # fmt: skip


@pytest.fixture
def broker_wide_required(pki: Pki, storage: str, tmp_path: Path) -> Iterator[ListenerBroker]:
    """ssl.client.auth=required, nothing for the SASL_SSL listener itself."""
    broker = start(pki, storage, tmp_path)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def listener_required(pki: Pki, storage: str, tmp_path: Path) -> Iterator[ListenerBroker]:
    """listener.name.sasl_ssl.ssl.client.auth=required."""
    broker = start(
        pki, storage, tmp_path, "--set", "listener.name.sasl_ssl.ssl.client.auth=required"
    )
    try:
        yield broker
    finally:
        broker.close()


def sasl_ssl(
    server: ListenerBroker, pki: Pki, cert: tuple[str, str] | None = None
) -> dict[str, Any]:
    """SASL_SSL settings (librdkafka's names, which ours share but for sasl.mechanism)."""
    settings = {
        "bootstrap.servers": server.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": pki.ca_file,
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }
    if cert is not None:
        settings["ssl.certificate.location"], settings["ssl.key.location"] = cert
    return settings


def librdkafka_round_trip(settings: dict[str, Any], topic: str) -> list[bytes]:
    producer = ConfluentProducer(settings)
    producer.produce(topic, value=b"from librdkafka", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = ConfluentConsumer({**settings, "group.id": "kip684", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not values and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        return values
    finally:
        consumer.close()


def our_round_trip(settings: dict[str, Any], topic: str) -> list[bytes | None]:
    with Producer(settings) as producer:
        producer.send(topic, b"from kafkette", partition=0).result(TIMEOUT_S)
    with Consumer(settings) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values: list[bytes | None] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not values and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        return values


def test_broker_wide_required_leaves_sasl_ssl_clients_without_certificates(
    broker_wide_required: ListenerBroker, pki: Pki
) -> None:
    """Clients without a certificate authenticate on SASL_SSL (by SCRAM), produce and read
    back; the SSL listener still refuses them; the start-up log names the setting."""
    server = broker_wide_required
    assert librdkafka_round_trip(sasl_ssl(server, pki), "by-librdkafka") == [b"from librdkafka"]
    assert our_round_trip(sasl_ssl(server, pki), "by-kafkette") == [b"from kafkette"]
    log = server.log()
    assert "listener.name.sasl_ssl.ssl.client.auth=required sets it" in log
    ssl_without_cert = {
        "bootstrap.servers": server.bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": pki.ca_file,
    }
    errors = confluent_errors(ssl_without_cert)
    assert errors and errors[0].code() == ConfluentError._ALL_BROKERS_DOWN
    wait_for_log(server, "failed: PEER_DID_NOT_RETURN_A_CERTIFICATE (SSL)")


def test_listener_required_refuses_sasl_ssl_clients_without_certificates(
    listener_required: ListenerBroker, pki: Pki
) -> None:
    """With the listener's own setting, a SASL_SSL client without a certificate fails the
    TLS handshake (librdkafka and ours); with a trusted one it authenticates."""
    server = listener_required
    errors = confluent_errors(sasl_ssl(server, pki))
    assert errors and errors[0].code() == ConfluentError._ALL_BROKERS_DOWN
    wait_for_log(server, "failed: PEER_DID_NOT_RETURN_A_CERTIFICATE (SSL)")
    ours = {**sasl_ssl(server, pki), "default.api.timeout.ms": 2000}
    with pytest.raises(KafkaTimeoutError), AdminClient(ours) as admin:
        admin.list_topics()
    with_cert = sasl_ssl(server, pki, cert=pki.client("alice"))
    topics = ConfluentAdmin(with_cert).list_topics(timeout=TIMEOUT_S)
    assert [b.port for b in topics.brokers.values()] == [server.ports["SASL_SSL"]]
    assert our_round_trip(with_cert, "with-cert") == [b"from kafkette"]
