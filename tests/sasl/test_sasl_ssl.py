"""SASL over TLS (security.protocol=SASL_SSL), through the TLS proxy of the TLS tests.

A TLS-terminating proxy sits in front of a SASL_PLAINTEXT broker (TLS ended
outside the broker, as a load balancer would): to the clients the listener is
SASL_SSL. The broker's own TLS listeners are tested in tests/security/.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer as ConfluentProducer

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.errors import SaslAuthenticationFailedError
from tests.brokers import BrokerProcess, free_port
from tests.client.test_tls import _proxy
from tests.security.servers import STORAGES


@pytest.fixture(scope="module", params=STORAGES)
def sasl_ssl_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """(bootstrap of the TLS proxy, CA file) for a SASL broker behind TLS, storing in
    memory, then on disk."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    directory = tmp_path_factory.mktemp("sasl-ssl")
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    proxy_port = free_port()
    broker = BrokerProcess(
        directory / "data" if request.param == "disk" else None,
        args=(
            "--advertised-listener",
            f"127.0.0.1:{proxy_port}",
            "--sasl-user",
            "alice:secret",
            "--sasl-mechanisms",
            "SCRAM-SHA-512",
        ),
    )
    loop = BackgroundLoop("sasl tls proxy")
    try:
        broker.start()
        loop.call_soon(_proxy, proxy_port, broker.port, server_context)
        yield f"127.0.0.1:{proxy_port}", ca_file
    finally:
        loop.close()
        broker.close()


def settings(cluster: tuple[str, Path], password: str = "secret") -> dict[str, str]:
    bootstrap, ca_file = cluster
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca_file),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def test_our_clients_over_sasl_ssl(sasl_ssl_cluster: tuple[str, Path]) -> None:
    config = settings(sasl_ssl_cluster)
    with AdminClient(config) as admin:
        admin.create_topics([NewTopic("sasl-ssl", 1)]).all()
    with Producer(config) as producer:
        futures = [producer.send("sasl-ssl", b"v%d" % i, key=b"k%d" % i) for i in range(5)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(5))
    with Consumer(config) as consumer:
        tp = TopicPartition("sasl-ssl", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        received = []
        for _ in range(40):
            received += consumer.poll(timeout_ms=250).get(tp, [])
            if len(received) == 5:
                break
    assert [(r.offset, r.key, r.value) for r in received] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(5)
    ]
    with (
        pytest.raises(SaslAuthenticationFailedError),
        AdminClient(settings(sasl_ssl_cluster, "wrong")) as admin,
    ):
        admin.list_topics()


def test_confluent_kafka_over_sasl_ssl(sasl_ssl_cluster: tuple[str, Path]) -> None:
    config = settings(sasl_ssl_cluster)
    config["sasl.mechanisms"] = config.pop("sasl.mechanism")
    producer = ConfluentProducer(config)
    delivered: list[int | None] = []
    for i in range(3):
        producer.produce(
            "sasl-ssl-confluent",
            value=b"c%d" % i,
            partition=0,
            on_delivery=lambda err, msg: delivered.append(-1 if err else msg.offset()),
        )
    assert producer.flush(30) == 0
    assert delivered == [0, 1, 2]
    with Consumer({**settings(sasl_ssl_cluster)}) as consumer:
        tp = TopicPartition("sasl-ssl-confluent", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 10
        values: list[bytes | None] = []
        while len(values) < 3 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(timeout_ms=250).get(tp, [])]
    assert values == [b"c0", b"c1", b"c2"]
