"""MemoryCluster(brokers=N): nodes, leaders, coordinators, moves and stops, seen by clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from kafkette import (
    AdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from kafkette.client.connection import BrokerConnection
from kafkette.client.inprocess import get_cluster
from kafkette.errors import (
    FencedLeaderEpochError,
    KafkaConnectionError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from kafkette.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.testing import MemoryCluster

KEYS = [f"key-{i}".encode() for i in range(12)]


def create(cluster: MemoryCluster, topic: str, partitions: int = 1) -> None:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, partitions)]).all()


@asynccontextmanager
async def connect(cluster: MemoryCluster, node: int) -> AsyncIterator[BrokerConnection]:
    """A raw connection to one node of ``cluster``."""
    stream = get_cluster(cluster.bootstrap_servers).open_stream(node)
    connection = await BrokerConnection.over_stream(stream, address=f"node {node}")
    try:
        yield connection
    finally:
        await connection.aclose()


def batch(value: bytes) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(0, None, value, [])
    return builder.build()


def produce_request(topic: str, partition: int, value: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, batch(value))])],
    )


def test_brokers_must_be_a_positive_count() -> None:
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="brokers is a number of nodes"):
            MemoryCluster(brokers=bad)  # type: ignore[arg-type]


def test_moves_need_several_nodes() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        assert cluster.nodes == [1]
        assert cluster.leader("t", 0) == 1
        with pytest.raises(ValueError, match=r"MemoryCluster\(brokers=N\)"):
            cluster.move_leader("t", 0, 1)


# -- metadata and routing, by hand -----------------------------------------------------


@pytest.mark.anyio
async def test_metadata_lists_every_node_and_each_partitions_leader() -> None:
    async with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t", 6)
        leaders = [cluster.leader("t", p) for p in range(6)]
        assert leaders == [((leaders[0] - 1 + p) % 3) + 1 for p in range(6)]  # round-robin
        host = "memory-" + cluster.name
        for node in (1, 2, 3):  # every node answers the same
            async with connect(cluster, node) as connection:
                response = await connection.request(MetadataRequest(topics=None))
                assert isinstance(response, MetadataResponse)
                assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
                    (1, host, 1),
                    (2, host, 2),
                    (3, host, 3),
                ]
                assert response.controller_id == 1
                [topic] = [t for t in response.topics if t.name == "t"]
                assert [
                    (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes)
                    for p in topic.partitions
                ] == [(p, leaders[p], 0, [leaders[p]]) for p in range(6)]


@pytest.mark.anyio
async def test_produce_and_fetch_at_a_follower_get_the_new_leader() -> None:
    """NOT_LEADER_OR_FOLLOWER with KIP-951's CurrentLeader and NodeEndpoints; the leader serves."""
    async with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t")
        cluster.move_leader("t", 0, 2)
        assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (2, 1)
        async with connect(cluster, 1) as follower, connect(cluster, 2) as leader:
            answer = await follower.request(produce_request("t", 0, b"x"))
            assert isinstance(answer, ProduceResponse)
            [p] = answer.responses[0].partition_responses
            assert p.error_code == NotLeaderOrFollowerError.code
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 1)
            assert [(e.node_id, e.port) for e in answer.node_endpoints] == [(2, 2)]
            ok = await leader.request(produce_request("t", 0, b"x"))
            assert isinstance(ok, ProduceResponse)
            assert ok.responses[0].partition_responses[0].error_code == 0
            topic_id = cluster._broker.cluster.get_topic("t").topic_id
            fetch = FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    FetchTopic(
                        topic="t",
                        topic_id=topic_id,
                        partitions=[
                            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                        ],
                    )
                ],
            )
            for version, with_endpoints in ((12, False), (16, True)):
                got = await follower.request(fetch, version=version)
                assert isinstance(got, FetchResponse)
                [part] = got.responses[0].partitions
                assert part.error_code == NotLeaderOrFollowerError.code
                assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 1)
                assert [e.node_id for e in got.node_endpoints] == ([2] if with_endpoints else [])
            served = await leader.request(fetch, version=16)
            assert isinstance(served, FetchResponse)
            assert served.responses[0].partitions[0].error_code == 0
            assert served.responses[0].partitions[0].high_watermark == 1
        assert [r.value for r in cluster.records("t")] == [b"x"]


