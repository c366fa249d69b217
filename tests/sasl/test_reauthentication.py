"""SASL re-authentication (KIP-368) against ``kafkette serve`` with
``connections.max.reauth.ms=2000``, on SASL_PLAINTEXT and SASL_SSL listeners, memory
and disk storage (librdkafka's test 0142 does the same against Kafka).

- librdkafka (confluent-kafka) and our clients produce and consume for 10 s: every
  record arrives, in order, and the broker logs several re-authentications on one
  connection (its log line numbers them per connection), and no connection closed
  for an expired session;
- a raw client is told the lifetime, served until its session expires, then closed
  unanswered at its next request; a SaslHandshake re-authenticates it, even after
  expiry (Kafka's SocketServer checks for a re-authentication before the expiry);
- re-authenticating as another user, or with another mechanism, is refused as Kafka
  refuses it.
"""

from __future__ import annotations

import re
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer

from kafkette import Consumer, Producer
from kafkette.client.security.sasl import ScramClient
from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request, Response
from tests.security.servers import STORAGES, ListenerBroker, Pki, storage_args

LIFETIME_MS = 2000
TRAFFIC_S = 10.0
USERS = (("alice", "alice-secret"), ("bob", "bob-secret"))
LISTENERS = ["SASL_PLAINTEXT", "SASL_SSL"]
_REAUTH = re.compile(
    r"(\S+) re-authenticated as (\S+) with (\S+) \(re-authentication (\d+) on this connection"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module", params=STORAGES)
def server(
    request: pytest.FixtureRequest, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ListenerBroker]:
    broker = ListenerBroker(
        *storage_args(str(request.param), tmp_path_factory.mktemp("data")),
        "--listener",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--listener",
        "SASL_SSL://127.0.0.1:0",
        "--sasl-mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        *(arg for name, password in USERS for arg in ("--sasl-user", f"{name}:{password}")),
        "--set",
        f"connections.max.reauth.ms={LIFETIME_MS}",
        "--set",
        "num.partitions=1",
        *pki.server_properties("none"),
    )
    try:
        yield broker.start()
    finally:
        broker.close()


def librdkafka_settings(
    server: ListenerBroker, pki: Pki, listener: str, mechanism: str
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap(listener),
        "security.protocol": listener,
        "sasl.mechanisms": mechanism,
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    if listener == "SASL_SSL":
        settings["ssl.ca.location"] = pki.ca_file
    return settings


def our_settings(server: ListenerBroker, pki: Pki, listener: str, mechanism: str) -> dict[str, Any]:
    settings = librdkafka_settings(server, pki, listener, mechanism)
    settings["sasl.mechanism"] = settings.pop("sasl.mechanisms")
    return settings


def reauthentications(log: str) -> dict[str, int]:
    """The most re-authentications the broker logged for each connection (peer address)."""
    found: dict[str, int] = {}
    for peer, principal, _, number in _REAUTH.findall(log):
        assert principal == "User:alice"
        found[peer] = max(found.get(peer, 0), int(number))
    return found


def check_broker_log(server: ListenerBroker, before: int) -> None:
    """Since ``before`` (an offset in the broker's log): one connection re-authenticated
    at least 3 times (10 s of 2 s sessions: about 5), and none was closed expired."""
    log = server.log()[before:]
    counts = reauthentications(log)
    assert counts and max(counts.values()) >= 3, log[-3000:]
    assert "SASL session expired" not in log, log[-3000:]


PARAMS = [
    pytest.param(listener, mechanism, id=f"{listener}-{mechanism}")
    for listener, mechanism in [("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
]
"""Each mechanism re-authenticates in the raw tests below; 10 s of traffic each here."""


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("listener", "mechanism"), PARAMS)
def test_confluent_kafka_reauthenticates_for_10_s_of_traffic(
    server: ListenerBroker, pki: Pki, listener: str, mechanism: str
) -> None:
    topic = f"reauth-librdkafka-{listener}-{mechanism}".lower()
    before = len(server.log())
    settings = librdkafka_settings(server, pki, listener, mechanism)
    producer = ConfluentProducer({**settings, "enable.idempotence": True, "linger.ms": 5})
    consumer = ConfluentConsumer(
        {
            **settings,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    sent: list[bytes] = []
    failures: list[str] = []
    received: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TRAFFIC_S
        while time.monotonic() < deadline:
            value = b"v%d" % len(sent)
            producer.produce(
                topic,
                value=value,
                key=b"k%d" % len(sent),
                on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
            )
            sent.append(value)
            producer.poll(0)
            message = consumer.poll(0.02)
            if message is not None and message.error() is None:
                received.append((message.offset(), message.key(), message.value()))
        assert producer.flush(30) == 0
        catch_up = time.monotonic() + 20
        while len(received) < len(sent) and time.monotonic() < catch_up:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert failures == []
    assert len(sent) > 100
    assert received == [(i, b"k%d" % i, value) for i, value in enumerate(sent)]
    check_broker_log(server, before)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("listener", "mechanism"), PARAMS)
def test_our_clients_reauthenticate_for_10_s_of_traffic(
    server: ListenerBroker, pki: Pki, listener: str, mechanism: str
) -> None:
    topic = f"reauth-ours-{listener}-{mechanism}".lower()
    before = len(server.log())
    settings = our_settings(server, pki, listener, mechanism)
    received: list[tuple[int, bytes | None, bytes | None]] = []
    stop = threading.Event()
    consumer_error: list[BaseException] = []

    def consume() -> None:
        try:
            with Consumer({**settings, "group.id": topic, "auto.offset.reset": "earliest"}) as c:
                c.subscribe([topic])
                while not stop.is_set():
                    for records in c.poll(timeout_ms=100).values():
                        received.extend((r.offset, r.key, r.value) for r in records)
        except BaseException as exc:
            consumer_error.append(exc)

    reader = threading.Thread(target=consume, name="reauth consumer")
    futures = []
    with Producer({**settings, "linger.ms": 5}) as producer:
        reader.start()
        try:
            deadline = time.monotonic() + TRAFFIC_S
            while time.monotonic() < deadline:
                n = len(futures)
                futures.append(producer.send(topic, b"v%d" % n, key=b"k%d" % n))
                time.sleep(0.005)
            producer.flush()
            offsets = [f.result(30).offset for f in futures]
            catch_up = time.monotonic() + 20
            while len(received) < len(futures) and time.monotonic() < catch_up:
                time.sleep(0.1)
        finally:
            stop.set()
            reader.join(30)
    assert consumer_error == []
    assert len(futures) > 100
    assert offsets == list(range(len(futures)))
    assert received == [(i, b"k%d" % i, b"v%d" % i) for i in range(len(futures))]
    check_broker_log(server, before)


# -- a raw client, one request at a time --------------------------------------------------


class Raw:
    """Kafka frames over a blocking socket (TLS for SASL_SSL)."""

    def __init__(self, server: ListenerBroker, pki: Pki, listener: str) -> None:
        sock = socket.create_connection(("127.0.0.1", server.ports[listener]), timeout=10)
        if listener == "SASL_SSL":
            context = ssl.create_default_context(cafile=pki.ca_file)
            sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
        self.sock = sock
        self.correlation_id = 0

    def send(self, request: Request, version: int) -> None:
        self.correlation_id += 1
        body = bytes(encode_request(request, version, self.correlation_id, "raw"))
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def receive(
        self, request: Request, version: int, correlation_id: int | None = None
    ) -> Response:
        (size,) = struct.unpack(">i", self._read(4))
        received, response = decode_response(self._read(size), request.API_KEY, version)
        assert received == (self.correlation_id if correlation_id is None else correlation_id)
        return response

    def request(self, request: Request, version: int) -> Response:
        self.send(request, version)
        return self.receive(request, version)

    def closed_unanswered(self, request: Request, version: int) -> bool:
        self.send(request, version)
        try:
            self._read(4)
        except (ConnectionError, ssl.SSLError, OSError):
            return True
        return False

    def handshake(self, mechanism: str) -> SaslHandshakeResponse:
        answer = self.request(SaslHandshakeRequest(mechanism=mechanism), 1)
        assert isinstance(answer, SaslHandshakeResponse)
        return answer

    def plain(self, user: str, password: str) -> SaslAuthenticateResponse:
        token = f"\0{user}\0{password}".encode()
        answer = self.request(SaslAuthenticateRequest(auth_bytes=token), 2)
        assert isinstance(answer, SaslAuthenticateResponse)
        return answer

    def scram(self, mechanism: str, user: str, password: str) -> SaslAuthenticateResponse:
        client = ScramClient(mechanism, user, password)
        token: bytes | None = client.initial()
        while True:
            assert token is not None
            answer = self.request(SaslAuthenticateRequest(auth_bytes=token), 2)
            assert isinstance(answer, SaslAuthenticateResponse)
            if answer.error_code:
                return answer
            token = client.respond(answer.auth_bytes)
            if token is None:
                return answer

    def metadata(self) -> MetadataResponse:
        answer = self.request(MetadataRequest(topics=[]), 12)
        assert isinstance(answer, MetadataResponse)
        return answer

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=LISTENERS)
def raw(request: pytest.FixtureRequest, server: ListenerBroker, pki: Pki) -> Iterator[Raw]:
    client = Raw(server, pki, str(request.param))
    try:
        client.request(ApiVersionsRequest(), 3)
        assert client.handshake("PLAIN").error_code == 0
        answer = client.plain("alice", "alice-secret")
        assert (answer.error_code, answer.session_lifetime_ms) == (0, LIFETIME_MS)
        yield client
    finally:
        client.close()


def test_a_client_that_does_not_reauthenticate_is_closed_at_its_next_request(
    raw: Raw, server: ListenerBroker
) -> None:
    started = time.monotonic()
    assert raw.metadata().brokers  # served while the session lasts
    time.sleep(max(0.0, started + LIFETIME_MS / 1000 + 0.3 - time.monotonic()))
    assert raw.closed_unanswered(MetadataRequest(topics=[]), 12)
    deadline = time.monotonic() + 5
    while "SASL session expired" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(r"closing connection from \S+: its SASL session expired", server.log())


def test_a_handshake_reauthenticates_even_after_expiry(raw: Raw, server: ListenerBroker) -> None:
    time.sleep(LIFETIME_MS / 1000 + 0.3)
    assert raw.handshake("PLAIN").error_code == 0
    answer = raw.plain("alice", "alice-secret")
    assert (answer.error_code, answer.session_lifetime_ms) == (0, LIFETIME_MS)
    assert raw.metadata().brokers
    # Within a second of the last start, SaslHandshake is the broker core's: not now.
    refused = raw.handshake("PLAIN")
    assert (refused.error_code, refused.mechanisms) == (34, [])  # ILLEGAL_SASL_STATE
    assert raw.metadata().brokers


def test_requests_sent_before_the_handshake_are_answered_first(raw: Raw) -> None:
    metadata = MetadataRequest(topics=[])
    handshake = SaslHandshakeRequest(mechanism="PLAIN")
    raw.send(metadata, 12)
    raw.send(metadata, 12)
    raw.send(handshake, 1)
    first = raw.correlation_id - 2
    assert isinstance(raw.receive(metadata, 12, first), MetadataResponse)
    assert isinstance(raw.receive(metadata, 12, first + 1), MetadataResponse)
    answer = raw.receive(handshake, 1)
    assert isinstance(answer, SaslHandshakeResponse) and answer.error_code == 0
    assert raw.plain("alice", "alice-secret").session_lifetime_ms == LIFETIME_MS
    assert raw.metadata().brokers


def test_reauthenticating_as_another_user_is_refused(raw: Raw) -> None:
    time.sleep(1.1)  # re-authentication may start a second after the last one
    assert raw.handshake("PLAIN").error_code == 0
    answer = raw.plain("bob", "bob-secret")
    assert (answer.error_code, answer.error_message) == (
        58,  # SASL_AUTHENTICATION_FAILED
        "Cannot change principals during re-authentication from User.alice: User.bob",
    )
    assert raw.closed_unanswered(MetadataRequest(topics=[]), 12)


def test_reauthenticating_with_another_mechanism_is_refused(
    raw: Raw, server: ListenerBroker
) -> None:
    time.sleep(1.1)
    before = len(server.log())
    answer = raw.handshake("SCRAM-SHA-512")  # answered, as Kafka does ...
    assert (answer.error_code, sorted(answer.mechanisms)) == (
        0,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    )
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    # ... and the next token closes the connection unanswered.
    assert raw.closed_unanswered(SaslAuthenticateRequest(auth_bytes=client.initial()), 2)
    message = (
        "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )
    deadline = time.monotonic() + 5
    while message not in server.log()[before:] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert message in server.log()[before:]


def test_a_scram_session_reauthenticates_with_scram(server: ListenerBroker, pki: Pki) -> None:
    raw = Raw(server, pki, "SASL_PLAINTEXT")
    try:
        assert raw.handshake("SCRAM-SHA-256").error_code == 0
        first = raw.scram("SCRAM-SHA-256", "alice", "alice-secret")
        assert (first.error_code, first.session_lifetime_ms) == (0, LIFETIME_MS)
        time.sleep(1.1)
        assert raw.handshake("SCRAM-SHA-256").error_code == 0
        again = raw.scram("SCRAM-SHA-256", "alice", "alice-secret")
        assert (again.error_code, again.session_lifetime_ms) == (0, LIFETIME_MS)
        assert raw.metadata().brokers
    finally:
        raw.close()
