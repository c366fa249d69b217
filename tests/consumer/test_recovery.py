"""The consumer survives a broker crash: it reconnects and goes on from its position."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette import AsyncConsumer, Consumer, TopicPartition
from tests.brokers import BrokerProcess
from tests.consumer.helpers import apoll_n, offsets, poll_n
from tests.consumer.targets import Target

SETTINGS: dict[str, Any] = {
    "fetch_max_wait_ms": 100,
    "reconnect_backoff_ms": 20,
    "retry_backoff_ms": 20,
    "auto_offset_reset": "earliest",
}


def fill(broker: BrokerProcess, topic: str, start: int, count: int) -> None:
    target = Target("disk", broker.bootstrap)
    try:
        if start == 0:
            target.create_topic(topic)
        target.produce_values(TopicPartition(topic, 0), count, start=start)
    finally:
        target.close()


@pytest.mark.anyio
async def test_broker_restart_async(disk_broker: BrokerProcess) -> None:
    tp = TopicPartition("crash", 0)
    fill(disk_broker, "crash", 0, 3)
    async with AsyncConsumer(bootstrap_servers=disk_broker.bootstrap, **SETTINGS) as consumer:
        consumer.assign([tp])
        assert offsets(await apoll_n(consumer, 3)) == [0, 1, 2]
        disk_broker.kill()
        assert await consumer.poll(timeout_ms=200) == {}
        disk_broker.start()
        fill(disk_broker, "crash", 3, 2)
        got = await apoll_n(consumer, 2)
        assert [(r.offset, r.value) for r in got] == [(3, b"v3"), (4, b"v4")]


def test_broker_restart_sync(disk_broker: BrokerProcess) -> None:
    tp = TopicPartition("crash", 0)
    fill(disk_broker, "crash", 0, 3)
    with Consumer(bootstrap_servers=disk_broker.bootstrap, **SETTINGS) as consumer:
        consumer.assign([tp])
        assert offsets(poll_n(consumer, 3)) == [0, 1, 2]
        disk_broker.kill()
        assert consumer.poll(timeout_ms=200) == {}
        disk_broker.start()
        fill(disk_broker, "crash", 3, 2)
        assert offsets(poll_n(consumer, 2)) == [3, 4]