@pytest.mark.anyio
async def test_leader_epochs_fence_stale_and_future_requests() -> None:
    async with MemoryCluster(brokers=2) as cluster:
        create(cluster, "t")
        old = cluster.leader("t", 0)
        new = 3 - old
        cluster.move_leader("t", 0, new)
        async with connect(cluster, new) as leader, connect(cluster, old) as follower:
            for epoch, error in ((0, FencedLeaderEpochError), (5, UnknownLeaderEpochError)):
                request = ListOffsetsRequest(
                    replica_id=-1,
                    topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, epoch, -1)])],
                )
                answer = await leader.request(request)
                assert isinstance(answer, ListOffsetsResponse)
                assert answer.topics[0].partitions[0].error_code == error.code
            request = ListOffsetsRequest(
                replica_id=-1, topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, 1, -1)])]
            )
            at_leader = await leader.request(request)
            at_follower = await follower.request(request)
            assert isinstance(at_leader, ListOffsetsResponse)
            assert isinstance(at_follower, ListOffsetsResponse)
            assert at_leader.topics[0].partitions[0].error_code == 0
            assert at_leader.topics[0].partitions[0].leader_epoch == 1
            assert at_follower.topics[0].partitions[0].error_code == NotLeaderOrFollowerError.code


@pytest.mark.anyio
async def test_coordinators_answer_not_coordinator_elsewhere() -> None:
    async with MemoryCluster(brokers=3) as cluster:
        cluster.move_coordinator("g", 3)
        assert cluster.coordinator("g") == 3
        assert cluster.coordinator("g", "transaction") == 3
        async with connect(cluster, 1) as one, connect(cluster, 3) as three:
            found = await one.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]))
            assert isinstance(found, FindCoordinatorResponse)
            [c] = found.coordinators
            assert (c.key, c.node_id, c.port, c.error_code) == ("g", 3, 3, 0)
            heartbeat = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
            elsewhere = await one.request(heartbeat)
            here = await three.request(heartbeat)
            assert isinstance(elsewhere, HeartbeatResponse) and isinstance(here, HeartbeatResponse)
            assert elsewhere.error_code == NotCoordinatorError.code
            assert here.error_code != NotCoordinatorError.code  # served: an unknown member
        cluster.move_coordinator("g", 1, key_type="group")
        assert (cluster.coordinator("g"), cluster.coordinator("g", "transaction")) == (1, 3)


@pytest.mark.anyio
async def test_alter_partition_reassignments_moves_the_leader() -> None:
    """The admin API that moves a leader on ``kafkette serve --nodes``, here in process."""
    async with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t", 2)
        leader = cluster.leader("t", 0)
        target, stopped = (n for n in cluster.nodes if n != leader)
        cluster.stop_broker(stopped)
        request = AlterPartitionReassignmentsRequest(
            topics=[
                ReassignableTopic(
                    "t",
                    [
                        ReassignablePartition(0, [target]),
                        ReassignablePartition(1, [1, 2, 3, 1]),
                        ReassignablePartition(1, [stopped]),
                        ReassignablePartition(1, [7]),
                        ReassignablePartition(1, None),
                    ],
                ),
                ReassignableTopic("nope", [ReassignablePartition(0, [1])]),
            ]
        )
        async with connect(cluster, target) as connection:
            answer = await connection.request(request)
        assert isinstance(answer, AlterPartitionReassignmentsResponse)
        codes = [
            [(p.partition_index, p.error_code) for p in t.partitions] for t in answer.responses
        ]
        assert codes == [[(0, 0), (1, 39), (1, 39), (1, 39), (1, 85)], [(0, 3)]]
        assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (target, 1)


# -- our clients follow -----------------------------------------------------------------


def produce_keyed(producer: Producer, topic: str, start: int, count: int) -> None:
    for i in range(start, start + count):
        producer.send(topic, f"v{i}".encode(), key=KEYS[i % len(KEYS)])


def expected(count: int) -> dict[bytes, list[bytes]]:
    by_key: dict[bytes, list[bytes]] = {}
    for i in range(count):
        by_key.setdefault(KEYS[i % len(KEYS)], []).append(f"v{i}".encode())
    return by_key


def stored_by_key(cluster: MemoryCluster, topic: str) -> dict[bytes, list[bytes]]:
    by_key: dict[bytes, list[bytes]] = {}
    for r in cluster.records(topic):
        assert r.key is not None and r.value is not None
        by_key.setdefault(r.key, []).append(r.value)
    return by_key


