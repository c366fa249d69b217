"""The pytest plugin's fixtures, used here directly (pytest loads the plugin through its
entry point) and, for ``--kafka-bootstrap`` and ``kafka_broker``, in a child pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkette import AdminClient, AsyncConsumer, Producer, TopicPartition
from kafkette.testing import ManualClock, MemoryCluster
from tests.brokers import BrokerProcess


def test_kafka_cluster_is_fresh_and_clock_is_its_own(
    kafka_cluster: MemoryCluster, kafka_clock: ManualClock, kafka_bootstrap_servers: str
) -> None:
    assert kafka_bootstrap_servers == kafka_cluster.bootstrap_servers
    assert kafka_clock is kafka_cluster.clock
    before = kafka_clock.now_ms
    kafka_cluster.advance(1.5)
    assert kafka_clock.now_ms == before + 1500


def test_kafka_topic_makes_topics_with_partitions_and_configs(
    kafka_cluster: MemoryCluster, kafka_admin: AdminClient, kafka_topic: Callable[..., str]
) -> None:
    plain = kafka_topic()
    compacted = kafka_topic(1, cleanup_policy="compact")
    assert plain != compacted
    topics = kafka_admin.describe_topics([plain, compacted]).all()
    assert [len(topics[name].partitions) for name in (plain, compacted)] == [3, 1]
    with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as producer:
        producer.send(compacted, b"v", key=b"k").result(10)
    assert [r.value for r in kafka_cluster.records(compacted)] == [b"v"]


@pytest.mark.anyio
async def test_fixtures_in_async_tests(
    kafka_cluster: MemoryCluster, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=1)
    async with AsyncConsumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert await consumer.poll(timeout_ms=0) == {}


SUITE = """
from kafkette import Consumer, Producer, TopicPartition

def test_round_trip(kafka_bootstrap_servers, kafka_topic):
    topic = kafka_topic(partitions=1)
    with Producer(bootstrap_servers=kafka_bootstrap_servers) as producer:
        producer.send(topic, b"hello").result(10)
    with Consumer(bootstrap_servers=kafka_bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        records = []
        while not records:
            records = [r.value for batch in c.poll(timeout_ms=1000).values() for r in batch]
    assert records == [b"hello"]
    print("BOOTSTRAP", kafka_bootstrap_servers)

def test_broker(kafka_broker):
    print("BROKER", kafka_broker.bootstrap_servers)

def test_cluster_needs_memory(kafka_cluster):
    pass
"""


def run_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user_suite.py").write_text(textwrap.dedent(SUITE))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_user_suite_runs_on_memory_and_on_a_running_kafka(
    tmp_path: Path, memory_broker: BrokerProcess
) -> None:
    """The same file: on memory:// (kafka_broker starting a real kafkette serve), then
    with --kafka-bootstrap pointing at a running broker."""
    local = run_suite(tmp_path)
    assert local.returncode == 0 and "3 passed" in local.stdout, local.stdout
    assert "BOOTSTRAP memory://cluster-" in local.stdout
    assert "BROKER 127.0.0.1:" in local.stdout
    remote = run_suite(tmp_path, "--kafka-bootstrap", memory_broker.bootstrap)
    assert f"BOOTSTRAP {memory_broker.bootstrap}" in remote.stdout, remote.stdout
    assert f"BROKER {memory_broker.bootstrap}" in remote.stdout
    assert "kafka_cluster is an in-process cluster" in remote.stdout
    assert "2 passed, 1 error" in remote.stdout
