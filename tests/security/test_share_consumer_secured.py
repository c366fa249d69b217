"""Our ShareConsumer over each secured listener of ``kafkette serve``: SSL with a client
certificate, SASL_SSL and SASL_PLAINTEXT (SCRAM-SHA-256). The share consumer reaches
brokers through the clients' connection code, so whatever bootstraps a Consumer
bootstraps it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkette import Producer, ShareConsumer
from tests.security.servers import ListenerBroker, Pki

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[ListenerBroker]:
    broker = ListenerBroker(
        "--listener", "SSL://127.0.0.1:0",
        "--listener", "SASL_SSL://127.0.0.1:0",
        "--listener", "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-user", f"{USER}:{PASSWORD}",
        "--sasl-mechanisms", "SCRAM-SHA-256",
        "--set", "group.share.heartbeat.interval.ms=200",
        *pki.server_properties("required"),
    ).start()  # fmt: skip
    try:
        yield broker
    finally:
        broker.close()


def settings(broker: ListenerBroker, pki: Pki, listener: str) -> dict[str, Any]:
    chosen: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap(listener),
        "security.protocol": listener,
    }
    if listener == "SSL":
        chosen["ssl.certificate.location"], chosen["ssl.key.location"] = pki.client("worker")
    if "SSL" in listener:
        chosen["ssl.ca.location"] = pki.ca_file
    if listener.startswith("SASL"):
        chosen.update(
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD}
        )
    return chosen


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL", "SASL_PLAINTEXT"])
def test_a_share_consumer_over_a_secured_listener(
    broker: ListenerBroker, pki: Pki, listener: str
) -> None:
    chosen = settings(broker, pki, listener)
    topic = f"secured-{listener.lower()}"
    got: list[tuple[bytes, int]] = []
    with (
        Producer(chosen, linger_ms=0) as producer,
        ShareConsumer(chosen, group_id=topic) as consumer,
    ):
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        number = 0
        while not got:  # the share partition starts at the log end: produce until one arrives
            assert time.monotonic() < deadline, "nothing delivered"
            producer.send_and_wait(topic, b"job %d" % number, timeout=10)
            number += 1
            got = [(r.value, r.delivery_count) for r in consumer.poll(timeout=0.5)]
    # the last one produced (and any produced after the share partition began)
    first = number - len(got)
    assert got == [(b"job %d" % n, 1) for n in range(first, number)]
