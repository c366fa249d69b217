"""The broker's own TLS listeners, used by confluent-kafka, kafka-python and our clients.

One broker serves the module with three listeners: SSL (client certificates
requested, checked against the test CA), SASL_SSL (PLAIN and SCRAM-SHA-512)
and PLAINTEXT, advertised as ``localhost`` to show that each client is told
the address of the listener it came in on; the module runs once with the
broker's records in memory and once on disk. Every client produces records and
reads them back exactly, also a Fetch answer of several MiB (many TLS records,
more than the socket buffers hold), and so does the ``kafkette`` command; a
wrong password, an unknown user and a certificate from another CA are refused
with each client's error.
"""

from __future__ import annotations

import socket
import subprocess
import sys
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
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.errors import KafkaTimeoutError, SaslAuthenticationFailedError
from tests.brokers import free_port
from tests.cli.cli import kafkette, ok
from tests.security.servers import STORAGES, ListenerBroker, Pki, storage_args

USER, PASSWORD = "alice", "s3cret,=:pw"
TIMEOUT_S = 30.0
RECORDS = [(b"k%d" % i, b"value-%d" % i) for i in range(5)]
EXPECTED = [(i, key, value) for i, (key, value) in enumerate(RECORDS)]
ALICE_DN = "User:CN=alice,OU=clients,O=kafkette tests"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module", params=STORAGES)
def storage(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(
    pki: Pki, storage: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ListenerBroker]:
    plaintext_port = free_port()
    broker = ListenerBroker(
        *storage_args(storage, tmp_path_factory.mktemp("data")),
        "--listener",
        "SSL://127.0.0.1:0",
        "--listener",
        "SASL_SSL://127.0.0.1:0",
        "--listener",
        f"PLAINTEXT://127.0.0.1:{plaintext_port}",
        "--set",
        f"advertised.listeners=PLAINTEXT://localhost:{plaintext_port}",
        "--sasl-user",
        f"{USER}:{PASSWORD}",
        "--sasl-mechanisms",
        "PLAIN,SCRAM-SHA-512",
        *pki.server_properties("requested"),
    )
    try:
        yield broker.start()
    finally:
        broker.close()


# -- settings for each client -------------------------------------------------------------


def librdkafka(
    server: ListenerBroker,
    pki: Pki,
    mechanism: str | None,
    *,
    cert: tuple[str, str] | None = None,
    user: str = USER,
    password: str = PASSWORD,
) -> dict[str, Any]:
    """librdkafka settings: SSL with a client certificate (alice's unless ``cert``) when
    ``mechanism`` is None, else SASL_SSL."""
    if mechanism is None:
        cert_file, key_file = cert or pki.client("alice")
        return {
            "bootstrap.servers": server.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_file,
            "ssl.certificate.location": cert_file,
            "ssl.key.location": key_file,
        }
    return {
        "bootstrap.servers": server.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": pki.ca_file,
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def ours(
    server: ListenerBroker,
    pki: Pki,
    mechanism: str | None,
    *,
    cert: tuple[str, str] | None = None,
    user: str = USER,
    password: str = PASSWORD,
) -> dict[str, Any]:
    settings = librdkafka(server, pki, mechanism, cert=cert, user=user, password=password)
    if mechanism is not None:
        settings["sasl.mechanism"] = settings.pop("sasl.mechanisms")
    return settings


def kafka_python(server: ListenerBroker, pki: Pki, mechanism: str | None) -> dict[str, Any]:
    if mechanism is None:
        cert, key = pki.client("alice")
        return {
            "bootstrap_servers": server.bootstrap("SSL"),
            "security_protocol": "SSL",
            "ssl_cafile": pki.ca_file,
            "ssl_certfile": cert,
            "ssl_keyfile": key,
        }
    return {
        "bootstrap_servers": server.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": pki.ca_file,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }


def read_ours(server: ListenerBroker, pki: Pki, topic: str) -> list[tuple[int, bytes, bytes]]:
    """The topic's records, read back by our consumer over SSL with a client certificate."""
    with Consumer(ours(server, pki, None)) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        rows: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(RECORDS) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
        return rows


WAYS = [None, "PLAIN", "SCRAM-SHA-512"]
WAY_IDS = ["SSL-client-cert", "SASL_SSL-PLAIN", "SASL_SSL-SCRAM-SHA-512"]


# -- records over TLS ---------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", WAYS, ids=WAY_IDS)
def test_confluent_kafka(server: ListenerBroker, pki: Pki, mechanism: str | None) -> None:
    """librdkafka produces and consumes over the broker's own TLS listeners."""
    topic = f"confluent-{mechanism}"
    producer = ConfluentProducer({**librdkafka(server, pki, mechanism), "linger.ms": 5})
    for key, value in RECORDS:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = ConfluentConsumer(
        {
            **librdkafka(server, pki, mechanism),
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
        }
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
    assert read_ours(server, pki, topic) == EXPECTED


@pytest.mark.parametrize("mechanism", WAYS, ids=WAY_IDS)
def test_kafka_python(server: ListenerBroker, pki: Pki, mechanism: str | None) -> None:
    """kafka-python produces and consumes over the broker's own TLS listeners."""
    topic = f"kafka-python-{mechanism}"
    producer = KafkaProducer(**kafka_python(server, pki, mechanism))
    try:
        for key, value in RECORDS:
            producer.send(topic, value=value, key=key, partition=0)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**kafka_python(server, pki, mechanism), enable_auto_commit=False)
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
    assert read_ours(server, pki, topic) == EXPECTED


@pytest.mark.parametrize("mechanism", WAYS, ids=WAY_IDS)
def test_our_clients(server: ListenerBroker, pki: Pki, mechanism: str | None) -> None:
    """Our producer writes over TLS; our consumer reads the records back exactly."""
    topic = f"ours-{mechanism}"
    with Producer({**ours(server, pki, mechanism), "linger.ms": 5}) as producer:
        futures = [producer.send(topic, value, key=key, partition=0) for key, value in RECORDS]
        producer.flush()
        assert [f.result().offset for f in futures] == [0, 1, 2, 3, 4]
    assert read_ours(server, pki, topic) == EXPECTED


BIG = [(b"big-%d" % i, bytes([65 + i]) * 200_000) for i in range(32)]
"""6.4 MB of records: one Fetch answer of them is hundreds of TLS records and more than
the socket buffers hold."""
BIG_EXPECTED = [(i, key, value) for i, (key, value) in enumerate(BIG)]
LARGE_FETCH = 16 << 20
"""max.partition.fetch.bytes of the consumers reading BIG, so that one answer holds it all."""


@pytest.fixture(scope="module")
def big_topic(server: ListenerBroker, pki: Pki) -> str:
    """A topic holding BIG, produced by our producer over SSL."""
    with Producer(ours(server, pki, None)) as producer:
        futures = [producer.send("big", value, key=key, partition=0) for key, value in BIG]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(len(BIG)))
    return "big"


def read_big_with_confluent_kafka(server: ListenerBroker, pki: Pki, topic: str) -> list[Any]:
    consumer = ConfluentConsumer(
        {
            **librdkafka(server, pki, None),
            "group.id": "g-big",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": LARGE_FETCH,
        }
    )
    rows: list[tuple[int | None, bytes | None, bytes | None]] = []
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(BIG) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                rows.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return rows


def read_big_with_kafka_python(server: ListenerBroker, pki: Pki, topic: str) -> list[Any]:
    consumer = KafkaConsumer(
        **kafka_python(server, pki, None),
        enable_auto_commit=False,
        max_partition_fetch_bytes=LARGE_FETCH,
    )
    rows: list[tuple[int, bytes, bytes]] = []
    try:
        partition = KpTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(BIG) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return rows


def read_big_with_ours(server: ListenerBroker, pki: Pki, topic: str) -> list[Any]:
    settings = {**ours(server, pki, None), "max.partition.fetch.bytes": LARGE_FETCH}
    with Consumer(settings) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        rows: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rows) < len(BIG) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
        return rows


@pytest.mark.parametrize(
    "read",
    [read_big_with_confluent_kafka, read_big_with_kafka_python, read_big_with_ours],
    ids=["confluent-kafka", "kafka-python", "ours"],
)
def test_a_fetch_answer_of_several_mib(
    server: ListenerBroker, pki: Pki, big_topic: str, read: Any
) -> None:
    """Each consumer reads 6.4 MB of records, asked for in one Fetch, exactly, over SSL."""
    assert read(server, pki, big_topic) == BIG_EXPECTED


def test_the_kafkette_command_over_ssl(server: ListenerBroker, pki: Pki) -> None:
    """``kafkette produce`` and ``kafkette consume -e`` with -X security.protocol=SSL, as
    a user runs them (no client certificate: the listener only requests one)."""
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca_file}"]
    bootstrap = server.bootstrap("SSL")
    lines = "".join(f"k{i}:line {i}\n" for i in range(3))
    ok(kafkette("produce", "cli-ssl", "-K:", *tls, input=lines, bootstrap=bootstrap))
    out = ok(kafkette("consume", "cli-ssl", "-e", "-f", "%o %k %s\\n", *tls, bootstrap=bootstrap))
    assert out == "0 k0 line 0\n1 k1 line 1\n2 k2 line 2\n"


