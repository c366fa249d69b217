"""MemoryCluster(in_loop=True): the broker core served on the test's own event loop.

On asyncio and trio with their real clocks (tests/testing/test_mock_clock.py
has trio's MockClock): the clients see the same broker, the broker's timers
keep the loop's time, nothing runs in another thread, and what cannot work
(a sync client, another thread, ``with``) is a clear error.
"""

from __future__ import annotations

import threading

import anyio
import pytest

from kafkette import AdminClient, AsyncConsumer, AsyncProducer, NewTopic, TopicPartition
from kafkette.admin import AsyncAdminClient
from kafkette.client.connection import BrokerConnection
from kafkette.client.inprocess import create_cluster, get_cluster
from kafkette.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NotEnoughReplicasError,
    ProducerFencedError,
)
from kafkette.protocol.messages import MetadataRequest
from kafkette.server import BrokerConfig
from kafkette.testing import ManualClock, MemoryCluster

pytestmark = pytest.mark.anyio

CLOSE_BUDGET_S = 0.020


async def create(cluster: MemoryCluster, topic: str, partitions: int = 1) -> None:
    async with AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        await admin.create_topics([NewTopic(topic, partitions)])


async def test_clients_and_read_outs_on_the_loop() -> None:
    """Produce and consume through a group, with a retried fault, and no thread of the
    cluster's own."""
    async with MemoryCluster(in_loop=True) as cluster:
        await create(cluster, "t", 2)
        cluster.faults.fail("Produce", NotEnoughReplicasError, times=2)
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=1
        ) as producer:
            for i in range(4):
                await (await producer.send("t", b"v%d" % i, partition=i % 2))
        assert cluster.faults.armed() == []
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            consumer.subscribe(["t"])
            seen: list[tuple[int, int, bytes]] = []
            while len(seen) < 4:
                for records in (await consumer.poll(timeout=1.0)).values():
                    seen += [(r.partition, r.offset, r.value) for r in records]
            await consumer.commit()
            member = consumer.group_metadata().member_id
            assert cluster.assignment("g") == {
                member: {TopicPartition("t", 0), TopicPartition("t", 1)}
            }
        assert sorted(seen) == [(0, 0, b"v0"), (0, 1, b"v2"), (1, 0, b"v1"), (1, 1, b"v3")]
        assert cluster.committed("g") == {TopicPartition("t", 0): 2, TopicPartition("t", 1): 2}
        assert [r.value for r in cluster.records("t", 1)] == [b"v1", b"v3"]
        url = cluster.bootstrap_servers
        assert [t.name for t in threading.enumerate() if url in t.name] == []
    assert cluster.closed


async def test_broker_timers_keep_the_loops_time() -> None:
    """The broker's clock is the loop's: a Produce delayed 0.6 s by a fault times out at
    request.timeout.ms=100 in real time, and is appended when the delay has passed."""
    async with MemoryCluster(in_loop=True) as cluster:
        await create(cluster, "t")
        assert abs(cluster.clock() - cluster._broker.now_ms()) <= 1
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            linger_ms=0,
            request_timeout_ms=100,
            delivery_timeout_ms=100,
            retries=0,
        ) as producer:
            cluster.faults.delay("Produce", 0.6, times=1)
            started = anyio.current_time()
            with pytest.raises(KafkaTimeoutError):
                await (await producer.send("t", b"v"))
            assert 0.1 <= anyio.current_time() - started < 0.6
        assert cluster.records("t") == []
        await anyio.sleep(0.6 - (anyio.current_time() - started) + 0.05)
        assert [(r.value, r.offset) for r in cluster.records("t")] == [(b"v", 0)]


async def test_consumer_close_with_a_long_poll_in_flight() -> None:
    """Closing a consumer whose Fetch waits fetch.max.wait.ms on the broker returns at once:
    the request's task finishes on the loop without it."""
    async with MemoryCluster(in_loop=True) as cluster:
        await create(cluster, "t")
        consumer = AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers, fetch_max_wait_ms=5000
        )
        async with consumer:
            consumer.assign([TopicPartition("t", 0)])
            assert await consumer.poll(timeout=0.2) == {}  # a Fetch is now waiting
            started = anyio.current_time()
        assert anyio.current_time() - started < CLOSE_BUDGET_S


async def test_closing_the_cluster_ends_requests_in_flight() -> None:
    """A request the broker holds when the cluster exits fails at once (its connection
    breaks), and clients connecting afterwards are refused."""
    failures: list[BaseException] = []
    async with anyio.create_task_group() as tasks:
        async with MemoryCluster(in_loop=True) as cluster:
            connection = await BrokerConnection.over_stream(
                get_cluster(cluster.bootstrap_servers).open_stream(), address="held"
            )
            cluster.faults.delay("Metadata", 3600)

            async def held() -> None:
                try:
                    await connection.request(MetadataRequest(topics=None))
                except Exception as exc:
                    failures.append(exc)

            tasks.start_soon(held)
            await anyio.sleep(0.05)
            started = anyio.current_time()
        await anyio.sleep(0)
        await anyio.sleep(0)
    assert anyio.current_time() - started < 0.5
    assert [type(f) for f in failures] == [KafkaConnectionError], failures
    await connection.aclose()
    with pytest.raises(KafkaConnectionError, match="its MemoryCluster was closed"):
        get_cluster(cluster.bootstrap_servers)


async def test_advance_with_a_manual_clock() -> None:
    """Given a ManualClock, a cluster on the loop expires a transaction by advance()."""
    clock = ManualClock()
    async with MemoryCluster(in_loop=True, clock=clock) as cluster:
        await create(cluster, "t")
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            transactional_id="tx",
            transaction_timeout_ms=5_000,
        ) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await (await producer.send("t", b"late"))
            cluster.advance(5.0)  # Kafka aborts once more than the timeout has passed
            assert cluster.transactions() == {"tx": "Ongoing"}
            cluster.advance(0.001)
            assert cluster.transactions()["tx"] in ("PrepareAbort", "CompleteAbort")
            with pytest.raises(ProducerFencedError):  # its epoch was bumped by the abort
                await producer.abort_transaction()
        assert cluster.records("t", isolation="read_committed") == []


async def test_advance_refuses_the_loop_clock() -> None:
    async with MemoryCluster(in_loop=True) as cluster:
        with pytest.raises(TypeError, match="follows its event loop's clock"):
            cluster.advance(1)


async def test_other_threads_and_sync_clients_are_refused() -> None:
    """A client in another thread gets KafkaConnectionError naming in_loop (a sync
    client's operation times out with it as its last error); so does the same thread
    before the cluster is entered."""
    cluster = MemoryCluster(in_loop=True)
    with pytest.raises(KafkaConnectionError, match="not serving"):
        get_cluster(cluster.bootstrap_servers).open_stream()
    async with cluster:

        def from_a_thread() -> None:
            with pytest.raises(KafkaConnectionError, match="in_loop"):
                get_cluster(cluster.bootstrap_servers).open_stream()
            with pytest.raises(RuntimeError, match="in_loop"):
                cluster.records("t")
            with (
                AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
                pytest.raises(KafkaTimeoutError, match="in_loop"),
            ):
                admin.list_topics(timeout=0.3)

        await anyio.to_thread.run_sync(from_a_thread)


def test_in_loop_needs_async_with() -> None:
    cluster = MemoryCluster(in_loop=True)
    try:
        with pytest.raises(TypeError, match="async with"), cluster:
            pass
    finally:
        cluster.close()
    with pytest.raises(ValueError, match="memory:// only"):
        create_cluster("file:///tmp/nowhere", BrokerConfig(), ManualClock(), in_loop=True)
