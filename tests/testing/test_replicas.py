"""Replication factor above 1 on simulated nodes (``MemoryCluster(brokers=N)``), seen by clients.

One log per partition in the core; the replicas, the ISR, leader moves on a stop,
``min.insync.replicas`` and fetch-from-follower (KIP-392) are what Kafka's clients
observe of a real three-broker cluster. ``kafkette serve --nodes 3`` is checked with
librdkafka in ``tests/conformance/test_replication.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from kafkette import AdminClient, AsyncConsumer, NewTopic, Producer, TopicPartition
from kafkette.admin import NewPartitions
from kafkette.client.connection import BrokerConnection
from kafkette.client.inprocess import get_cluster
from kafkette.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NotEnoughReplicasError,
)
from kafkette.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from kafkette.protocol.messages.describe_topic_partitions_request import Cursor as RequestCursor
from kafkette.protocol.messages.describe_topic_partitions_request import TopicRequest
from kafkette.protocol.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponsePartition,
)
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.server.nodes import RACK_AWARE_SELECTOR
from kafkette.testing import MemoryCluster

pytestmark = pytest.mark.anyio

# Kafka's rack-unaware assignment of "orders" (4 partitions, factor 3) on nodes 1-3,
# with the start index and shift (random in Kafka) both crc32("orders") % 3 = 2:
# partition p leads on node ids[(2 + p) % 3]; the shift grows by one at p = 3.
ORDERS_REPLICAS = [[3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 2, 1]]
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def rack_cluster() -> MemoryCluster:
    return MemoryCluster(
        brokers=3,
        broker_rack="rack-a,rack-b,rack-c",
        replica_selector_class=RACK_AWARE_SELECTOR,
    )


@asynccontextmanager
async def connect(cluster: MemoryCluster, node: int) -> AsyncIterator[BrokerConnection]:
    stream = get_cluster(cluster.bootstrap_servers).open_stream(node)
    connection = await BrokerConnection.over_stream(stream, address=f"node {node}")
    try:
        yield connection
    finally:
        await connection.aclose()


def described(admin: AdminClient, topic: str) -> list[tuple[int, int, list[int], list[int]]]:
    """(partition, leader, replicas, isr) as our admin client describes them."""
    description = admin.describe_topics([topic]).all()[topic]
    return [
        (
            p.partition,
            p.leader.id if p.leader is not None else -1,
            [n.id for n in p.replicas],
            [n.id for n in p.isr],
        )
        for p in description.partitions
    ]


def test_replication_factor_three_is_placed_and_described() -> None:
    """Replicas spread as Kafka's rack-unaware assignment; the leader is the first replica;
    every replica in sync; the nodes' racks listed."""
    with (
        rack_cluster() as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        admin.create_topics([NewTopic("orders", 4, 3)]).all()
        assert described(admin, "orders") == [
            (p, replicas[0], replicas, replicas) for p, replicas in enumerate(ORDERS_REPLICAS)
        ]
        assert [cluster.replicas("orders", p) for p in range(4)] == ORDERS_REPLICAS
        racks = {n.id: n.rack for n in admin.describe_cluster().nodes}
        assert racks == RACKS
        # CreatePartitions places the new ones by the same formula from partition 4 on,
        # the shift starting again at 2 (as Kafka's) and growing at partition 6.
        admin.create_partitions({"orders": NewPartitions(7)}).all()
        assert [cluster.replicas("orders", p) for p in range(4, 7)] == [
            [1, 2, 3],
            [2, 3, 1],
            [3, 2, 1],
        ]


def test_replication_factor_and_assignments_are_checked_as_kafka() -> None:
    with (
        MemoryCluster(brokers=3) as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        with pytest.raises(InvalidReplicationFactorError) as too_many:
            admin.create_topics([NewTopic("four", 1, 4)]).all()
        assert too_many.value.detail == (
            "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
            "cannot be reached because only 3 broker(s) are registered."
        )
        refused = {
            "unknown": ({0: [1, 4]}, "includes broker 4, but no such broker is registered."),
            "twice": ({0: [2, 2]}, "includes the broker 2 more than once."),
            "uneven": (
                {0: [1, 2], 1: [3]},
                "includes a partition with 1 replica(s), but this is not consistent with "
                "previous partitions, which have 2 replica(s).",
            ),
        }
        for name, (assignment, message) in refused.items():
            with pytest.raises(InvalidReplicaAssignmentError) as bad:
                admin.create_topics([NewTopic(name, replica_assignments=assignment)]).all()
            assert bad.value.detail == "The manual partition assignment " + message
        admin.create_topics([NewTopic("manual", replica_assignments={0: [2, 3], 1: [3, 1]})]).all()
        assert described(admin, "manual") == [(0, 2, [2, 3], [2, 3]), (1, 3, [3, 1], [3, 1])]
        with pytest.raises(InvalidReplicaAssignmentError) as bad:
            admin.create_partitions({"manual": NewPartitions(2 + 1, [[1, 2, 3]])}).all()
        assert bad.value.detail == (
            "The manual partition assignment includes a partition with 3 replica(s), but this "
            "is not consistent with previous partitions, which have 2 replica(s)."
        )


def test_default_replication_factor_applies_to_minus_one() -> None:
    with (
        MemoryCluster(brokers=3, default_replication_factor=3) as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        admin.create_topics([NewTopic("orders", 4)]).all()  # replication factor -1
        assert [cluster.replicas("orders", p) for p in range(4)] == ORDERS_REPLICAS


async def test_stop_shrinks_the_isr_and_moves_the_leader() -> None:
    """Stopping a leader: it leaves the ISR (offline in Metadata), the next in-sync replica
    leads at the next epoch; started again it rejoins the ISR and leads nothing."""
    async with MemoryCluster(brokers=3) as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 4, 3)]).all()
        cluster.stop_broker(3)
        assert [
            (cluster.leader("orders", p), cluster.leader_epoch("orders", p)) for p in range(4)
        ] == [
            (1, 1),
            (1, 0),
            (2, 0),
            (2, 1),
        ]
        assert [cluster.isr("orders", p) for p in range(4)] == [[1, 2], [1, 2], [2, 1], [2, 1]]
        async with connect(cluster, 1) as connection:
            answer = await connection.request(
                MetadataRequest(topics=[MetadataRequestTopic(name="orders")])
            )
        assert isinstance(answer, MetadataResponse)
        assert [
            (p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas)
            for p in answer.topics[0].partitions
        ] == [
            (1, [3, 1, 2], [1, 2], [3]),
            (1, [1, 2, 3], [1, 2], [3]),
            (2, [2, 3, 1], [2, 1], [3]),
            (2, [3, 2, 1], [2, 1], [3]),
        ]
        with pytest.raises(ValueError, match="node 3 is stopped"):
            cluster.move_leader("orders", 0, 3)
        cluster.start_broker(3)
        assert [cluster.isr("orders", p) for p in range(4)] == [
            [1, 2, 3],
            [1, 2, 3],
            [2, 1, 3],
            [2, 1, 3],
        ]
        assert cluster.leader("orders", 0) == 1
        cluster.move_leader("orders", 0, 3)  # the preferred leader again
        assert (cluster.leader("orders", 0), cluster.leader_epoch("orders", 0)) == (3, 2)
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("pair", replica_assignments={0: [1, 2]})]).all()
        with pytest.raises(ValueError, match=r"node 3 is not an in-sync replica of pair-0"):
            cluster.move_leader("pair", 0, 3)
        # With every in-sync replica stopped, no leader until the last of them starts.
        cluster.stop_broker(1)
        cluster.stop_broker(2)
        cluster.stop_broker(3)
        assert (cluster.leader("orders", 1), cluster.isr("orders", 1)) == (-1, [3])
        cluster.start_broker(1)
        assert cluster.leader("orders", 1) == -1
        cluster.start_broker(3)
        assert (cluster.leader("orders", 1), cluster.isr("orders", 1)) == (3, [3, 1])


