"""MemoryCluster: lifetime, inspection, advance() and faults seen by real clients."""

from __future__ import annotations

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
from kafkette.consumer.assignors.base import Assignment, Subscription
from kafkette.consumer.assignors.protocol import encode_assignment, encode_subscription
from kafkette.errors import (
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    MemberIdRequiredError,
    NotEnoughReplicasError,
)
from kafkette.protocol.messages import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.testing import ManualClock, MemoryCluster


def create(cluster: MemoryCluster, topic: str, partitions: int = 1) -> None:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, partitions)]).all()


def values(cluster: MemoryCluster, topic: str, **kw: object) -> list[bytes]:
    return [r.value for r in cluster.records(topic, **kw)]  # type: ignore[arg-type]


def test_names_are_unique_and_closed_clusters_refuse_clients() -> None:
    with MemoryCluster() as a, MemoryCluster() as b:
        assert a.bootstrap_servers != b.bootstrap_servers
        assert a.bootstrap_servers.startswith("memory://cluster-")
        assert isinstance(a.clock, ManualClock)
    assert a.closed
    with pytest.raises(KafkaConnectionError, match="its MemoryCluster was closed"):
        get_cluster(a.bootstrap_servers)
    with MemoryCluster("named-once") as named:  # a name may be used again after close
        assert named.bootstrap_servers == "memory://named-once"
        with pytest.raises(ValueError, match="exists already"):
            MemoryCluster("named-once")
    MemoryCluster("named-once").close()


def test_broker_config_and_brokers() -> None:
    with MemoryCluster(group_min_session_timeout_ms=500) as cluster:
        assert cluster._broker.config.group_min_session_timeout_ms == 500
    with MemoryCluster(brokers=3) as three:
        assert three.nodes == [1, 2, 3]
    with pytest.raises(Exception, match=r"no\.such\.setting"):
        MemoryCluster(no_such_setting=1)


@pytest.mark.anyio
async def test_async_context_manager_and_inspection() -> None:
    async with MemoryCluster() as cluster:
        create(cluster, "t", 2)
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for i in range(3):
                await (await producer.send("t", f"v{i}".encode(), partition=i % 2))
        assert [(r.partition, r.offset, r.value) for r in cluster.records("t")] == [
            (0, 0, b"v0"),
            (0, 1, b"v2"),
            (1, 0, b"v1"),
        ]
        assert values(cluster, "t", partition=1) == [b"v1"]
        assert cluster.high_watermark("t", 0) == 2
        assert cluster.last_stable_offset("t", 0) == 2
        assert cluster.committed("nobody") == {}
    assert cluster.closed


def test_read_committed_records_and_transactions() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="tx") as p:
            p.init_transactions()
            p.begin_transaction()
            p.send("t", b"aborted")
            p.flush()
            assert cluster.transactions() == {"tx": "Ongoing"}
            assert cluster.last_stable_offset("t", 0) == 0
            assert cluster.high_watermark("t", 0) == 1
            p.abort_transaction()
            p.begin_transaction()
            p.send("t", b"kept")
            p.commit_transaction()
        assert cluster.transactions() == {"tx": "CompleteCommit"}
        assert values(cluster, "t") == [b"aborted", b"kept"]
        assert values(cluster, "t", isolation="read_committed") == [b"kept"]
        with pytest.raises(ValueError, match="isolation"):
            cluster.records("t", isolation="committed")  # type: ignore[arg-type]


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_committed_and_assignment(group_protocol: str) -> None:
    """Read from the core, for a classic group and one of the consumer protocol (KIP-848)."""
    with MemoryCluster() as cluster:
        create(cluster, "t", 2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send("t", b"a", partition=0)
            producer.send("t", b"b", partition=1)
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            group_protocol=group_protocol,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            consumer.subscribe(["t"])
            seen = 0
            while seen < 2:
                seen += sum(map(len, consumer.poll(timeout_ms=1000).values()))
            consumer.commit()
            assert cluster.committed("g") == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 1}
            member = consumer.group_metadata().member_id
            assert cluster.assignment("g") == {
                member: {TopicPartition("t", 0), TopicPartition("t", 1)}
            }


# -- time --------------------------------------------------------------------------------


async def join(connection: BrokerConnection, group: str, session_ms: int) -> tuple[str, int]:
    """A consumer-group member by hand: JoinGroup twice (KIP-394), SyncGroup; then silent."""
    subscription = encode_subscription(Subscription(topics=("t",)))
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription)],
    )
    first = await connection.request(request)
    assert isinstance(first, JoinGroupResponse)
    assert first.error_code == MemberIdRequiredError.code
    request.member_id = first.member_id
    joined = await connection.request(request)
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0
    mine = encode_assignment(Assignment(partitions=(TopicPartition("t", 0),)))
    await connection.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=mine)],
        )
    )
    return joined.member_id, joined.generation_id


