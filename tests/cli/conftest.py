"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest

from kafkette import Producer
from tests.brokers import BrokerProcess
from tests.cli.records import create_topic


@pytest.fixture
def timed(memory_broker: BrokerProcess) -> str:
    """Topic "timed": partition 0 has offsets 0-4 at 1000..5000 ms, partition 1 offsets
    0-2 at 1500, 2500, 3500 ms; keys k<partition><offset>, values v<partition><offset>."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "timed", 2)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for offset in range(5):
            producer.send(
                "timed",
                f"v0{offset}".encode(),
                key=f"k0{offset}".encode(),
                partition=0,
                timestamp=1000 * (offset + 1),
            )
        for offset in range(3):
            producer.send(
                "timed",
                f"v1{offset}".encode(),
                key=f"k1{offset}".encode(),
                partition=1,
                timestamp=1500 + 1000 * offset,
            )
        producer.flush()
    return bootstrap
