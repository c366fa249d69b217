"""Replication factor 3 on ``kafkette serve --nodes 3``, seen by librdkafka and our clients.

One broker per storage (memory, disk) stands for nodes 1..3 in racks ``rack-a``..``rack-c``
with Kafka's RackAwareReplicaSelector, and lets the test stop and start nodes over the
network (``--enable-fault-injection``: :meth:`RemoteFaults.stop_broker
<kafkette.testing.RemoteFaults.stop_broker>`). Checked from confluent-kafka's side and
ours: replicas and ISR in DescribeTopics, acks=all against ``min.insync.replicas`` after a
stop (NOT_ENOUGH_REPLICAS), a leader moving to the next in-sync replica, and consumers
with ``client.rack`` fetching from the follower the leader names (KIP-392).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicCollection
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient as RdAdmin
from confluent_kafka.admin import NewTopic as RdNewTopic

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.errors import NotEnoughReplicasError
from kafkette.server.nodes import RACK_AWARE_SELECTOR
from kafkette.testing import RemoteFaults
from tests.brokers import BrokerProcess, kafkette_broker

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
TIMEOUT_S = 30.0
SERVE = (sys.executable, "-m", "kafkette", "serve")
_NODES = re.compile(r"nodes ((?:\d+=[0-9.]+:\d+,?)+)")


@pytest.fixture(scope="module", params=["memory", "disk"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("replication") if request.param == "disk" else None
    yield from kafkette_broker(
        data_dir,
        "--nodes",
        "3",
        "--enable-fault-injection",
        "--set",
        "broker.rack=" + ",".join(RACKS.values()),
        "--set",
        f"replica.selector.class={RACK_AWARE_SELECTOR}",
    )


def bootstrap(server: BrokerProcess) -> str:
    """Every node's address: clients keep a way in while one node is stopped."""
    match = _NODES.search(server.log())
    assert match is not None, server.log()
    return ",".join(item.partition("=")[2] for item in match.group(1).split(","))


def create(server: BrokerProcess, name: str, partitions: int, configs: dict[str, str]) -> None:
    """Created by librdkafka's admin client, replication factor 3."""
    admin = RdAdmin({"bootstrap.servers": bootstrap(server)})
    [future] = admin.create_topics(
        [RdNewTopic(name, num_partitions=partitions, replication_factor=3, config=configs)]
    ).values()
    future.result(TIMEOUT_S)


def ours(server: BrokerProcess, name: str) -> list[tuple[int, list[int], list[int]]]:
    """(leader, replicas, isr) per partition, as our admin client describes them."""
    with AdminClient(bootstrap_servers=bootstrap(server)) as admin:
        description = admin.describe_topics([name]).all()[name]
    return [
        (
            p.leader.id if p.leader is not None else -1,
            [n.id for n in p.replicas],
            [n.id for n in p.isr],
        )
        for p in description.partitions
    ]


def theirs(server: BrokerProcess, name: str) -> list[tuple[int, list[int], list[int]]]:
    """The same, as confluent-kafka's admin client describes them."""
    admin = RdAdmin({"bootstrap.servers": bootstrap(server)})
    [future] = admin.describe_topics(TopicCollection([name])).values()
    description = future.result(TIMEOUT_S)
    return [
        (p.leader.id, [n.id for n in p.replicas], [n.id for n in p.isr])
        for p in sorted(description.partitions, key=lambda p: p.id)
    ]