def test_keyed_records_follow_leader_moves_sync() -> None:
    """Producer and consumer follow every partition through two moves: each key's
    records are stored and read once, in order."""
    with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t", 3)
        with (
            Producer(
                bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, linger_ms=0
            ) as producer,
            Consumer(
                bootstrap_servers=cluster.bootstrap_servers,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=50,
            ) as consumer,
        ):
            consumer.assign([TopicPartition("t", p) for p in range(3)])
            seen: list[tuple[int, int, bytes | None, bytes | None]] = []

            def drain(total: int) -> None:
                for _ in range(200):
                    if len(seen) >= total:
                        return
                    for records in consumer.poll(timeout_ms=100).values():
                        seen.extend((r.partition, r.offset, r.key, r.value) for r in records)

            produce_keyed(producer, "t", 0, 30)
            producer.flush(10)
            drain(30)
            for p in range(3):  # every leader moves to the next node
                cluster.move_leader("t", p, cluster.leader("t", p) % 3 + 1)
            produce_keyed(producer, "t", 30, 30)
            producer.flush(10)
            drain(60)
            cluster.move_leader("t", 0, cluster.leader("t", 0) % 3 + 1)
            produce_keyed(producer, "t", 60, 30)
            producer.flush(10)
            drain(90)
        assert stored_by_key(cluster, "t") == expected(90)
        assert len(seen) == 90 and len(set(seen)) == 90
        by_key: dict[bytes, list[bytes]] = {}
        for _, _, key, value in sorted(seen):
            assert key is not None and value is not None
            by_key.setdefault(key, []).append(value)
        assert by_key == expected(90)
        assert [cluster.leader_epoch("t", p) for p in range(3)] == [2, 1, 1]


@pytest.mark.anyio
async def test_keyed_records_follow_leader_moves_async() -> None:
    async with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t", 3)
        async with (
            AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True
            ) as producer,
            AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=50,
            ) as consumer,
        ):
            consumer.assign([TopicPartition("t", p) for p in range(3)])
            seen: list[tuple[int, int, bytes | None, bytes | None]] = []
            for phase in range(3):
                for i in range(phase * 20, phase * 20 + 20):
                    await producer.send("t", f"v{i}".encode(), key=KEYS[i % len(KEYS)])
                await producer.flush(10)
                with anyio.fail_after(20):
                    while len(seen) < phase * 20 + 20:
                        for records in (await consumer.poll(timeout_ms=100)).values():
                            seen.extend((r.partition, r.offset, r.key, r.value) for r in records)
                for p in range(3):
                    cluster.move_leader("t", p, cluster.leader("t", p) % 3 + 1)
        assert stored_by_key(cluster, "t") == expected(60)
        assert len(set(seen)) == len(seen) == 60
        by_key: dict[bytes, list[bytes]] = {}
        for _, _, key, value in sorted(seen):
            assert key is not None and value is not None
            by_key.setdefault(key, []).append(value)
        assert by_key == expected(60)


def test_consumer_group_survives_a_coordinator_move() -> None:
    with MemoryCluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "t", 2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for i in range(4):
                producer.send("t", f"a{i}".encode(), partition=i % 2)
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=50,
            fetch_max_wait_ms=50,
        ) as consumer:
            consumer.subscribe(["t"])
            got: list[bytes | None] = []
            for _ in range(100):
                if len(got) >= 4:
                    break
                got += [r.value for rs in consumer.poll(timeout_ms=100).values() for r in rs]
            consumer.commit()
            member = consumer.group_metadata().member_id
            first = cluster.coordinator("g")
            cluster.move_coordinator("g", first % 3 + 1)
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for i in range(4):
                    producer.send("t", f"b{i}".encode(), partition=i % 2)
            for _ in range(100):
                if len(got) >= 8:
                    break
                got += [r.value for rs in consumer.poll(timeout_ms=100).values() for r in rs]
            consumer.commit()
            assert consumer.group_metadata().member_id == member  # no new member: same session
        assert sorted(v or b"" for v in got) == sorted(
            [f"a{i}".encode() for i in range(4)] + [f"b{i}".encode() for i in range(4)]
        )
        assert cluster.committed("g") == {TopicPartition("t", 0): 4, TopicPartition("t", 1): 4}


