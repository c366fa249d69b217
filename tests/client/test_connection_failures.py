"""Settings that can never connect are refused at construction; a refused connection is
named, with its address, in the error of the call that gave up, and logged once.

Every client (sync and async producer, consumer and admin client) shares these checks:
an unresolvable bootstrap address (``.invalid`` never resolves, RFC 6761: no network
needed) or an unreadable TLS file is a ConfigError naming the setting and the value at
once, where the client used to try for a minute; the name lookup is bounded in time.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkette import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    Producer,
    TopicPartition,
)
from kafkette.client import diagnose
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.errors import ConfigError, KafkaTimeoutError
from tests.brokers import free_port

CLIENTS: dict[str, Callable[..., Any]] = {
    "Producer": Producer,
    "Consumer": Consumer,
    "AdminClient": AdminClient,
    "AsyncProducer": AsyncProducer,
    "AsyncConsumer": AsyncConsumer,
    "AsyncAdminClient": AsyncAdminClient,
}


def construct(name: str, **settings: Any) -> float:
    """Make client ``name`` (an async one inside an event loop) and close it; the seconds
    its construction took."""
    client_class = CLIENTS[name]

    def make() -> float:
        started = time.monotonic()
        client = client_class(**settings)
        elapsed = time.monotonic() - started
        if name.startswith("Async"):
            return elapsed
        client.close()
        return elapsed

    if not name.startswith("Async"):
        return make()

    async def in_loop() -> float:
        return make()

    return anyio.run(in_loop)


# ---- construction


@pytest.mark.parametrize("name", CLIENTS)
def test_unresolvable_bootstrap_is_refused_at_construction(name: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        construct(name, bootstrap_servers="nosuchhost.invalid:9092")
    assert time.monotonic() - started < 2
    assert info.value.setting == "bootstrap.servers"
    assert "nosuchhost.invalid:9092" in str(info.value)
    assert "no resolvable bootstrap server" in str(info.value)


def test_one_resolvable_bootstrap_server_is_enough() -> None:
    """As librdkafka: only when no bootstrap name resolves is the setting refused."""
    with AdminClient(bootstrap_servers=["nosuchhost.invalid:9092", "127.0.0.1:1"]):
        pass


def test_a_bootstrap_server_without_port_names_the_setting() -> None:
    with pytest.raises(ConfigError) as info:
        AdminClient(bootstrap_servers="127.0.0.1")
    assert info.value.setting == "bootstrap.servers"
    assert "'127.0.0.1' is not host:port" in str(info.value)


@pytest.fixture
def hanging_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """getaddrinfo that never answers (until the test ends); yields the names asked."""
    asked: list[str] = []
    release = threading.Event()

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        yield asked
    finally:
        release.set()


def test_the_name_lookup_at_construction_is_bounded(hanging_resolver: list[str]) -> None:
    """A resolver that does not answer holds construction up for at most
    socket.connection.setup.timeout.ms (capped at 2 s), and refuses nothing."""
    config = AdminConfig.from_user(
        bootstrap_servers="slow-resolver.example:9092", socket_connection_setup_timeout_ms=300
    )
    started = time.monotonic()
    KafkaClient(config)
    assert 0.25 < time.monotonic() - started < 1.5
    assert hanging_resolver == ["slow-resolver.example"]
    started = time.monotonic()
    assert diagnose.unresolvable_hosts(["a.example", "b.example"], 0.2) == {}
    assert time.monotonic() - started < 1


def test_only_a_name_that_does_not_exist_counts_as_unresolvable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = {
        "gone.example": socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        "flaky.example": socket.gaierror(socket.EAI_AGAIN, "Temporary failure"),
    }

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            raise answers[host]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    found = diagnose.unresolvable_hosts(
        ["gone.example", "flaky.example", "fine.example", "10.0.0.7", "::1", "x.INVALID."], 5
    )
    assert found == {
        "gone.example": "Name or service not known",
        "x.INVALID.": "a name under .invalid never resolves (RFC 6761)",
    }


@pytest.mark.parametrize("name", CLIENTS)
def test_missing_ca_file_is_refused_at_construction(name: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing-ca.pem")
    with pytest.raises(ConfigError) as info:
        construct(
            name, bootstrap_servers="127.0.0.1:1", security_protocol="SSL", ssl_cafile=missing
        )
    assert info.value.setting == "ssl.ca.location"
    assert missing in str(info.value)


@pytest.mark.parametrize(
    ("setting", "attribute"),
    [("ssl.certificate.location", "ssl_certfile"), ("ssl.key.location", "ssl_keyfile")],
)
def test_missing_certificate_or_key_file_is_named(
    setting: str, attribute: str, tmp_path: Path
) -> None:
    existing = tmp_path / "present.pem"
    existing.write_text("not a certificate")
    files = {"ssl_certfile": str(existing), "ssl_keyfile": str(existing)}
    files[attribute] = str(tmp_path / "missing.pem")
    with pytest.raises(ConfigError) as info:
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SSL", **files)
    assert info.value.setting == setting
    assert str(tmp_path / "missing.pem") in str(info.value)


def test_missing_ca_file_without_tls_is_refused_and_points_at_the_protocol(
    tmp_path: Path,
) -> None:
    """A CA file given with security.protocol=PLAINTEXT: most likely SSL was meant."""
    missing = str(tmp_path / "ca.pem")
    with pytest.raises(ConfigError) as info:
        Consumer(bootstrap_servers="127.0.0.1:1", ssl_ca_location=missing)
    assert info.value.setting == "ssl.ca.location"
    assert missing in str(info.value)
    assert "security.protocol is PLAINTEXT" in str(info.value)


# ---- a refused connection


@pytest.fixture
def client_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="kafkette.client")
    return caplog


def assert_logged_once(caplog: pytest.LogCaptureFixture, address: str) -> None:
    """One warning naming the refusal; the retries (there were some) only at debug level."""
    about = [r for r in caplog.records if address in r.getMessage()]
    warnings = [r for r in about if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"connecting to {address} failed: Connection refused: is a broker listening at this "
        "address? check bootstrap.servers, and the address the broker advertises "
        "(advertised.listeners)"
    ]
    assert any(r.levelno == logging.DEBUG and "(again)" in r.getMessage() for r in about)


def assert_refused(error: BaseException, address: str) -> None:
    assert isinstance(error, KafkaTimeoutError)
    assert f"connecting to {address} failed: Connection refused" in str(error)


def test_admin_client_names_the_refused_address(client_log: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    with AdminClient(bootstrap_servers=address) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            admin.list_topics(timeout=3)
        assert 2.5 < time.monotonic() - started < 8
    assert_refused(info.value, address)
    assert_logged_once(client_log, address)


def test_producer_names_the_refused_address(client_log: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    with Producer(bootstrap_servers=address, max_block_ms=3000) as producer:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send("events", b"v")
        assert 2.5 < time.monotonic() - started < 8
        producer.close(timeout=0)
    assert_refused(info.value, address)
    assert "'events' not present in metadata after max.block.ms=3000" in str(info.value)
    assert_logged_once(client_log, address)


def test_consumer_names_the_refused_address(client_log: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    with Consumer(bootstrap_servers=address) as consumer:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            consumer.end_offsets([TopicPartition("events", 0)], timeout=3)
        assert 2.5 < time.monotonic() - started < 8
        consumer.close(timeout=0)
    assert_refused(info.value, address)
    assert_logged_once(client_log, address)


@pytest.mark.anyio
async def test_async_admin_client_names_the_refused_address(
    client_log: pytest.LogCaptureFixture,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    async with AsyncAdminClient(bootstrap_servers=address) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            await admin.list_topics(timeout=3)
        assert 2.5 < time.monotonic() - started < 8
    assert_refused(info.value, address)
    assert_logged_once(client_log, address)


def test_failure_log_logs_each_reason_once_per_address(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="test.failures")
    log = diagnose.FailureLog(logging.getLogger("test.failures"))
    for _ in range(3):
        log.failed("a:1", ValueError("a:1 refused"))
    log.failed("b:1", ValueError("b:1 refused"))
    log.failed("a:1", ValueError("a:1 reset"))
    log.connected("b:1")
    log.failed("b:1", ValueError("b:1 refused"))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "a:1 refused"),
        ("DEBUG", "a:1 refused (again)"),
        ("DEBUG", "a:1 refused (again)"),
        ("WARNING", "b:1 refused"),
        ("WARNING", "a:1 reset"),
        ("WARNING", "b:1 refused"),
    ]
