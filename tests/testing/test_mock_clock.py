"""The async clients' timers under trio's MockClock: virtual time, no real waiting.

A client keeps time on its event loop's clock (kafkette.clocks.loop_clock_ms),
so trio's MockClock moves its linger, backoff and request timeouts as it moves
its sleeps. The memory:// broker answers from its own thread, which trio cannot
see: with ``autojump_threshold=0`` it would jump the clock while a request is in
flight, so the tests that talk to a live cluster allow it a short real-time
threshold (see docs/testing.md, "What holds where").
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from kafkette import AsyncConsumer, AsyncProducer, TopicPartition
from kafkette.admin import AsyncAdminClient
from kafkette.clocks import loop_clock_ms, monotonic_ms
from kafkette.errors import KafkaTimeoutError
from kafkette.testing import MemoryCluster
from tests.testing.test_cluster import create

LIVE_THRESHOLD_S = 0.25
"""Real idle time before trio jumps the clock when a live cluster may be answering."""

REAL_BUDGET_S = 3.0
"""Real seconds a test may take (its virtual time is 10 s or more)."""


def run_virtual(
    main: Callable[[], Awaitable[float]], autojump_threshold: float
) -> tuple[float, float]:
    """Run ``main`` under trio with a MockClock; (virtual seconds it returned, real seconds)."""
    started = time.monotonic()
    virtual = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=autojump_threshold))
    return virtual, time.monotonic() - started


def test_linger_runs_in_virtual_time() -> None:
    """A record sent with linger.ms=60000 is delivered after 60 s of virtual time."""
    with MemoryCluster() as cluster:
        create(cluster, "t")

        async def main() -> float:
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000
            ) as producer:
                started = trio.current_time()
                future = await producer.send("t", b"v", key=b"k")
                metadata = await future
                assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 0, 0)
                return trio.current_time() - started

        virtual, real = run_virtual(main, LIVE_THRESHOLD_S)
        assert virtual == pytest.approx(60.0, abs=1e-6)
        assert real < REAL_BUDGET_S
        assert [(r.key, r.value) for r in cluster.records("t")] == [(b"k", b"v")]


def test_request_timeout_runs_in_virtual_time() -> None:
    """A Produce the broker holds for an hour fails at delivery.timeout.ms of virtual time."""
    with MemoryCluster() as cluster:
        create(cluster, "t")

        async def main() -> float:
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers,
                linger_ms=0,
                request_timeout_ms=10_000,
                delivery_timeout_ms=10_000,
                retries=0,
            ) as producer:
                cluster.faults.delay("Produce", 3600, times=1)
                started = trio.current_time()
                future = await producer.send("t", b"v")
                with pytest.raises(KafkaTimeoutError):
                    await future
                return trio.current_time() - started

        virtual, real = run_virtual(main, LIVE_THRESHOLD_S)
        assert virtual == pytest.approx(10.0, abs=1e-6)
        assert real < REAL_BUDGET_S


def test_reconnect_backoff_runs_in_virtual_time() -> None:
    """An admin client retrying a closed cluster (reconnect backoff) times out at exactly
    timeout_ms of virtual time, with autojump_threshold=0 (no broker thread involved)."""
    cluster = MemoryCluster()
    cluster.close()

    async def main() -> float:
        async with AsyncAdminClient(
            bootstrap_servers=cluster.bootstrap_servers,
            reconnect_backoff_ms=10_000,
            reconnect_backoff_max_ms=10_000,
        ) as admin:
            started = trio.current_time()
            with pytest.raises(KafkaTimeoutError):
                await admin.describe_cluster(timeout_ms=60_000)
            return trio.current_time() - started

    virtual, real = run_virtual(main, 0)
    assert virtual == pytest.approx(60.0, abs=1e-6)
    assert real < REAL_BUDGET_S


def test_max_poll_interval_runs_in_virtual_time() -> None:
    """A group member that stops polling keeps heartbeating, then leaves the group once
    max.poll.interval.ms of virtual time has passed since its last poll."""
    with MemoryCluster(group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "t")

        async def main() -> float:
            async with AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                max_poll_interval_ms=30_000,
                heartbeat_interval_ms=10_000,
            ) as consumer:
                consumer.subscribe(["t"])
                while not consumer.assignment():
                    await consumer.poll(timeout_ms=100)
                [member] = cluster.assignment("g")
                polled = trio.current_time()
                await consumer.poll(timeout_ms=0)
                await trio.sleep(29.9)
                assert cluster.assignment("g") == {member: {TopicPartition("t", 0)}}
                await trio.sleep(0.2)
                assert cluster.assignment("g") == {}
                return trio.current_time() - polled

        virtual, real = run_virtual(main, LIVE_THRESHOLD_S)
        assert virtual == pytest.approx(30.1, abs=1e-6)
        assert (
            real < 3 * REAL_BUDGET_S
        )  # a jump per timer (heartbeats, fetches) costs the threshold


def test_loop_clock_outside_a_loop_is_the_monotonic_clock() -> None:
    """A client created outside a running loop keeps time.monotonic."""
    assert loop_clock_ms() is monotonic_ms


def test_loop_clock_reads_trios_clock() -> None:
    """Under trio, the clock is the run's clock in milliseconds (MockClock: virtual)."""

    async def main() -> float:
        clock = loop_clock_ms()
        before = clock()
        await trio.sleep(12.5)
        return clock() - before

    elapsed_ms, real = run_virtual(main, 0)
    assert elapsed_ms == pytest.approx(12_500.0, abs=1e-6)
    assert real < REAL_BUDGET_S
