"""Our producer, consumer and admin client push the metrics a client-metrics subscription
asks for (KIP-714) to a memory:// broker, which keeps them labelled with the client id and
the instance id it gave; nothing is asked or pushed with ``enable.metrics.push=false`` or
when the broker does not list the APIs in ApiVersions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkette import AdminClient, AsyncAdminClient, AsyncConsumer, AsyncProducer, Consumer, Producer
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from kafkette.client.telemetry import ClientTelemetry
from kafkette.client.telemetry.state import State
from kafkette.server.broker import Broker
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster

GET, PUSH = 71, 72
PRODUCER = "org.apache.kafka.producer."
CONSUMER = "org.apache.kafka.consumer."
RECORDS = 20


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster() as cluster:
        yield cluster


def broker_of(cluster: MemoryCluster) -> Broker:
    broker = cluster._broker  # the broker core behind memory://
    assert isinstance(broker, Broker)
    return broker


def subscribe(cluster: MemoryCluster, name: str, *prefixes: str) -> None:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False) as a:
        changes = [
            AlterConfigOp("metrics", ",".join(prefixes)),
            AlterConfigOp("interval.ms", "100"),
        ]
        a.incremental_alter_configs(
            {ConfigResource(ResourceType.CLIENT_METRICS, name): changes}
        ).all()


def requests(cluster: MemoryCluster, api_key: int) -> int:
    return sum(
        int(v[0])
        for (key, _), v in broker_of(cluster).metrics.requests.by_api.items()
        if key == api_key
    )


def pushed(cluster: MemoryCluster) -> dict[str, dict[str, float]]:
    """client id -> metric (with its attributes' values after a ``/``) -> value."""
    result: dict[str, dict[str, float]] = {}
    for client in broker_of(cluster).metrics.pushed.clients.values():
        values = result.setdefault(client.client_id, {})
        for (name, attributes), value in client.values.items():
            suffix = "/".join(v for _, v in attributes)
            values[name + ("/" + suffix if suffix else "")] = value.value
    return result


def instance_ids(cluster: MemoryCluster) -> dict[str, uuid.UUID]:
    clients = broker_of(cluster).metrics.pushed.clients
    return {client.client_id: instance for instance, client in clients.items()}


async def subscribed(telemetry: ClientTelemetry | None) -> ClientTelemetry:
    """Wait (at most 10 s) until the client holds its subscription."""
    assert telemetry is not None
    with anyio.fail_after(10):
        while telemetry.machine.state is not State.PUSH_NEEDED:
            await anyio.sleep(0.01)
    return telemetry


@pytest.mark.anyio
async def test_the_async_producer_pushes_its_metrics(cluster: MemoryCluster) -> None:
    subscribe(cluster, "producers", PRODUCER)
    async with AsyncProducer(
        bootstrap_servers=cluster.bootstrap_servers, client_id="tel-producer"
    ) as producer:
        for i in range(RECORDS):
            await producer.send("telemetry", b"value %d" % i, partition=0)
        await producer.flush()
        assert producer._core is not None
        telemetry = await subscribed(producer._core.client.telemetry)
        with anyio.fail_after(10):  # a push at the interval (100 ms), before any close
            while "tel-producer" not in pushed(cluster):
                await anyio.sleep(0.01)
        assert requests(cluster, PUSH) >= 1
    final = producer.metrics()
    values = pushed(cluster)["tel-producer"]  # the terminating push carried the last values
    assert values[PRODUCER + "record.send.total"] == RECORDS
    assert values[PRODUCER + "record.bytes.total"] == final["bytes_sent"]
    assert values[PRODUCER + "request.total"] == final["requests_sent"]
    assert values[PRODUCER + "node.request.latency.avg"] == final["request_latency_avg_ms"]
    assert values[PRODUCER + "node.request.latency.max"] == final["request_latency_max_ms"]
    assert values[PRODUCER + "record.queue.time.avg"] == final["record_queue_time_avg_ms"]
    assert values[PRODUCER + "record.queue.time.max"] == final["record_queue_time_max_ms"]
    assert values[PRODUCER + "produce.throttle.time.avg"] == 0.0  # the broker throttled none
    assert values[PRODUCER + "produce.throttle.time.max"] == 0.0
    assert values[PRODUCER + "connection.creation.total"] == telemetry.connections_created >= 1
    assert all(name.startswith(PRODUCER) for name in values)
    assert telemetry.machine.subscription is not None
    assert instance_ids(cluster) == {"tel-producer": telemetry.machine.subscription.instance_id}
    assert telemetry.machine.state is State.TERMINATED


@pytest.mark.anyio
async def test_the_async_consumer_pushes_its_metrics(cluster: MemoryCluster) -> None:
    subscribe(cluster, "consumers", CONSUMER + "fetch.manager.", CONSUMER + "coordinator.")
    async with AsyncProducer(
        bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False
    ) as producer:
        for i in range(RECORDS):
            await producer.send("telemetry", b"value %d" % i, partition=0)
    async with AsyncConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        client_id="tel-consumer",
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([TopicPartition("telemetry", 0)])
        got = 0
        with anyio.fail_after(20):
            while got < RECORDS:
                got += sum(map(len, (await consumer.poll(timeout_ms=1000)).values()))
        core = consumer._core
        assert core is not None
        await subscribed(core.client.telemetry)
    final = core.metrics()  # as the terminating push read it (the consumer is closed)
    values = pushed(cluster)["tel-consumer"]
    assert values[CONSUMER + "fetch.manager.records.consumed.total"] == RECORDS
    assert values[CONSUMER + "fetch.manager.fetch.total"] == final.fetch_count
    assert values[CONSUMER + "fetch.manager.fetch.latency.avg"] == final.fetch_latency_avg_ms
    assert values[CONSUMER + "fetch.manager.records.lag/telemetry/0"] == 0
    assert values[CONSUMER + "coordinator.assigned.partitions"] == 1
    assert CONSUMER + "node.request.latency.avg" not in values  # not asked for


def wait_subscribed(telemetry: ClientTelemetry | None) -> None:
    """:func:`subscribed` for a sync client, whose telemetry runs in its loop thread."""
    assert telemetry is not None
    deadline = time.monotonic() + 10
    while telemetry.machine.state is not State.PUSH_NEEDED:
        assert time.monotonic() < deadline, telemetry.machine.state
        time.sleep(0.01)


def test_the_sync_producer_and_consumer_push_theirs(cluster: MemoryCluster) -> None:
    subscribe(cluster, "everyone", PRODUCER + "record.", CONSUMER + "fetch.manager.records.")
    with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id="sync-p") as producer:
        for i in range(RECORDS):
            producer.send("telemetry", b"value %d" % i, partition=0)
        producer.flush()
        wait_subscribed(producer._core.client.telemetry)
    with Consumer(
        bootstrap_servers=cluster.bootstrap_servers,
        client_id="sync-c",
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([TopicPartition("telemetry", 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < RECORDS and time.monotonic() < deadline:
            got += sum(map(len, consumer.poll(timeout_ms=1000).values()))
        wait_subscribed(consumer._core.client.telemetry)
    values = pushed(cluster)
    assert values["sync-p"][PRODUCER + "record.send.total"] == RECORDS
    assert values["sync-p"][PRODUCER + "record.error.total"] == 0
    assert values["sync-c"] == {
        CONSUMER + "fetch.manager.records.consumed.total": RECORDS,
        CONSUMER + "fetch.manager.records.lag.max": 0,
        CONSUMER + "fetch.manager.records.lag/telemetry/0": 0,
    }
    assert set(instance_ids(cluster)) == {"sync-p", "sync-c"}


@pytest.mark.anyio
async def test_the_admin_client_pushes_its_connection_metrics(cluster: MemoryCluster) -> None:
    subscribe(cluster, "admins", "org.apache.kafka.admin.")
    async with AsyncAdminClient(
        bootstrap_servers=cluster.bootstrap_servers, client_id="tel-admin"
    ) as admin:
        await admin.list_topics()
        await subscribed(admin._client.telemetry)
    values = pushed(cluster)["tel-admin"]
    assert values["org.apache.kafka.admin.connection.creation.total"] >= 1
    assert set(values) == {
        "org.apache.kafka.admin.connection.creation.total",
        "org.apache.kafka.admin.connection.creation.rate",
    }


@pytest.mark.anyio
async def test_enable_metrics_push_false_asks_and_sends_nothing(cluster: MemoryCluster) -> None:
    subscribe(cluster, "all", "*")
    settings = {"bootstrap_servers": cluster.bootstrap_servers, "enable.metrics.push": "false"}
    async with AsyncProducer(settings) as producer:
        await producer.send("telemetry", b"v", partition=0)
        await producer.flush()
        assert producer._core is not None and producer._core.client.telemetry is None
    async with AsyncConsumer(settings, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("telemetry", 0)])
        with anyio.fail_after(20):
            while not await consumer.poll(timeout_ms=1000):
                pass
    async with AsyncAdminClient(settings) as admin:
        await admin.list_topics()
    assert requests(cluster, GET) == requests(cluster, PUSH) == 0
    assert pushed(cluster) == {}


@pytest.mark.anyio
async def test_a_broker_without_the_apis_gets_no_request(
    cluster: MemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscribe(cluster, "all", "*")
    broker = broker_of(cluster)
    served = broker.supported_versions()
    hidden = {key: versions for key, versions in served.items() if key not in (GET, PUSH)}
    monkeypatch.setattr(broker, "supported_versions", lambda: hidden)
    async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        await producer.send("telemetry", b"v", partition=0)
        await producer.flush()
        assert producer._core is not None
        telemetry = producer._core.client.telemetry
        assert telemetry is not None
        with anyio.fail_after(10):  # the task looked, found no broker with the APIs
            while telemetry.machine.due_in_ms(telemetry._clock()) == 0:
                await anyio.sleep(0.01)
        assert telemetry.machine.state is State.SUBSCRIPTION_NEEDED
        assert telemetry.machine.due_in_ms(telemetry._clock()) > 290_000  # type: ignore[operator]
    assert telemetry.requests_sent == 0
    assert requests(cluster, GET) == requests(cluster, PUSH) == 0


@pytest.mark.anyio
async def test_a_failure_to_build_the_payload_stops_telemetry_not_the_producer(
    cluster: MemoryCluster,
) -> None:
    """A collector that raises disables the client's telemetry; the producer goes on."""
    subscribe(cluster, "producers", PRODUCER)
    async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        assert producer._core is not None
        telemetry = producer._core.client.telemetry
        assert telemetry is not None

        def broken() -> list[Any]:
            raise RuntimeError("a collector bug")

        telemetry._collect = broken
        await producer.send("telemetry", b"v", partition=0)
        await producer.flush()
        with anyio.fail_after(10):
            while telemetry.machine.state is not State.DISABLED:
                await anyio.sleep(0.01)
        metadata = await (await producer.send("telemetry", b"after", partition=0))
    assert metadata.offset == 1
    assert pushed(cluster) == {}


@pytest.mark.anyio
async def test_a_group_consumer_pushes_its_commit_latency_and_poll_idle_ratio(
    cluster: MemoryCluster,
) -> None:
    """Two commits and a commit_async are measured; the pushed figures are the consumer's."""
    subscribe(cluster, "consumers", CONSUMER + "coordinator.commit.", CONSUMER + "poll.")
    async with AsyncProducer(
        bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False
    ) as producer:
        await producer.send("telemetry", b"the topic, for the commits", partition=0)
    async with AsyncConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        client_id="committer",
        group_id="g",
        enable_auto_commit=False,
    ) as consumer:
        consumer.assign([TopicPartition("telemetry", 0)])
        for offset in (1, 2):
            await consumer.poll(timeout_ms=10)
            await consumer.commit({TopicPartition("telemetry", 0): offset})
        done: list[Exception | None] = []
        consumer.commit_async({TopicPartition("telemetry", 0): 3}, lambda _, e: done.append(e))
        with anyio.fail_after(10):
            while not done:
                await consumer.poll(timeout_ms=10)
        core = consumer._core
        assert core is not None
        await subscribed(core.client.telemetry)
    final = core.metrics()
    assert done == [None]
    assert core.metrics_recorder.commit_count == 3
    assert 0 < final.commit_latency_avg_ms <= final.commit_latency_max_ms
    assert 0 < final.poll_idle_ratio_avg <= 1
    assert pushed(cluster)["committer"] == {
        CONSUMER + "coordinator.commit.latency.avg": final.commit_latency_avg_ms,
        CONSUMER + "coordinator.commit.latency.max": final.commit_latency_max_ms,
        CONSUMER + "poll.idle.ratio.avg": final.poll_idle_ratio_avg,
    }


@pytest.mark.anyio
async def test_a_subscribed_consumer_pushes_its_rebalance_latency(cluster: MemoryCluster) -> None:
    """The classic join's time, as the consumer's metrics() has it, in the push."""
    subscribe(cluster, "rebalancers", CONSUMER + "coordinator.rebalance.")
    async with AsyncProducer(
        bootstrap_servers=cluster.bootstrap_servers, enable_metrics_push=False
    ) as producer:
        await producer.send("rebalanced", b"the topic", partition=0)
    async with AsyncConsumer(
        bootstrap_servers=cluster.bootstrap_servers, client_id="rebalancer", group_id="rg"
    ) as consumer:
        consumer.subscribe(["rebalanced"])
        with anyio.fail_after(20):
            while not consumer.assignment():
                await consumer.poll(timeout_ms=10)
        core = consumer._core
        assert core is not None
        await subscribed(core.client.telemetry)
    final = core.metrics()
    assert core.metrics_recorder.rebalance_count == 1
    assert final.rebalance_latency_total_ms > 0
    assert pushed(cluster)["rebalancer"] == {
        CONSUMER + "coordinator.rebalance.latency.avg": final.rebalance_latency_total_ms,
        CONSUMER + "coordinator.rebalance.latency.max": final.rebalance_latency_total_ms,
        CONSUMER + "coordinator.rebalance.latency.total": final.rebalance_latency_total_ms,
    }
