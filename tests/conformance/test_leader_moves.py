"""Independent consumers follow leader moves on ``kafkette serve --nodes 3``.

The broker stands for nodes 1..3 on three ports; each partition has its
leader. A consumer (librdkafka, kafka-python) reads every partition, the
leaders of all partitions move to the next node (AlterPartitionReassignments,
Kafka's admin API, sent by hand), more records are produced (by our producer,
which follows the move), and the same consumer must read them too: every
partition exactly its records, in order, at contiguous offsets. A fetch at the
old leader is answered NOT_LEADER_OR_FOLLOWER, so the consumer has to refresh
its metadata (librdkafka also validates its position with
OffsetForLeaderEpoch at the new leader's epoch).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import anyio
import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkette import AdminClient, NewTopic, Producer
from kafkette.client.connection import BrokerConnection
from kafkette.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from tests.brokers import BrokerProcess, kafkette_broker

PARTITIONS = 3
PER_PHASE = 60
TIMEOUT_S = 60.0
_NODES = re.compile(r"nodes ((?:\d+=[0-9.]+:\d+,?)+)")

Consumed = dict[int, list[tuple[int, bytes | None]]]


@pytest.fixture
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None, "--nodes", "3")


def node_addresses(server: BrokerProcess) -> dict[int, tuple[str, int]]:
    match = _NODES.search(server.log())
    assert match is not None, server.log()
    found: dict[int, tuple[str, int]] = {}
    for item in match.group(1).split(","):
        node, _, address = item.partition("=")
        host, _, port = address.rpartition(":")
        found[int(node)] = (host, int(port))
    return found


async def _leaders(host: str, port: int, topic: str) -> dict[int, tuple[int, int]]:
    connection = await BrokerConnection.connect(host, port)
    try:
        answer = await connection.request(
            MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
        )
        assert isinstance(answer, MetadataResponse)
        [found] = answer.topics
        return {p.partition_index: (p.leader_id, p.leader_epoch) for p in found.partitions}
    finally:
        await connection.aclose()


async def _reassign(host: str, port: int, topic: str, targets: dict[int, int]) -> list[int]:
    connection = await BrokerConnection.connect(host, port)
    try:
        request = AlterPartitionReassignmentsRequest(
            topics=[
                ReassignableTopic(
                    topic, [ReassignablePartition(p, [n]) for p, n in sorted(targets.items())]
                )
            ]
        )
        answer = await connection.request(request)
        assert isinstance(answer, AlterPartitionReassignmentsResponse)
        return [p.error_code for t in answer.responses for p in t.partitions]
    finally:
        await connection.aclose()


def move_every_leader(server: BrokerProcess, topic: str) -> dict[int, tuple[int, int]]:
    """Move each partition's leader to the next node; the new (leader, epoch) by partition."""
    before = anyio.run(_leaders, "127.0.0.1", server.port, topic)
    targets = {p: leader % 3 + 1 for p, (leader, _) in before.items()}
    assert anyio.run(_reassign, "127.0.0.1", server.port, topic, targets) == [0] * PARTITIONS
    after = anyio.run(_leaders, "127.0.0.1", server.port, topic)
    assert after == {p: (targets[p], epoch + 1) for p, (_, epoch) in before.items()}
    return after


def produce(server: BrokerProcess, topic: str, start: int) -> None:
    with Producer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=5) as producer:
        for i in range(start, start + PER_PHASE):
            producer.send(topic, f"v{i}".encode(), partition=i % PARTITIONS)


def expected(count: int) -> Consumed:
    out: Consumed = {p: [] for p in range(PARTITIONS)}
    for i in range(count):
        p = i % PARTITIONS
        out[p].append((len(out[p]), f"v{i}".encode()))
    return out


def setup_topic(server: BrokerProcess, topic: str) -> None:
    with AdminClient(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)]).all()


def run_phases(server: BrokerProcess, topic: str, poll: Callable[[Consumed], None]) -> Consumed:
    consumed: Consumed = {p: [] for p in range(PARTITIONS)}

    def until(total: int) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while sum(map(len, consumed.values())) < total:
            assert time.monotonic() < deadline, f"consumed {consumed}"
            poll(consumed)

    produce(server, topic, 0)
    until(PER_PHASE)
    move_every_leader(server, topic)
    produce(server, topic, PER_PHASE)
    until(2 * PER_PHASE)
    move_every_leader(server, topic)
    produce(server, topic, 2 * PER_PHASE)
    until(3 * PER_PHASE)
    return consumed


def test_serve_nodes_lists_three_nodes_and_spreads_leaders(server: BrokerProcess) -> None:
    addresses = node_addresses(server)
    assert sorted(addresses) == [1, 2, 3]
    assert addresses[1] == ("127.0.0.1", server.port)
    assert len({port for _, port in addresses.values()}) == 3
    setup_topic(server, "spread")
    leaders = anyio.run(_leaders, *addresses[2], "spread")
    assert sorted(leader for leader, _ in leaders.values()) == [1, 2, 3]
    assert {epoch for _, epoch in leaders.values()} == {0}


@pytest.mark.parametrize("count", ["0", "65", "x"])
def test_serve_refuses_a_bad_node_count(count: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", "--nodes", count],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--nodes" in done.stderr


def test_librdkafka_consumes_across_leader_moves(server: BrokerProcess) -> None:
    setup_topic(server, "rd")
    consumer = RdConsumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 60_000,
        }
    )
    consumer.assign([RdTopicPartition("rd", p, 0) for p in range(PARTITIONS)])

    def poll(consumed: Consumed) -> None:
        message = consumer.poll(0.2)
        if message is None:
            return
        error = message.error()
        if error is not None:
            assert error.retriable() or error.code() < 0, error  # librdkafka's own events
            return
        consumed[message.partition()].append((message.offset(), message.value()))

    try:
        assert run_phases(server, "rd", poll) == expected(3 * PER_PHASE)
    finally:
        consumer.close()


def test_kafka_python_consumes_across_leader_moves(server: BrokerProcess) -> None:
    setup_topic(server, "kp")
    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        metadata_max_age_ms=60_000,
    )
    consumer.assign([KpTopicPartition("kp", p) for p in range(PARTITIONS)])

    def poll(consumed: Consumed) -> None:
        for tp, records in consumer.poll(timeout_ms=200).items():
            consumed[tp.partition] += [(r.offset, r.value) for r in records]

    try:
        assert run_phases(server, "kp", poll) == expected(3 * PER_PHASE)
    finally:
        consumer.close()