def test_acks_all_needs_min_insync_replicas() -> None:
    """acks=all with min.insync.replicas=3 and a stopped follower: NOT_ENOUGH_REPLICAS, no
    record written; acks=1 is written; started again, acks=all too."""
    with MemoryCluster(brokers=3) as cluster:
        bootstrap = cluster.bootstrap_servers
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics(
                [NewTopic("orders", 1, 3, configs={"min.insync.replicas": "3"})]
            ).all()
        cluster.stop_broker(2)  # a follower of partition 0 ([3, 1, 2])
        with Producer(
            bootstrap_servers=bootstrap, acks="all", retries=0, enable_idempotence=False
        ) as producer:
            with pytest.raises(NotEnoughReplicasError) as short:
                producer.send_and_wait("orders", b"lost", partition=0)
            assert short.value.detail == (
                "orders-0: The size of the current ISR Set(3, 1) is insufficient to satisfy the "
                "min.isr requirement of 3 for partition orders-0"
            )
        with Producer(bootstrap_servers=bootstrap, acks=1) as producer:
            assert producer.send_and_wait("orders", b"one", partition=0).offset == 0
        cluster.start_broker(2)
        with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
            assert producer.send_and_wait("orders", b"all", partition=0).offset == 1
        assert [r.value for r in cluster.records("orders")] == [b"one", b"all"]


