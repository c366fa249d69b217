"""Clients over TLS (security.protocol=SSL), through a TLS-terminating proxy.

No broker at hand serves TLS (kafkette serve does not yet; Tansu 0.6 refuses
--cert together with --key and did not handshake with a combined PEM), so
the test puts a TLS proxy (stdlib ssl via anyio) in front of kafkette serve,
which advertises the proxy's address: every client connection is TLS,
verified against a test CA made with trustme.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
import pytest
import trustme
from anyio.streams.tls import TLSListener

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.errors import ConfigError, KafkaError
from tests.brokers import BrokerProcess, free_port
from tests.security.servers import STORAGES


async def _pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
    try:
        while True:
            await sink.send(await source.receive(65536))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        await sink.aclose()


async def _proxy(port: int, backend_port: int, server_context: ssl.SSLContext) -> None:
    listener = TLSListener(
        await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port),
        server_context,
        standard_compatible=False,
    )

    async def handle(client: anyio.abc.ByteStream) -> None:
        async with (
            client,
            await anyio.connect_tcp("127.0.0.1", backend_port) as backend,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_pump, client, backend)
            tg.start_soon(_pump, backend, client)

    try:
        await listener.serve(handle)
    finally:
        await listener.aclose()


@pytest.fixture(params=STORAGES)
def tls_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(bootstrap of the TLS proxy, CA file) for kafkette serve behind TLS, storing in
    memory, then on disk."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    proxy_port = free_port()
    data_dir = tmp_path / "data" if request.param == "disk" else None
    broker = BrokerProcess(data_dir, args=("--advertised-listener", f"127.0.0.1:{proxy_port}"))
    loop = BackgroundLoop("tls proxy")
    try:
        broker.start()
        loop.call_soon(_proxy, proxy_port, broker.port, server_context)
        yield f"127.0.0.1:{proxy_port}", ca_file
    finally:
        loop.close()
        broker.close()


def test_admin_producer_and_consumer_over_tls(tls_cluster: tuple[str, Path]) -> None:
    bootstrap, ca_file = tls_cluster
    tls = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca_file),
    }
    with AdminClient(tls) as admin:
        admin.create_topics([NewTopic("secure", 1)]).all()
    with Producer(tls) as producer:
        futures = [producer.send("secure", b"v%d" % i, key=b"k%d" % i) for i in range(50)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(50))
    with Consumer(tls) as consumer:
        tp = TopicPartition("secure", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        received = []
        for _ in range(40):
            received += consumer.poll(timeout_ms=250).get(tp, [])
            if len(received) == 50:
                break
    assert [(r.offset, r.key, r.value) for r in received] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(50)
    ]


def test_untrusted_certificate_is_refused(tls_cluster: tuple[str, Path]) -> None:
    """Without the test CA the broker's certificate does not verify: no connection."""
    bootstrap, _ = tls_cluster
    with (
        pytest.raises(KafkaError, match=r"certificate verify failed"),
        AdminClient(bootstrap_servers=bootstrap, security_protocol="SSL") as admin,
    ):
        admin.list_topics(timeout_ms=2000)


def test_plaintext_client_against_tls_fails_within_timeout(tls_cluster: tuple[str, Path]) -> None:
    bootstrap, _ = tls_cluster
    with (
        pytest.raises(KafkaError),
        AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=1000) as admin,
    ):
        admin.list_topics(timeout_ms=2000)


def test_unreadable_ca_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        AdminClient(
            bootstrap_servers="127.0.0.1:1",
            security_protocol="SSL",
            ssl_ca_location=str(tmp_path / "missing.pem"),
        )
    assert info.value.setting == "ssl.ca.location"