def test_transaction_survives_a_transaction_coordinator_move() -> None:
    with MemoryCluster(brokers=3) as cluster:
        create(cluster, "t", 2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="tx") as p:
            p.init_transactions()
            p.begin_transaction()
            p.send("t", b"one", partition=0)
            p.flush()
            cluster.move_coordinator("tx", cluster.coordinator("tx", "transaction") % 3 + 1)
            p.send("t", b"two", partition=1)  # AddPartitionsToTxn at the new coordinator
            p.commit_transaction()
            cluster.move_coordinator("tx", cluster.coordinator("tx", "transaction") % 3 + 1)
            p.begin_transaction()
            p.send("t", b"aborted", partition=0)
            p.flush()  # the partition joins the transaction at the coordinator it moved to
            p.abort_transaction()
        assert cluster.transactions() == {"tx": "CompleteAbort"}
        committed = cluster.records("t", isolation="read_committed")
        assert [(r.partition, r.value) for r in committed] == [(0, b"one"), (1, b"two")]
        assert [r.value for r in cluster.records("t", 0)] == [b"one", b"aborted"]


@pytest.mark.anyio
async def test_stop_broker_then_start_broker() -> None:
    """A stopped node drops its connections and is no longer listed; its partitions and
    coordinators move; clients carry on; started again it is listed and reachable."""
    async with MemoryCluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "t", 3)
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True
        ) as producer:
            for i in range(30):
                await producer.send("t", f"v{i}".encode(), key=KEYS[i % len(KEYS)])
            await producer.flush(10)
            victim = cluster.leader("t", 0)
            cluster.move_coordinator("g", victim)
            async with connect(cluster, victim) as doomed:
                cluster.stop_broker(victim)
                with pytest.raises(KafkaConnectionError):
                    await doomed.request(MetadataRequest(topics=[]))
            with pytest.raises(KafkaConnectionError, match="stopped"):
                get_cluster(cluster.bootstrap_servers).open_stream(victim)
            assert victim not in {cluster.leader("t", p) for p in range(3)}
            assert cluster.coordinator("g") != victim
            for i in range(30, 60):
                await producer.send("t", f"v{i}".encode(), key=KEYS[i % len(KEYS)])
            await producer.flush(10)
            survivor = next(n for n in cluster.nodes if n != victim)
            async with connect(cluster, survivor) as connection:
                listed = await connection.request(MetadataRequest(topics=[]))
                assert isinstance(listed, MetadataResponse)
                assert sorted(b.node_id for b in listed.brokers) == sorted(
                    n for n in (1, 2, 3) if n != victim
                )
            cluster.start_broker(victim)
            cluster.move_leader("t", 0, victim)
            for i in range(60, 90):
                await producer.send("t", f"v{i}".encode(), key=KEYS[i % len(KEYS)])
            await producer.flush(10)
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        ) as consumer:
            consumer.subscribe(["t"])
            values: list[bytes] = []
            with anyio.fail_after(20):
                while len(values) < 90:
                    for records in (await consumer.poll(timeout_ms=100)).values():
                        values += [r.value for r in records if r.value is not None]
            await consumer.commit()
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(90))
        assert stored_by_key(cluster, "t") == expected(90)
        assert sum(cluster.committed("g").values()) == 90