async def test_leader_names_the_same_rack_follower() -> None:
    """A consumer's Fetch (v11+) at the leader with a client rack gets the in-sync replica
    of that rack as preferred_read_replica and no records; that follower serves it."""
    async with rack_cluster() as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 1, 3)]).all()
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send_and_wait("orders", b"r0", partition=0)

        def fetch(rack: str) -> FetchRequest:
            return FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[FetchTopic(topic="orders", partitions=[FetchPartition(0, fetch_offset=0)])],
                rack_id=rack,
            )

        async def answer(node: int, rack: str, version: int = 12) -> tuple[int, int, bool]:
            async with connect(cluster, node) as connection:
                response = await connection.request(fetch(rack), version=version)
            assert isinstance(response, FetchResponse)
            [p] = response.responses[0].partitions
            return p.error_code, p.preferred_read_replica, bool(p.records)

        assert cluster.leader("orders", 0) == 3
        assert await answer(3, "rack-b") == (0, 2, False)
        assert await answer(3, "rack-c") == (0, -1, True)  # the leader's own rack
        assert await answer(3, "rack-z") == (0, -1, True)  # no replica there
        assert await answer(3, "") == (0, -1, True)
        assert await answer(2, "rack-b") == (0, -1, True)  # the follower serves
        assert await answer(2, "rack-b", version=10) == (6, -1, False)  # not before v11
        cluster.stop_broker(2)
        assert await answer(3, "rack-b") == (0, -1, True)  # out of the ISR: not named


async def test_our_consumer_fetches_from_the_follower() -> None:
    """Our consumer follows preferred_read_replica: once told, it keeps reading from the
    follower, also while every fetch at the leader would fail."""
    async with rack_cluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 1, 3)]).all()
        with Producer(bootstrap_servers=bootstrap) as producer:
            for i in range(5):
                producer.send("orders", f"a{i}".encode(), partition=0)
        tp = TopicPartition("orders", 0)
        async with AsyncConsumer(
            bootstrap_servers=bootstrap, client_rack="rack-b", fetch_max_wait_ms=50
        ) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            first = await consumer.poll(timeout=10, max_records=5)
            assert [r.value for r in first[tp]] == [f"a{i}".encode() for i in range(5)]
            cluster.faults.disconnect("Fetch", "always", node=cluster.leader("orders", 0))
            with Producer(bootstrap_servers=bootstrap) as producer:
                for i in range(5):
                    producer.send("orders", f"b{i}".encode(), partition=0)
            later: list[bytes] = []
            while len(later) < 5:
                batch = await consumer.poll(timeout=10)
                assert batch, "no records from the follower"
                later += [r.value or b"" for r in batch[tp]]
            assert later == [f"b{i}".encode() for i in range(5)]
            assert await consumer.position(tp) == 10


async def test_not_leader_answers_of_versions_without_current_leader() -> None:
    """Produce v9 and Fetch v11 at a follower are answered NOT_LEADER_OR_FOLLOWER without
    the KIP-951 leader hint they cannot carry (the broker used to fail encoding them and
    close the connection)."""
    async with MemoryCluster(brokers=3) as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 1, 3)]).all()
        builder = RecordBatchBuilder()
        builder.append(0, None, b"v", [])
        produce = ProduceRequest(
            acks=1,
            timeout_ms=5000,
            topic_data=[TopicProduceData("orders", [PartitionProduceData(0, builder.build())])],
        )
        fetch = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[FetchTopic(topic="orders", partitions=[FetchPartition(0, fetch_offset=0)])],
        )
        async with connect(cluster, 1) as connection:  # a follower of orders-0 ([3, 1, 2])
            produced = await connection.request(produce, version=9)
            fetched = await connection.request(fetch, version=11)
        assert isinstance(produced, ProduceResponse) and isinstance(fetched, FetchResponse)
        assert produced.responses[0].partition_responses[0].error_code == 6
        assert fetched.responses[0].partitions[0].error_code == 0  # v11: the follower serves
        cluster.stop_broker(1)  # out of the ISR: a follower fetch there is refused
        async with connect(cluster, 3) as connection:  # (as is one at a stopped node)
            fetched = await connection.request(fetch, version=10)
        assert isinstance(fetched, FetchResponse)
        assert fetched.responses[0].partitions[0].error_code == 0  # the leader serves


