"""A client whose security settings do not match the listener fails at once, saying why.

One ``kafkette serve`` for the module with a PLAINTEXT, an SSL and a SASL_PLAINTEXT
(PLAIN only) listener. A TLS client on the plaintext listener, a plaintext client on the
TLS one or on the SASL one, a certificate that does not verify, a wrong password and a
mechanism the broker does not enable each raise an authentication error (not retriable)
naming the address and what to check, within seconds, where the client used to retry
until its timeout and report "connection ... closed by the broker". The timeouts given
are long (20 s) so that a slow failure shows as one.
"""

from __future__ import annotations

import logging
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
from kafkette.errors import (
    AuthenticationError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from tests.security.servers import ListenerBroker, Pki

USER, PASSWORD = "alice", "s3cret"
SLOW_S = 20
FAST_S = 8.0
"""An answer within this many seconds is a quick one, on a loaded 2-core machine."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[ListenerBroker]:
    broker = ListenerBroker(
        "--listener",
        "PLAINTEXT://127.0.0.1:0",
        "--listener",
        "SSL://127.0.0.1:0",
        "--listener",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-user",
        f"{USER}:{PASSWORD}",
        "--sasl-mechanisms",
        "PLAIN",
        *pki.server_properties("none"),
    )
    try:
        yield broker.start()
    finally:
        broker.close()


def tls(pki: Pki) -> dict[str, Any]:
    return {"security_protocol": "SSL", "ssl_cafile": pki.ca_file}


def sasl(mechanism: str = "PLAIN", password: str = PASSWORD) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": USER,
        "sasl_password": password,
    }


# Each use makes its client, calls something that needs a broker, closes the client.
def use_admin(settings: dict[str, Any]) -> None:
    with AdminClient(settings, default_api_timeout_ms=SLOW_S * 1000) as admin:
        admin.list_topics()


def use_producer(settings: dict[str, Any]) -> None:
    with Producer(settings, max_block_ms=SLOW_S * 1000) as producer:
        producer.send("events", b"v")


def use_consumer(settings: dict[str, Any]) -> None:
    with Consumer(settings, default_api_timeout_ms=SLOW_S * 1000) as consumer:
        consumer.end_offsets([TopicPartition("events", 0)])


def use_async(settings: dict[str, Any]) -> None:
    async def main() -> None:
        async with AsyncAdminClient(settings, default_api_timeout_ms=SLOW_S * 1000) as admin:
            await admin.list_topics()

    anyio.run(main, backend="trio")


USES: dict[str, Callable[[dict[str, Any]], None]] = {
    "admin": use_admin,
    "producer": use_producer,
    "consumer": use_consumer,
    "async-admin-trio": use_async,
}


def fails_fast(
    use: str, settings: dict[str, Any], error: type[AuthenticationError]
) -> AuthenticationError:
    started = time.monotonic()
    with pytest.raises(error) as info:
        USES[use](settings)
    assert time.monotonic() - started < FAST_S
    assert not info.value.retriable
    return info.value


@pytest.mark.parametrize("use", USES)
def test_tls_client_on_plaintext_listener(server: ListenerBroker, pki: Pki, use: str) -> None:
    address = server.bootstrap("PLAINTEXT")
    error = fails_fast(use, {"bootstrap_servers": address, **tls(pki)}, SslAuthenticationError)
    assert str(error) == (
        f"TLS handshake with {address} failed: the broker closed the connection, and it "
        "answers Kafka requests without TLS: is security.protocol right? it is SSL, the "
        "listener expects PLAINTEXT or SASL_PLAINTEXT"
    )


@pytest.mark.parametrize("use", USES)
def test_plaintext_client_on_tls_listener(server: ListenerBroker, use: str) -> None:
    address = server.bootstrap("SSL")
    error = fails_fast(use, {"bootstrap_servers": address}, SslAuthenticationError)
    assert str(error) == (
        f"{address} closed the connection during the ApiVersions exchange, and it speaks "
        "TLS: is security.protocol right? it is PLAINTEXT, the listener expects SSL or SASL_SSL"
    )


def test_certificate_that_does_not_verify(server: ListenerBroker) -> None:
    """Without the test CA the broker's certificate does not verify (Java: an
    SslAuthenticationException, not retried)."""
    address = server.bootstrap("SSL")
    error = fails_fast(
        "admin", {"bootstrap_servers": address, "security_protocol": "SSL"}, SslAuthenticationError
    )
    assert str(error).startswith(
        f"TLS handshake with {address} failed: certificate verify failed: "
        "self-signed certificate in certificate chain: is ssl.ca.location the CA"
    )


@pytest.mark.parametrize("use", USES)
def test_plaintext_client_on_sasl_listener(server: ListenerBroker, use: str) -> None:
    address = server.bootstrap("SASL_PLAINTEXT")
    error = fails_fast(use, {"bootstrap_servers": address}, IllegalSaslStateError)
    assert error.detail == (
        f"{address} closed the connection at the first request after ApiVersions "
        f"(connection to {address} closed by the broker), and it expects SASL authentication "
        "(mechanisms: PLAIN): is security.protocol right? it is PLAINTEXT, the listener "
        "expects SASL_PLAINTEXT with sasl.mechanism, sasl.username and sasl.password"
    )


def test_tls_client_on_sasl_plaintext_listener(server: ListenerBroker, pki: Pki) -> None:
    address = server.bootstrap("SASL_PLAINTEXT")
    settings = {"bootstrap_servers": address, **tls(pki)}
    error = fails_fast("consumer", settings, SslAuthenticationError)
    assert "the listener expects PLAINTEXT or SASL_PLAINTEXT" in str(error)


@pytest.mark.parametrize("use", USES)
def test_wrong_password(server: ListenerBroker, use: str) -> None:
    address = server.bootstrap("SASL_PLAINTEXT")
    settings = {"bootstrap_servers": address, **sasl(password="wrong")}
    error = fails_fast(use, settings, SaslAuthenticationFailedError)
    assert error.detail == (
        f"{address}: Authentication failed: Invalid username or password: are "
        "sasl.username and sasl.password right for sasl.mechanism=PLAIN?"
    )


def test_mechanism_the_broker_does_not_enable(server: ListenerBroker) -> None:
    address = server.bootstrap("SASL_PLAINTEXT")
    settings = {"bootstrap_servers": address, **sasl("SCRAM-SHA-512")}
    error = fails_fast("producer", settings, UnsupportedSaslMechanismError)
    assert error.detail == (
        f"{address} does not enable SASL mechanism SCRAM-SHA-512 (it offers: PLAIN)"
    )


def test_the_failure_is_logged_once(
    server: ListenerBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """Three calls fail the same way: one warning (librdkafka too logs an error once)."""
    caplog.set_level(logging.DEBUG, logger="kafkette.client")
    address = server.bootstrap("SSL")
    with AdminClient(bootstrap_servers=address) as admin:
        for _ in range(3):
            with pytest.raises(SslAuthenticationError):
                admin.list_topics(timeout=SLOW_S)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and address in r.getMessage()
    ]
    assert warnings == [
        f"{address} closed the connection during the ApiVersions exchange, and it speaks "
        "TLS: is security.protocol right? it is PLAINTEXT, the listener expects SSL or SASL_SSL"
    ]


def test_matching_settings_still_work(server: ListenerBroker, pki: Pki, tmp_path: Path) -> None:
    """The checks refuse nothing that works: each listener with its own settings."""
    for name, settings in (
        ("PLAINTEXT", {}),
        ("SSL", tls(pki)),
        ("SASL_PLAINTEXT", sasl()),
    ):
        with AdminClient(bootstrap_servers=server.bootstrap(name), **settings) as admin:
            assert admin.list_topics(timeout=SLOW_S) == []

    async def produce() -> None:
        async with AsyncProducer(bootstrap_servers=server.bootstrap("SSL"), **tls(pki)) as p:
            await p.send_and_wait("fine", b"v")
        async with AsyncConsumer(
            bootstrap_servers=server.bootstrap("SASL_PLAINTEXT"), **sasl()
        ) as c:
            assert await c.end_offsets([TopicPartition("fine", 0)]) == {
                TopicPartition("fine", 0): 1
            }

    anyio.run(produce)
