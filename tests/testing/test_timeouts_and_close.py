"""Consumer timeouts in seconds and milliseconds, and a fast close on memory://."""

from __future__ import annotations

import time

import anyio
import pytest

from kafkette import AsyncConsumer, Consumer, Producer, TopicPartition
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.testing import MemoryCluster
from tests.testing.test_cluster import create

CLOSE_BUDGET_S = 0.020
CLOSES = 3
FETCH_WAIT_S = 5.0


def assert_fast(closes: list[float]) -> None:
    """The best of the closes within the budget, and none near the parked fetch's wait.

    One close is a few thread hand-offs (about 6 ms here); on a loaded machine (CI runs
    two test workers on two cores) one of them can be descheduled past 20 ms, so the
    budget holds for the best of three. A close that waited out the fetch would take
    seconds every time.
    """
    shown = ", ".join(f"{c * 1000:.1f} ms" for c in closes)
    assert min(closes) < CLOSE_BUDGET_S, f"closes took {shown}"
    assert max(closes) < FETCH_WAIT_S / 2, f"closes took {shown}"


def test_timeout_spellings() -> None:
    assert timeout_in_ms(None, None, None) is None
    assert timeout_in_ms(100, None, None) == 100.0  # kafka-python: poll(100)
    assert timeout_in_ms(1.0, None, None) == 1000.0  # confluent-kafka: poll(1.0)
    assert timeout_in_ms(None, 0.25, None) == 250.0
    assert timeout_in_ms(None, None, 75) == 75
    with pytest.raises(TypeError, match="give one timeout"):
        timeout_in_ms(None, 1.0, 1000)
    with pytest.raises(TypeError, match="a timeout is a number"):
        timeout_in_ms(True, None, None)


def test_poll_in_seconds_and_milliseconds() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send("t", b"v").result(10)
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([TopicPartition("t", 0)])
            records = consumer.poll(1.0)  # confluent-kafka's spelling: seconds
            assert [r.value for r in records[TopicPartition("t", 0)]] == [b"v"]
            started = time.monotonic()
            assert consumer.poll(timeout=0.05) == {}
            assert consumer.poll(50) == {}  # kafka-python's positional milliseconds
            assert consumer.poll(timeout_ms=50) == {}
            assert time.monotonic() - started >= 0.15
            assert consumer.position(TopicPartition("t", 0), timeout=1.0) == 1
            with pytest.raises(TypeError):
                consumer.poll(1.0, timeout=1.0)


@pytest.mark.anyio
async def test_async_poll_in_seconds() -> None:
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([TopicPartition("t", 0)])
            started = anyio.current_time()
            assert await consumer.poll(timeout=0.05) == {}
            assert await consumer.poll(0.05) == {}
            assert anyio.current_time() - started >= 0.1
            assert await consumer.position(TopicPartition("t", 0), timeout=1.0) == 0


def parked_consumer(cluster: MemoryCluster) -> Consumer:
    """A consumer whose Fetch waits at the broker (no data, fetch.max.wait.ms 5 s)."""
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="g",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=int(FETCH_WAIT_S * 1000),
    )
    consumer.subscribe(["t"])
    while not consumer.assignment():
        consumer.poll(timeout_ms=50)
    consumer.poll(timeout_ms=50)  # the next fetch is now parked at the broker
    return consumer


def test_close_returns_fast_with_a_long_poll_in_flight() -> None:
    closes = []
    with MemoryCluster() as cluster:
        create(cluster, "t")
        for _ in range(CLOSES):
            consumer = parked_consumer(cluster)
            started = time.perf_counter()
            consumer.close()
            closes.append(time.perf_counter() - started)
            assert cluster.assignment("g") == {}  # it left the group on its way out
    assert_fast(closes)


@pytest.mark.anyio
async def test_async_close_returns_fast_with_a_long_poll_in_flight() -> None:
    closes = []
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        for _ in range(CLOSES):
            consumer = AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                auto_offset_reset="earliest",
                fetch_max_wait_ms=int(FETCH_WAIT_S * 1000),
            )
            async with consumer:
                consumer.subscribe(["t"])
                while not consumer.assignment():
                    await consumer.poll(timeout_ms=50)
                await consumer.poll(timeout_ms=50)
                started = anyio.current_time()
                await consumer.close()
                closes.append(anyio.current_time() - started)
            assert cluster.assignment("g") == {}
    assert_fast(closes)


def test_commit_and_offsets_take_seconds_or_milliseconds() -> None:
    tp = TopicPartition("t", 0)
    with MemoryCluster() as cluster:
        create(cluster, "t")
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send("t", b"v", timestamp=1_000).result(10)
        with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g") as consumer:
            consumer.commit({tp: 1}, timeout=5.0)
            consumer.commit({tp: 1}, 5000)  # kafka-python's positional milliseconds
            assert consumer.committed([tp], timeout=5.0)[tp].offset == 1  # type: ignore[union-attr]
            assert consumer.committed([tp], timeout_ms=5000)[tp].offset == 1  # type: ignore[union-attr]
            found = consumer.offsets_for_times({tp: 0}, timeout=5.0)[tp]
            assert found is not None and found.offset == 0
            assert consumer.beginning_offsets([tp], timeout=5.0) == {tp: 0}
            assert consumer.end_offsets([tp], timeout=5.0) == {tp: 1}
            with pytest.raises(TypeError, match="give one timeout"):
                consumer.end_offsets([tp], 5000, timeout=5.0)


@pytest.mark.anyio
async def test_async_commit_and_offsets_take_seconds() -> None:
    tp = TopicPartition("t", 0)
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers, group_id="g"
        ) as consumer:
            await consumer.commit({tp: 0}, timeout=5.0)
            assert (await consumer.committed([tp], timeout=5.0))[tp].offset == 0  # type: ignore[union-attr]
            assert await consumer.offsets_for_times({tp: 0}, timeout=5.0) == {tp: None}
            assert await consumer.beginning_offsets([tp], timeout=5.0) == {tp: 0}
            assert await consumer.end_offsets([tp], timeout=5.0) == {tp: 0}
            with pytest.raises(TypeError, match="give one timeout"):
                await consumer.committed([tp], 5000, timeout=5.0)