def rd_produce(server: BrokerProcess, name: str, value: bytes, acks: str) -> RdKafkaError | None:
    """One record by librdkafka with ``acks``, no retries; its delivery error."""
    errors: list[RdKafkaError | None] = []
    producer = RdProducer(
        {
            "bootstrap.servers": bootstrap(server),
            "acks": acks,
            "message.send.max.retries": 0,
            "message.timeout.ms": 10_000,
        }
    )
    producer.produce(name, value, partition=0, on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    [error] = errors
    return error


def test_replicas_and_isr_in_both_admin_clients(server: BrokerProcess) -> None:
    """Kafka's rack-unaware placement (start and shift from crc32("orders") % 3 = 2), every
    replica in sync, the first leading; the same from librdkafka and from us."""
    create(server, "orders", 4, {})
    expected = [
        (replicas[0], replicas, replicas)
        for replicas in ([3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 2, 1])
    ]
    assert theirs(server, "orders") == expected
    assert ours(server, "orders") == expected
    admin = RdAdmin({"bootstrap.servers": bootstrap(server)})
    brokers = admin.describe_cluster().result(TIMEOUT_S).nodes
    assert {n.id: n.rack for n in brokers} == RACKS


def test_min_insync_replicas_and_a_leader_move(server: BrokerProcess) -> None:
    """min.insync.replicas=3 with a follower stopped: NOT_ENOUGH_REPLICAS for acks=all from
    librdkafka and from our producer; its leader stopped: the next in-sync replica leads."""
    create(server, "guarded", 1, {"min.insync.replicas": "3"})
    [(leader, replicas, _)] = ours(server, "guarded")
    assert (leader, replicas) == (1, [1, 2, 3])  # crc32("guarded") % 3 = 0
    with RemoteFaults(bootstrap(server)) as control:
        control.stop_broker(3)  # a follower
        assert theirs(server, "guarded") == [(1, [1, 2, 3], [1, 2])]
        assert ours(server, "guarded") == [(1, [1, 2, 3], [1, 2])]
        error = rd_produce(server, "guarded", b"refused", "all")
        assert error is not None and error.code() == RdKafkaError.NOT_ENOUGH_REPLICAS
        with (
            Producer(
                bootstrap_servers=bootstrap(server), acks="all", retries=0, enable_idempotence=False
            ) as producer,
            pytest.raises(NotEnoughReplicasError),
        ):
            producer.send_and_wait("guarded", b"refused too", partition=0)
        assert rd_produce(server, "guarded", b"one", "1") is None  # acks=1 is written
        control.start_broker(3)
        assert ours(server, "guarded") == [(1, [1, 2, 3], [1, 2, 3])]
        assert rd_produce(server, "guarded", b"all", "all") is None
        control.stop_broker(1)  # the leader: the next in-sync replica leads
        assert theirs(server, "guarded") == [(2, [1, 2, 3], [2, 3])]
        with Producer(bootstrap_servers=bootstrap(server), acks=1) as producer:
            assert producer.send_and_wait("guarded", b"moved", partition=0).offset == 2
        control.start_broker(1)
        assert ours(server, "guarded") == [(2, [1, 2, 3], [2, 3, 1])]
    with Consumer(
        bootstrap_servers=bootstrap(server), auto_offset_reset="earliest", fetch_max_wait_ms=50
    ) as consumer:
        consumer.assign([TopicPartition("guarded", 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 3 and time.monotonic() < deadline:
            values += [
                r.value or b"" for r in consumer.poll(1.0).get(TopicPartition("guarded", 0), [])
            ]
    assert values == [b"one", b"all", b"moved"]


def test_consumers_fetch_from_the_same_rack_follower(server: BrokerProcess) -> None:
    """librdkafka with client.rack fetches from the in-sync follower in its rack (its
    statistics name that broker beside the leader); so does our consumer, also while
    every fetch at the leader is refused."""
    create(server, "racked", 1, {})
    [(leader, replicas, _)] = ours(server, "racked")
    follower = replicas[1]
    with Producer(bootstrap_servers=bootstrap(server)) as producer:
        for i in range(10):
            producer.send("racked", f"r{i}".encode(), partition=0)
    stats: list[dict[str, Any]] = []
    consumer = RdConsumer(
        {
            "bootstrap.servers": bootstrap(server),
            "group.id": "rd-racked",
            "client.rack": RACKS[follower],
            "statistics.interval.ms": 100,
            "stats_cb": lambda text: stats.append(json.loads(text)),
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([RdTopicPartition("racked", 0, 0)])
        values: list[bytes] = []
        fetched_from: tuple[int, int] | None = None
        deadline = time.monotonic() + TIMEOUT_S
        while (len(values) < 10 or fetched_from is None) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            for report in stats:
                part = report["topics"].get("racked", {}).get("partitions", {}).get("0")
                if part is not None and part["broker"] == follower:
                    fetched_from = (part["leader"], part["broker"])
        assert values == [f"r{i}".encode() for i in range(10)]
        assert fetched_from == (leader, follower)
    finally:
        consumer.close()
    tp = TopicPartition("racked", 0)
    with (
        RemoteFaults(bootstrap(server)) as control,
        Consumer(
            bootstrap_servers=bootstrap(server),
            client_rack=RACKS[follower],
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        ) as ours_consumer,
    ):
        ours_consumer.assign([tp])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 10 and time.monotonic() < deadline:
            got += [r.value or b"" for r in ours_consumer.poll(1.0).get(tp, [])]
        assert got == [f"r{i}".encode() for i in range(10)]
        control.disconnect("Fetch", "always", node=leader)
        try:
            with Producer(bootstrap_servers=bootstrap(server)) as producer:
                for i in range(10, 15):
                    producer.send("racked", f"r{i}".encode(), partition=0)
            while len(got) < 15 and time.monotonic() < deadline:
                got += [r.value or b"" for r in ours_consumer.poll(1.0).get(tp, [])]
        finally:
            control.clear()
        assert got == [f"r{i}".encode() for i in range(15)]


def test_racks_must_match_the_nodes() -> None:
    """broker.rack names one rack or one per node; anything else stops serve at once."""
    result = subprocess.run(
        [*SERVE, "--listen", "127.0.0.1:0", "--nodes", "3", "--set", "broker.rack=a,b"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith(
        "expected one rack for all 3 nodes or one per node (comma-separated), got 'a,b'"
    )
