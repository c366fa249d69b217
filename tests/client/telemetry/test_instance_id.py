"""``client_instance_id(timeout)`` on every client, as Java's ``clientInstanceId(Duration)``:
the id the broker gave in GetTelemetrySubscriptions (the one it labels the client's pushes
with), IllegalStateError with ``enable.metrics.push=false``, KafkaTimeoutError when the
broker gives none in time."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import anyio
import pytest

from kafkette import AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer, Producer
from kafkette.client.client import KafkaClient
from kafkette.errors import IllegalStateError, KafkaTimeoutError
from kafkette.server.broker import Broker
from kafkette.testing import MemoryCluster

GET, PUSH = 71, 72
NOT_ENABLED = r"^Telemetry is not enabled$"  # Java's IllegalStateException message


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster() as cluster:
        yield cluster


def given(client: KafkaClient) -> uuid.UUID:
    """The id the client's telemetry holds from the broker's answer."""
    assert client.telemetry is not None
    known = client.telemetry.instance_id
    assert known is not None and known.int != 0
    return known


@pytest.mark.anyio
async def test_the_async_clients_return_the_id_the_broker_gave(cluster: MemoryCluster) -> None:
    servers = cluster.bootstrap_servers
    async with AsyncProducer(bootstrap_servers=servers) as producer:
        # no record sent yet: the producer has no connection, the call opens one
        got = await producer.client_instance_id(timeout=10)
        assert producer._core is not None
        assert got == given(producer._core.client)
        assert await producer.client_instance_id(timeout=0) == got  # known: no wait
    async with AsyncConsumer(bootstrap_servers=servers) as consumer:
        got = await consumer.client_instance_id(timeout=10)
        assert consumer._core is not None
        assert got == given(consumer._core.client)
    async with AsyncAdminClient(bootstrap_servers=servers) as admin:
        got = await admin.client_instance_id(timeout=10)
        assert got == given(admin._client)


def test_the_sync_clients_return_the_id_the_broker_gave(cluster: MemoryCluster) -> None:
    servers = cluster.bootstrap_servers
    with Producer(bootstrap_servers=servers) as producer:
        assert producer.client_instance_id(timeout=10) == given(producer._core.client)
    with Consumer(bootstrap_servers=servers) as consumer:
        assert consumer.client_instance_id(timeout=10) == given(consumer._core.client)
    with AdminClient(bootstrap_servers=servers) as admin:
        assert admin.client_instance_id(timeout=10) == given(admin._async._client)


@pytest.mark.anyio
async def test_without_metrics_push_it_is_an_illegal_state(cluster: MemoryCluster) -> None:
    settings = {"bootstrap_servers": cluster.bootstrap_servers, "enable.metrics.push": "false"}
    async with AsyncProducer(settings) as producer:
        with pytest.raises(IllegalStateError, match=NOT_ENABLED):
            await producer.client_instance_id(timeout=1)
    async with AsyncConsumer(settings) as consumer:
        with pytest.raises(IllegalStateError, match=NOT_ENABLED):
            await consumer.client_instance_id(timeout=1)
    async with AsyncAdminClient(settings) as admin:
        with pytest.raises(IllegalStateError, match=NOT_ENABLED):
            await admin.client_instance_id(timeout=1)
    with Producer(settings) as sync_producer, pytest.raises(IllegalStateError, match=NOT_ENABLED):
        sync_producer.client_instance_id(timeout=1)


@pytest.mark.anyio
async def test_a_broker_without_kip_714_gives_a_timeout(
    cluster: MemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = cluster._broker
    assert isinstance(broker, Broker)
    served = broker.supported_versions()
    hidden = {key: versions for key, versions in served.items() if key not in (GET, PUSH)}
    monkeypatch.setattr(broker, "supported_versions", lambda: hidden)
    async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(KafkaTimeoutError, match=r"within 0\.3s$"):
            await producer.client_instance_id(timeout=0.3)
        assert time.monotonic() - started >= 0.25
        with pytest.raises(ValueError, match="must not be negative"):
            await producer.client_instance_id(timeout=-1)