async def test_a_reassignment_completes_at_once() -> None:
    """AlterPartitionReassignments gives a partition the replicas named: the leader stays if
    among them, else the first running one leads at the next epoch; bad lists are refused."""
    async with MemoryCluster(brokers=3) as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 1, 2)]).all()
        assert (cluster.replicas("orders", 0), cluster.leader("orders", 0)) == ([3, 1], 3)

        async def reassign(replicas: list[int]) -> tuple[int, str | None]:
            request = AlterPartitionReassignmentsRequest(
                topics=[ReassignableTopic("orders", [ReassignablePartition(0, replicas)])]
            )
            async with connect(cluster, 1) as connection:
                answer = await connection.request(request)
            assert isinstance(answer, AlterPartitionReassignmentsResponse)
            [result] = answer.responses[0].partitions
            return result.error_code, result.error_message

        assert await reassign([1, 3]) == (0, None)  # the same nodes: the leader stays
        assert (cluster.replicas("orders", 0), cluster.leader("orders", 0)) == ([1, 3], 3)
        assert await reassign([2, 1]) == (0, None)
        assert (cluster.replicas("orders", 0), cluster.isr("orders", 0)) == ([2, 1], [2, 1])
        assert (cluster.leader("orders", 0), cluster.leader_epoch("orders", 0)) == (2, 1)
        assert await reassign([2, 2]) == (
            39,
            "The manual partition assignment includes the broker 2 more than once.",
        )
        assert await reassign([4]) == (
            39,
            "The manual partition assignment includes broker 4, but no such broker is registered.",
        )


async def test_describe_topic_partitions_pages_replicas_and_isr() -> None:
    """DescribeTopicPartitions (KIP-966): topics in name order with replicas, ISR and
    offline replicas, cut at the partition limit with a cursor to go on from."""
    async with MemoryCluster(brokers=3) as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 4, 3), NewTopic("audit", 1, 2)]).all()
        cluster.stop_broker(2)

        async def describe(
            names: list[str], limit: int, cursor: tuple[str, int] | None = None
        ) -> DescribeTopicPartitionsResponse:
            request = DescribeTopicPartitionsRequest(
                topics=[TopicRequest(n) for n in names],
                response_partition_limit=limit,
                cursor=None if cursor is None else RequestCursor(*cursor),
            )
            async with connect(cluster, 1) as connection:
                answer = await connection.request(request)
            assert isinstance(answer, DescribeTopicPartitionsResponse)
            return answer

        def replicas(p: DescribeTopicPartitionsResponsePartition) -> list[list[int]]:
            return [p.replica_nodes, p.isr_nodes, p.offline_replicas]

        def rows(answer: DescribeTopicPartitionsResponse) -> list[tuple[object, ...]]:
            return [
                (t.name, t.error_code, p.partition_index, p.leader_id, *replicas(p))
                for t in answer.topics
                for p in t.partitions
            ]

        first = await describe(["orders", "audit", "missing"], 3)
        assert rows(first) == [
            ("audit", 0, 0, 1, [1, 2], [1], [2]),
            ("orders", 0, 0, 3, [3, 1, 2], [3, 1], [2]),
            ("orders", 0, 1, 1, [1, 2, 3], [1, 3], [2]),
        ]
        assert first.next_cursor is not None
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("orders", 2)
        assert [(t.name, t.error_code) for t in first.topics] == [
            ("audit", 0),
            ("missing", 3),  # UNKNOWN_TOPIC_OR_PARTITION, not created
            ("orders", 0),
        ]
        rest = await describe(["orders", "unknown"], 10, ("orders", 2))
        assert [(t.name, t.error_code, len(t.partitions)) for t in rest.topics] == [
            ("orders", 0, 2),
            ("unknown", 3, 0),
        ]
        assert rest.next_cursor is None
        assert [p.leader_id for p in rest.topics[0].partitions] == [3, 3]
        refused = await describe(["orders"], 10, ("audit", 0))
        assert [(t.name, t.error_code) for t in refused.topics] == [("orders", 42)]


def test_auto_created_topics_take_default_replication_factor() -> None:
    """A topic auto-created by Metadata (a producer's first send) is placed with
    default.replication.factor, as Kafka's auto-creation does."""
    with MemoryCluster(brokers=3, default_replication_factor=3, num_partitions=4) as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send_and_wait("orders", b"first", partition=0)
        assert [cluster.replicas("orders", p) for p in range(4)] == ORDERS_REPLICAS
        assert cluster.isr("orders", 3) == [3, 2, 1]