def test_moves_while_batches_are_in_flight_keep_each_key_in_order() -> None:
    """Leaders move between sends, with batches unacknowledged: the idempotent producer
    retries them at the new leader with their sequence numbers, once each, in order.

    No partition goes back to a node that led it before: a request pipelined to a
    stale leader could otherwise arrive after that node leads again and be stored
    ahead of the earlier batches it rejected (a race of Kafka itself, which the
    producer then answers with retries until delivery.timeout.ms)."""
    with MemoryCluster(brokers=5) as cluster:
        create(cluster, "t", 3)
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            enable_idempotence=True,
            linger_ms=2,
            max_in_flight_requests_per_connection=5,
            retry_backoff_ms=1,
        ) as producer:
            futures = []
            for i in range(300):
                futures.append(producer.send("t", f"v{i}".encode(), key=KEYS[i % len(KEYS)]))
                if i % 25 == 24:
                    partition = (i // 25) % 3
                    cluster.move_leader("t", partition, cluster.leader("t", partition) % 5 + 1)
            producer.flush(30)
            offsets = [f.result(10) for f in futures]
        assert stored_by_key(cluster, "t") == expected(300)
        assert len({(m.partition, m.offset) for m in offsets}) == 300
        assert [cluster.leader_epoch("t", p) for p in range(3)] == [4, 4, 4]


@pytest.mark.anyio
async def test_async_group_and_transaction_survive_coordinator_moves() -> None:
    """Consume-transform-produce with an async transactional producer and an async
    group consumer while the group's and the transactional id's coordinators move."""
    async with MemoryCluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "in", 2)
        create(cluster, "out", 2)
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as plain:
            for i in range(10):
                await plain.send("in", f"m{i}".encode(), partition=i % 2)
            await plain.flush(10)
        async with (
            AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                isolation_level="read_committed",
                heartbeat_interval_ms=50,
                fetch_max_wait_ms=50,
            ) as consumer,
            AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, transactional_id="tx"
            ) as producer,
        ):
            consumer.subscribe(["in"])
            await producer.init_transactions()
            done = 0
            with anyio.fail_after(30):
                while done < 10:
                    batch = await consumer.poll(timeout_ms=100)
                    records = [r for rs in batch.values() for r in rs]
                    if not records:
                        continue
                    producer.begin_transaction()
                    for r in records:
                        assert r.value is not None
                        await producer.send("out", r.value.upper(), partition=r.partition)
                    positions = {
                        TopicPartition("in", p): max(r.offset for r in rs) + 1
                        for p, rs in ((tp.partition, rs) for tp, rs in batch.items())
                        if rs
                    }
                    for node_key in ("g", "tx"):  # both move in the middle of the transaction
                        kind = "group" if node_key == "g" else "transaction"
                        cluster.move_coordinator(
                            node_key, cluster.coordinator(node_key, kind) % 3 + 1, key_type=kind
                        )
                    await producer.send_offsets_to_transaction(positions, consumer.group_metadata())
                    await producer.commit_transaction()
                    done += len(records)
        out = cluster.records("out", isolation="read_committed")
        assert sorted(r.value or b"" for r in out) == sorted(f"M{i}".encode() for i in range(10))
        assert cluster.committed("g") == {TopicPartition("in", 0): 5, TopicPartition("in", 1): 5}
        assert cluster.transactions() == {"tx": "CompleteCommit"}


def test_stopping_the_coordinator_node_under_a_live_group() -> None:
    with MemoryCluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "t", 3)
        cluster.move_coordinator("g", 2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for i in range(6):
                producer.send("t", f"a{i}".encode(), partition=i % 3)
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=50,
            fetch_max_wait_ms=50,
        ) as consumer:
            consumer.subscribe(["t"])
            got: list[bytes] = []
            for _ in range(100):
                if len(got) >= 6:
                    break
                got += [r.value or b"" for rs in consumer.poll(timeout_ms=100).values() for r in rs]
            consumer.commit()
            cluster.stop_broker(2)
            assert cluster.coordinator("g") == 3  # the next live node
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for i in range(6):
                    producer.send("t", f"b{i}".encode(), partition=i % 3)
            for _ in range(100):
                if len(got) >= 12:
                    break
                got += [r.value or b"" for rs in consumer.poll(timeout_ms=100).values() for r in rs]
            consumer.commit()
        assert sorted(got) == sorted(
            [f"a{i}".encode() for i in range(6)] + [f"b{i}".encode() for i in range(6)]
        )
        assert cluster.committed("g") == {TopicPartition("t", p): 4 for p in range(3)}


def test_disconnect_one_node_only() -> None:
    """faults.disconnect(node=...) cuts only requests reaching that node: a Produce to a
    partition led elsewhere leaves it armed; once the leader moves there, the first
    Produce is cut and the idempotent producer's retry stores the record once."""
    with MemoryCluster(brokers=2) as cluster:
        create(cluster, "t", 1)
        cluster.move_leader("t", 0, 1)
        cluster.faults.disconnect("Produce", node=2)
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, linger_ms=0
        ) as producer:
            assert producer.send("t", b"at node 1").result(10).offset == 0
            assert [(f.kind, f.node, f.remaining) for f in cluster.faults.armed()] == [
                ("disconnect", 2, 1)
            ]
            cluster.move_leader("t", 0, 2)
            assert producer.send("t", b"at node 2").result(10).offset == 1
        assert cluster.faults.armed() == []
        assert [r.value for r in cluster.records("t")] == [b"at node 1", b"at node 2"]