@pytest.mark.anyio
async def test_advance_expires_a_silent_members_session_without_sleeping() -> None:
    """advance() returns after the session timers have fired: the member is gone at once."""
    async with MemoryCluster(group_initial_rebalance_delay_ms=0) as cluster:
        create(cluster, "t")
        connection = await BrokerConnection.over_stream(
            get_cluster(cluster.bootstrap_servers).open_stream(), address="test"
        )
        try:
            member, _ = await join(connection, "g", session_ms=10_000)
            assert cluster.assignment("g") == {member: {TopicPartition("t", 0)}}
            started = anyio.current_time()
            cluster.advance(9.999)
            assert cluster.assignment("g") == {member: {TopicPartition("t", 0)}}
            cluster.advance(0.001)
            assert cluster.assignment("g") == {}
            assert anyio.current_time() - started < 0.5  # no waiting for a timer loop
        finally:
            await connection.aclose()


def test_advance_aborts_a_timed_out_transaction() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            transactional_id="slow",
            transaction_timeout_ms=5_000,
        ) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send("t", b"late")
            p.flush()
            cluster.advance(4.9)
            assert cluster.transactions() == {"slow": "Ongoing"}
            cluster.advance(0.2)
            assert cluster.transactions()["slow"] in ("PrepareAbort", "CompleteAbort")
            assert values(cluster, "t", isolation="read_committed") == []
            assert cluster.last_stable_offset("t", 0) == 2  # the record and the abort marker


def test_advance_needs_a_manual_clock() -> None:
    with MemoryCluster(clock=lambda: 0.0) as cluster, pytest.raises(TypeError, match="ManualClock"):
        cluster.advance(1)


# -- faults seen by clients --------------------------------------------------------------


def test_sync_producer_retries_not_enough_replicas() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.fail("Produce", NotEnoughReplicasError, times=3)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=1) as p:
            metadata = p.send("t", b"v", key=b"k").result(10)
        assert (metadata.partition, metadata.offset) == (0, 0)
        assert cluster.faults.armed() == []
        assert values(cluster, "t") == [b"v"]


@pytest.mark.anyio
async def test_async_producer_retries_not_enough_replicas() -> None:
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.fail("Produce", NotEnoughReplicasError.code, times=3, topic="t")
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=1
        ) as producer:
            metadata = await (await producer.send("t", b"v"))
        assert metadata.offset == 0
        assert cluster.faults.armed() == []
        assert values(cluster, "t") == [b"v"]


def test_idempotent_producer_writes_once_when_answers_are_lost() -> None:
    """The broker appends, the answer is lost (the connection closes): the producer sends
    the batch again with the same sequence, and the broker answers without a second append."""
    with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.drop_response("Produce", times=2)
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, retry_backoff_ms=1
        ) as p:
            offsets = [p.send("t", f"v{i}".encode()).result(10).offset for i in range(3)]
        assert offsets == [0, 1, 2]
        assert cluster.faults.armed() == []
        assert values(cluster, "t") == [b"v0", b"v1", b"v2"]


@pytest.mark.anyio
async def test_async_idempotent_producer_writes_once_when_answers_are_lost() -> None:
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.drop_response("Produce", times=2)
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, retry_backoff_ms=1
        ) as producer:
            futures = [await producer.send("t", f"v{i}".encode()) for i in range(3)]
            offsets = [(await future).offset for future in futures]
        assert offsets == [0, 1, 2]
        assert cluster.faults.armed() == []
        assert values(cluster, "t") == [b"v0", b"v1", b"v2"]


CONSUMER_SETTINGS = {"group_id": "g", "auto_offset_reset": "earliest", "retry_backoff_ms": 1}


def test_find_coordinator_error_is_retried() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.fail("FindCoordinator", CoordinatorNotAvailableError, times=2)
        with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CONSUMER_SETTINGS) as c:
            c.subscribe(["t"])
            while not c.assignment():
                c.poll(timeout_ms=100)
            c.commit({TopicPartition("t", 0): 0})
        assert cluster.faults.armed() == []
        assert cluster.committed("g") == {TopicPartition("t", 0): 0}


@pytest.mark.anyio
async def test_async_find_coordinator_error_is_retried() -> None:
    async with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.fail("FindCoordinator", CoordinatorNotAvailableError, times=2)
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers, **CONSUMER_SETTINGS
        ) as consumer:
            consumer.subscribe(["t"])
            while not consumer.assignment():
                await consumer.poll(timeout_ms=100)
            await consumer.commit({TopicPartition("t", 0): 0})
        assert cluster.faults.armed() == []
        assert cluster.committed("g") == {TopicPartition("t", 0): 0}


def test_disconnect_and_delay_are_survived() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.disconnect("Produce")
        cluster.faults.delay("Produce", 0.05, times=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=1) as p:
            assert p.send("t", b"v").result(10).offset == 0
        assert cluster.faults.armed() == []
        assert values(cluster, "t") == [b"v"]


def test_throttle_is_in_answers() -> None:
    with MemoryCluster() as cluster:
        create(cluster, "t")
        cluster.faults.throttle(5)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            assert p.send("t", b"v").result(10).offset == 0
        cluster.faults.clear()
        assert not cluster.faults.active
