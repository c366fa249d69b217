"""Share groups on memory://, spoken at the protocol level by our client core:
ApiVersions lists the share APIs, ``cluster.advance()`` expires acquisition locks
without sleeping, ``cluster.share_partition_state()`` reads a share partition out, and a
closed connection ends its share sessions."""

from __future__ import annotations

import uuid

import anyio
import pytest

from kafkette import AsyncProducer, Producer
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.connection import BrokerConnection
from kafkette.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkette.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords, ShareFetchResponse
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.testing import MemoryCluster, SharePartitionState, ShareRecordState

pytestmark = pytest.mark.anyio


async def fetch(
    connection: BrokerConnection, member_id: str, epoch: int, topic_id: uuid.UUID
) -> list[AcquiredRecords]:
    response = await connection.request(
        ShareFetchRequest(
            group_id="g",
            member_id=member_id,
            share_session_epoch=epoch,
            max_records=10,
            topics=[FetchTopic(topic_id, [FetchPartition(0)])],
        ),
        version=2,
    )
    assert isinstance(response, ShareFetchResponse)
    assert response.error_code == 0
    return [r for t in response.responses for p in t.partitions for r in p.acquired_records]


async def join(connection: BrokerConnection, member_id: str) -> None:
    response = await connection.request(
        ShareGroupHeartbeatRequest(
            group_id="g", member_id=member_id, member_epoch=0, subscribed_topic_names=["t"]
        ),
        version=1,
    )
    assert isinstance(response, ShareGroupHeartbeatResponse)
    assert response.error_code == 0


async def test_memory_cluster_expires_locks_on_advance() -> None:
    """Two members over memory://: the first acquires a record and never acknowledges
    it; after ``advance()`` past the 30 s lock the second gets it with delivery count 2,
    and not before."""
    with MemoryCluster() as cluster:
        cluster_admin = AdminConfig.from_user(bootstrap_servers=cluster.bootstrap_servers)
        async with KafkaClient(cluster_admin) as client:
            await client.refresh_metadata(["t"], allow_auto_topic_creation=True)
            connection = await client.connection(await client.any_node())
            versions = await connection.request(ApiVersionsRequest(), version=3)
            assert isinstance(versions, ApiVersionsResponse)
            served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            assert {k: served[k] for k in (76, 77, 78, 79)} == {
                76: (1, 1),
                77: (1, 1),
                78: (1, 2),
                79: (1, 2),
            }
            topic_id = cluster._broker.cluster.get_topic("t").topic_id
            one, two = str(uuid.uuid4()), str(uuid.uuid4())
            await join(connection, one)
            await join(connection, two)
            assert await fetch(connection, one, 0, topic_id) == []
            assert await fetch(connection, two, 0, topic_id) == []
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                producer.send("t", b"v", partition=0).result(10)
            assert await fetch(connection, one, 1, topic_id) == [AcquiredRecords(0, 0, 1)]
            cluster.advance(29.9)
            assert await fetch(connection, two, 1, topic_id) == []
            cluster.advance(0.1)
            assert await fetch(connection, two, 2, topic_id) == [AcquiredRecords(0, 0, 2)]


async def test_share_partition_state_reads_out_starts_states_and_counts() -> None:
    """``share_partition_state`` follows a record from acquired (member, lock deadline on
    the cluster's clock) to AVAILABLE when ``advance()`` passes the lock, and the start
    offset past an ACCEPTed record."""
    with MemoryCluster() as cluster:
        config = AdminConfig.from_user(bootstrap_servers=cluster.bootstrap_servers)
        async with KafkaClient(config) as client:
            await client.refresh_metadata(["t"], allow_auto_topic_creation=True)
            connection = await client.connection(await client.any_node())
            topic_id = cluster._broker.cluster.get_topic("t").topic_id
            assert cluster.share_partition_state("g", "t", 0) is None
            one = str(uuid.uuid4())
            await join(connection, one)
            assert await fetch(connection, one, 0, topic_id) == []
            assert cluster.share_partition_state("g", "t", 0) == SharePartitionState(0, 0, ())
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for value in (b"a", b"b"):
                    producer.send("t", value, partition=0).result(10)
            assert await fetch(connection, one, 1, topic_id) == [AcquiredRecords(0, 1, 1)]
            deadline = int(cluster.clock()) + 30_000
            state = cluster.share_partition_state("g", "t", 0)
            assert state == SharePartitionState(
                0,
                2,
                (
                    ShareRecordState(0, "ACQUIRED", 1, one, deadline),
                    ShareRecordState(1, "ACQUIRED", 1, one, deadline),
                ),
            )
            assert state.acquired == {0: one, 1: one}
            cluster.advance(30)
            assert cluster.share_partition_state("g", "t", 0) == SharePartitionState(
                0, 2, (ShareRecordState(0, "AVAILABLE", 1), ShareRecordState(1, "AVAILABLE", 1))
            )
            assert await fetch(connection, one, 2, topic_id) == [AcquiredRecords(0, 1, 2)]
            response = await connection.request(
                ShareFetchRequest(
                    group_id="g",
                    member_id=one,
                    share_session_epoch=3,
                    topics=[
                        FetchTopic(
                            topic_id, [FetchPartition(0, 0, [AcknowledgementBatch(0, 0, [1])])]
                        )
                    ],
                ),
                version=2,
            )
            assert isinstance(response, ShareFetchResponse) and response.error_code == 0
            assert cluster.share_partition_state("g", "t", 0) == SharePartitionState(
                1, 2, (ShareRecordState(1, "ACQUIRED", 2, one, int(cluster.clock()) + 30_000),)
            )


@pytest.mark.parametrize("in_loop", [False, True])
async def test_a_closed_connection_ends_its_share_session(in_loop: bool) -> None:
    """A member acquires a record over memory:// and its client closes its connections
    without closing the share session: the session ends and the record is AVAILABLE at
    once with its delivery count given back (Kafka's ShareSessionCache disconnect
    listener, as over TCP), so another member gets it before any lock expires. Both
    with the cluster in its own thread and served on the test's loop."""
    cluster = MemoryCluster(in_loop=in_loop)
    async with cluster:
        config = AdminConfig.from_user(bootstrap_servers=cluster.bootstrap_servers)
        async with KafkaClient(config) as other_client:
            await other_client.refresh_metadata(["t"], allow_auto_topic_creation=True)
            other = await other_client.connection(await other_client.any_node())
            topic_id = cluster._broker.cluster.get_topic("t").topic_id
            one, two = str(uuid.uuid4()), str(uuid.uuid4())
            async with KafkaClient(config) as client:
                connection = await client.connection(await client.any_node())
                await join(connection, one)
                assert await fetch(connection, one, 0, topic_id) == []
                async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                    await producer.send_and_wait("t", b"held", partition=0)
                assert await fetch(connection, one, 1, topic_id) == [AcquiredRecords(0, 0, 1)]
                assert cluster.share_partition_state("g", "t", 0).acquired == {0: one}
            with anyio.fail_after(10):  # a cluster in its own thread hears of it soon after
                while cluster.share_partition_state("g", "t", 0).acquired:
                    await anyio.sleep(0.01)
            assert cluster.share_partition_state("g", "t", 0) == SharePartitionState(
                0, 1, (ShareRecordState(0, "AVAILABLE", 0),)
            )
            assert cluster._broker.share_groups.sessions.get("g", one) is None
            await join(other, two)
            assert await fetch(other, two, 0, topic_id) == [AcquiredRecords(0, 0, 1)]