def test_certificate_principal_is_logged(server: ListenerBroker, pki: Pki) -> None:
    """The broker names an SSL client by its certificate's subject, as Kafka's default
    principal builder does."""
    with Consumer(ours(server, pki, None)) as consumer:
        consumer.assign([TopicPartition("principal-topic", 0)])
        consumer.poll(timeout_ms=500)  # connects, so the broker authenticates it
        assert f"is {ALICE_DN}" in wait_for_log(server, f"is {ALICE_DN}")


def test_each_listener_advertises_its_own_address(server: ListenerBroker, pki: Pki) -> None:
    """Metadata names the broker at the address of the listener the client came in on."""
    plaintext = ConfluentAdmin({"bootstrap.servers": server.bootstrap("PLAINTEXT")})
    ssl_admin = ConfluentAdmin(librdkafka(server, pki, None))
    sasl_admin = ConfluentAdmin(librdkafka(server, pki, "PLAIN"))
    seen = [
        [(b.id, str(b.host), b.port) for b in admin.list_topics(timeout=TIMEOUT_S).brokers.values()]
        for admin in (plaintext, ssl_admin, sasl_admin)
    ]
    assert seen == [
        [(1, "localhost", server.ports["PLAINTEXT"])],
        [(1, "127.0.0.1", server.ports["SSL"])],
        [(1, "127.0.0.1", server.ports["SASL_SSL"])],
    ]


