"""A subscribed consumer's first poll returns the records once its assignment arrives,
not at its timeout (#28), under both group protocols, sync and async.

With ``group.protocol=consumer`` the assignment comes in a heartbeat answer, in the
background, while ``poll`` waits for records: that answer must wake the poll to
reconcile (take the partitions) and fetch, as Java's poll returns the records it
fetched after the assignment arrived within the same call.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from kafkette import AsyncConsumer, AsyncProducer, Consumer, Producer, TopicPartition
from kafkette.consumer.record import ConsumerRecord
from kafkette.testing import MemoryCluster
from tests.testing.test_cluster import create
from tests.testing.test_mock_clock import REAL_BUDGET_S, run_virtual
from tests.testing.test_mock_clock import create as create_in_loop

PROTOCOLS = ["classic", "consumer"]
TP = TopicPartition("t", 0)
VALUES = [b"a", b"b", b"c"]
EXPECTED = {TP: [(0, b"a"), (1, b"b"), (2, b"c")]}
POLL_S = 10.0
WELL_BEFORE_S = 5.0
"""Real seconds the first poll may take: a few requests on memory://, on a loaded
2-core machine too; the bug waited the whole timeout."""


def settings(cluster: MemoryCluster, protocol: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.bootstrap_servers,
        "group_id": "g",
        "group_protocol": protocol,
        "auto_offset_reset": "earliest",
    }


def offsets_and_values(
    polled: dict[TopicPartition, list[ConsumerRecord]],
) -> dict[TopicPartition, list[tuple[int, bytes | None]]]:
    return {tp: [(r.offset, r.value) for r in records] for tp, records in polled.items()}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_first_poll_returns_the_records_at_once_in_virtual_time(protocol: str) -> None:
    """Under trio's MockClock with the broker on the test's loop: the first
    ``poll(10)`` returns the three records at the instant it starts (the in-loop
    broker assigns in its first answer), not 10 virtual seconds later."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True) as cluster:
            await create_in_loop(cluster, "t")
            async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for value in VALUES:
                    await (await producer.send("t", value))
            async with AsyncConsumer(**settings(cluster, protocol)) as consumer:
                consumer.subscribe(["t"])
                started = trio.current_time()
                polled = await consumer.poll(POLL_S)
                elapsed = trio.current_time() - started
                assert offsets_and_values(polled) == EXPECTED
                assert consumer.assignment() == {TP}
            return elapsed

    elapsed, real = run_virtual(main)
    assert elapsed == 0.0
    assert real < REAL_BUDGET_S


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.anyio
async def test_async_first_poll_returns_the_records_well_before_its_timeout(
    protocol: str,
) -> None:
    """On asyncio and trio, with the cluster in its own thread (real time)."""
    with MemoryCluster() as cluster:
        create(cluster, "t")
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for value in VALUES:
                await (await producer.send("t", value))
        async with AsyncConsumer(**settings(cluster, protocol)) as consumer:
            consumer.subscribe(["t"])
            started = time.monotonic()
            polled = await consumer.poll(POLL_S)
            elapsed = time.monotonic() - started
            assert offsets_and_values(polled) == EXPECTED
            assert elapsed < WELL_BEFORE_S


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_first_poll_returns_the_records_well_before_its_timeout(protocol: str) -> None:
    """The sync consumer: its poll waits in the caller's thread while the heartbeat
    answer arrives in the consumer's loop thread."""
    with MemoryCluster() as cluster:
        create(cluster, "t")
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for value in VALUES:
                producer.send("t", value).result(10)
        with Consumer(**settings(cluster, protocol)) as consumer:
            consumer.subscribe(["t"])
            started = time.monotonic()
            polled = consumer.poll(POLL_S)
            elapsed = time.monotonic() - started
            assert offsets_and_values(polled) == EXPECTED
            assert elapsed < WELL_BEFORE_S
