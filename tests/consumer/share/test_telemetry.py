"""KIP-714 on the share consumers, as on the others: ``client_instance_id`` returns the id
the broker gave (IllegalStateError with ``enable.metrics.push=false``), and the metrics a
client-metrics subscription asks for are pushed under Java's share-consumer names
(``consumer-share-fetch-manager-metrics``), the last values with the close."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from kafkette import AdminClient, AsyncShareConsumer, Producer, ShareConsumer
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from kafkette.errors import IllegalStateError
from kafkette.testing import MemoryCluster
from tests.client.telemetry.test_instance_id import given
from tests.client.telemetry.test_push import pushed, subscribed

SHARE = "org.apache.kafka.consumer.share.fetch.manager."


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster(num_partitions=1, group_share_heartbeat_interval_ms=100) as cluster:
        yield cluster


def test_the_sync_share_consumer_returns_the_id_the_broker_gave(cluster: MemoryCluster) -> None:
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g") as consumer:
        got = consumer.client_instance_id(timeout=10)
        assert got == given(consumer._core.client)
        assert consumer.client_instance_id(timeout=0) == got  # known: no wait
    settings = {"bootstrap_servers": cluster.bootstrap_servers, "group_id": "g"}
    with (
        ShareConsumer(settings, enable_metrics_push=False) as off,
        pytest.raises(IllegalStateError, match=r"^Telemetry is not enabled$"),
    ):
        off.client_instance_id(timeout=1)


@pytest.mark.anyio
async def test_the_async_share_consumer_pushes_its_metrics(cluster: MemoryCluster) -> None:
    """Records read in implicit mode; the terminating push of the close carries the
    consumer's final counts under Java's names: the records handed out, each accepted
    once (the last poll's by the close)."""
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False) as a:
        changes = [AlterConfigOp("metrics", SHARE), AlterConfigOp("interval.ms", "60000")]
        a.incremental_alter_configs(
            {ConfigResource(ResourceType.CLIENT_METRICS, "share-consumers"): changes}
        ).all()
    async with AsyncShareConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id="g", client_id="tel-share"
    ) as consumer:
        assert await consumer.client_instance_id(timeout=10) == given(consumer._c.client)
        consumer.subscribe(["t"])
        got = 0
        with (
            Producer(bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False) as p,
            anyio.fail_after(30),
        ):
            while not got:  # the share partition starts at the log end: probe until read
                p.send("t", b"probe")
                p.flush(10)
                got += len(await consumer.poll(timeout=0.3))
            for i in range(20):
                p.send("t", b"value %d" % i)
            p.flush(10)
            while got < 21:
                got += len(await consumer.poll(timeout=0.3))
        core = consumer._c
        await subscribed(core.client.telemetry)  # a push is due in a minute: the close's
    final = core.metrics  # as the terminating push read it (the consumer is closed)
    values = pushed(cluster)["tel-share"]
    assert sorted(values) == sorted(SHARE + name for name in NAMES)
    assert values[SHARE + "records.consumed.total"] == final.records_consumed == got
    assert values[SHARE + "acknowledgements.send.total"] == final.acknowledgements_sent == got
    assert values[SHARE + "acknowledgements.error.total"] == 0
    assert values[SHARE + "fetch.total"] == final.fetch_count >= 2
    assert values[SHARE + "bytes.consumed.total"] == final.bytes_consumed > 0
    assert values[SHARE + "fetch.latency.avg"] == final.fetch_latency_avg_ms > 0
    assert values[SHARE + "fetch.latency.max"] == final.fetch_latency_max_ms


NAMES = (
    "records.consumed.total",
    "bytes.consumed.total",
    "fetch.total",
    "fetch.latency.avg",
    "fetch.latency.max",
    "acknowledgements.send.total",
    "acknowledgements.error.total",
)