# -- refusals ------------------------------------------------------------------------------


def wait_for_log(server: ListenerBroker, text: str) -> str:
    """The broker's log once it holds ``text`` (the broker logs a refusal after answering)."""
    deadline = time.monotonic() + 5
    while text not in (log := server.log()):
        assert time.monotonic() < deadline, log
        time.sleep(0.02)
    return log


def confluent_errors(settings: dict[str, Any]) -> list[ConfluentError]:
    """librdkafka's error callbacks for a producer that tries to connect."""
    errors: list[ConfluentError] = []
    producer = ConfluentProducer({**settings, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.05)
    return errors


@pytest.mark.parametrize(
    ("user", "password"), [(USER, "wrong"), ("eve", PASSWORD)], ids=["wrong-password", "unknown"]
)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_kafka_bad_credentials(
    server: ListenerBroker, pki: Pki, mechanism: str, user: str, password: str
) -> None:
    """librdkafka gets an authentication error; the broker logs the user, never the password."""
    settings = librdkafka(server, pki, mechanism, user=user, password=password)
    errors = confluent_errors(settings)
    assert errors and errors[0].code() == ConfluentError._AUTHENTICATION
    expected = {
        "PLAIN": "Authentication failed: Invalid username or password",
        "SCRAM-SHA-512": "Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-512",
    }[mechanism]
    assert expected in errors[0].str()
    log = wait_for_log(server, f"{mechanism} for User:{user}: {expected}")
    assert "wrong" not in log and PASSWORD not in log


def test_confluent_kafka_untrusted_certificate(server: ListenerBroker, pki: Pki) -> None:
    """A certificate from a CA the broker does not trust fails the TLS handshake."""
    settings = librdkafka(server, pki, None, cert=pki.client("mallory", trusted=False))
    errors = confluent_errors(settings)
    assert errors and errors[0].code() == ConfluentError._ALL_BROKERS_DOWN
    wait_for_log(server, "failed: CERTIFICATE_VERIFY_FAILED (SSL)")


KAFKA_PYTHON_REFUSED = """
import logging, sys
from kafka import KafkaProducer
from kafka.errors import KafkaError
logging.basicConfig(level=logging.WARNING)
settings = dict(bootstrap_servers=sys.argv[1], ssl_cafile=sys.argv[2], bootstrap_timeout_ms=1500)
if sys.argv[3] == "cert":
    settings.update(security_protocol="SSL", ssl_certfile=sys.argv[4], ssl_keyfile=sys.argv[5])
else:
    settings.update(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=sys.argv[4], sasl_plain_password=sys.argv[5],
    )
try:
    KafkaProducer(**settings)
except KafkaError as exc:
    print("raised", type(exc).__name__)
"""


def kafka_python_refused(*argv: str) -> subprocess.CompletedProcess[str]:
    """kafka-python's constructor in a child process (a failed one leaks sockets)."""
    return subprocess.run(
        [sys.executable, "-c", KAFKA_PYTHON_REFUSED, *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.mark.parametrize(("user", "password"), [(USER, "wrong"), ("eve", PASSWORD)])
def test_kafka_python_bad_credentials(
    server: ListenerBroker, pki: Pki, user: str, password: str
) -> None:
    """kafka-python gets SASL_AUTHENTICATION_FAILED, then gives up at its bootstrap timeout."""
    result = kafka_python_refused(server.bootstrap("SASL_SSL"), pki.ca_file, "sasl", user, password)
    assert result.stdout == "raised KafkaTimeoutError\n", result.stderr
    assert (
        "SaslAuthenticationFailedError: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512"
    ) in result.stderr


def test_kafka_python_untrusted_certificate(server: ListenerBroker, pki: Pki) -> None:
    """kafka-python's connection is closed during the TLS handshake; it never connects."""
    cert, key = pki.client("mallory", trusted=False)
    result = kafka_python_refused(server.bootstrap("SSL"), pki.ca_file, "cert", cert, key)
    assert result.stdout == "raised KafkaTimeoutError\n", result.stderr


@pytest.mark.parametrize(("user", "password"), [(USER, "wrong"), ("eve", PASSWORD)])
def test_our_client_bad_credentials(
    server: ListenerBroker, pki: Pki, user: str, password: str
) -> None:
    settings = ours(server, pki, "SCRAM-SHA-512", user=user, password=password)
    with pytest.raises(SaslAuthenticationFailedError) as info, AdminClient(settings) as admin:
        admin.list_topics()
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(info.value)


def test_our_client_untrusted_certificate(server: ListenerBroker, pki: Pki) -> None:
    """Our admin client cannot connect with a certificate the broker does not trust (it
    reports the connection closed, or reset, by the broker until its timeout: under TLS
    1.3 the broker refuses the certificate after the client's side of the handshake, and
    which of the two the client sees depends on timing)."""
    settings = ours(server, pki, None, cert=pki.client("mallory", trusted=False))
    settings["default.api.timeout.ms"] = 2000
    with pytest.raises(KafkaTimeoutError) as info, AdminClient(settings) as admin:
        admin.list_topics()
    message = str(info.value)
    assert "closed by the broker" in message or "Connection reset by peer" in message, message


def test_plaintext_client_on_tls_port_is_logged_and_broker_serves_on(
    server: ListenerBroker, pki: Pki
) -> None:
    """Kafka bytes on the TLS port fail the handshake: one log line naming the peer, the
    connection closed, and the broker keeps serving."""
    with socket.create_connection(("127.0.0.1", server.ports["SSL"]), timeout=10) as sock:
        host, port = sock.getsockname()[:2]
        local = f"{host}:{port}"
        # ApiVersions v0 request (correlation id 1, client id "x"), unencrypted
        sock.sendall(bytes.fromhex("0000000b00120000000000010001") + b"x")
        assert sock.recv(100) == b""  # closed by the broker
    assert (
        wait_for_log(server, f"TLS handshake with {local} failed").count(
            f"TLS handshake with {local} failed"
        )
        == 1
    )
    topics = ConfluentAdmin(librdkafka(server, pki, None)).list_topics(timeout=TIMEOUT_S)
    assert [b.port for b in topics.brokers.values()] == [server.ports["SSL"]]


def test_client_certificate_required(tmp_path: Path, pki: Pki, storage: str) -> None:
    """ssl.client.auth=required refuses a client without a certificate; one with a
    trusted certificate is served."""
    broker = ListenerBroker(
        *storage_args(storage, tmp_path),
        "--listener",
        "SSL://127.0.0.1:0",
        *pki.server_properties("required"),
    )
    try:
        broker.start()
        without: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_file,
        }
        errors = confluent_errors(without)
        assert errors and errors[0].code() == ConfluentError._ALL_BROKERS_DOWN
        wait_for_log(broker, "failed: PEER_DID_NOT_RETURN_A_CERTIFICATE (SSL)")
        cert, key = pki.client("alice")
        with_cert = {**without, "ssl.certificate.location": cert, "ssl.key.location": key}
        topics = ConfluentAdmin(with_cert).list_topics(timeout=TIMEOUT_S)
        assert [(str(b.host), b.port) for b in topics.brokers.values()] == [
            ("127.0.0.1", broker.ports["SSL"])
        ]
    finally:
        broker.close()
