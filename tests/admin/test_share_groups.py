"""The admin client's share-group operations against memory:// and ``kafkette serve
--memory``: list_groups by type, describe_share_groups, list/alter/delete_share_group_offsets
and delete_share_groups, with exact start offsets, lags and Kafka's error classes; one
member speaks the share protocol by hand (our client core's connection) to make the
group. (The same against a disk broker with confluent-kafka's ShareConsumer and a
restart: tests/cli/test_share_groups.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import pytest

from kafkette import AdminClient, AsyncAdminClient, NewTopic, Producer, TopicPartition
from kafkette.admin import GroupListing, GroupState, GroupType, SharePartitionOffsetInfo
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.connection import BrokerConnection
from kafkette.errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords, ShareFetchResponse
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.testing import MemoryCluster
from tests.brokers import BrokerProcess

pytestmark = pytest.mark.anyio

ACCEPT = 1
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class HandMember:
    """A share-group member of group ``g`` over one connection."""

    def __init__(self, connection: BrokerConnection, topic_id: uuid.UUID) -> None:
        self.connection, self.topic_id = connection, topic_id
        self.member_id = str(uuid.uuid4())
        self.epoch = 0

    async def heartbeat(self, epoch: int) -> None:
        request = ShareGroupHeartbeatRequest(
            group_id="g",
            member_id=self.member_id,
            member_epoch=epoch,
            subscribed_topic_names=["t"] if epoch == 0 else None,
        )
        response = await self.connection.request(request, version=1)
        assert isinstance(response, ShareGroupHeartbeatResponse)
        assert response.error_code == 0

    async def fetch(self, acks: tuple[tuple[int, int], ...] = ()) -> list[AcquiredRecords]:
        batches = [AcknowledgementBatch(first, last, [ACCEPT]) for first, last in acks]
        partitions = [FetchPartition(0, 0, batches), FetchPartition(1)]
        response = await self.connection.request(
            ShareFetchRequest(
                group_id="g",
                member_id=self.member_id,
                share_session_epoch=self.epoch,
                max_records=100,
                topics=[FetchTopic(self.topic_id, partitions)],
            ),
            version=2,
        )
        assert isinstance(response, ShareFetchResponse)
        assert response.error_code == 0
        self.epoch += 1
        return [r for t in response.responses for p in t.partitions for r in p.acquired_records]


@pytest.fixture
def anyio_backend() -> str:
    """One event loop: the point is the broker's answers (and CI's time is short)."""
    return "asyncio"


@pytest.fixture(params=["memory://", "serve --memory"])
def servers(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "memory://":
        with MemoryCluster() as memory:
            yield memory.bootstrap_servers
    else:
        with BrokerProcess() as broker:
            yield broker.bootstrap


async def make_group(servers: str, client: KafkaClient) -> HandMember:
    """Group ``g`` with one member holding t-0 records 2-3 (0-1 accepted) and t-1 empty."""
    connection = await client.connection(await client.any_node())
    async with AsyncAdminClient(bootstrap_servers=servers) as admin:
        topic_id = (await admin.describe_topics(["t"])).all()["t"].topic_id
    member = HandMember(connection, topic_id)
    await member.heartbeat(0)
    assert await member.fetch() == []  # both share partitions start at the end: 0
    with Producer(bootstrap_servers=servers) as producer:
        for value in (b"a", b"b", b"c", b"d"):
            producer.send("t", value, partition=0).result(10)
    assert await member.fetch() == [AcquiredRecords(0, 3, 1)]
    await member.fetch(acks=((0, 1),))
    return member


async def test_share_group_admin(servers: str) -> None:
    """Listed by type, described with its member and assignment, offsets with start and
    lag; alter/delete refused while the member is in; after it leaves, alter moves the
    start to 3, delete_share_group_offsets forgets the topic, delete_share_groups the
    group."""
    async with AsyncAdminClient(bootstrap_servers=servers) as admin:
        await admin.create_topics([NewTopic("t", 2)])
        config = AdminConfig.from_user(bootstrap_servers=servers)
        async with KafkaClient(config) as client:
            member = await make_group(servers, client)

            (listed,) = (await admin.list_groups(types=["share"])).all()
            assert listed == GroupListing("g", GroupType.SHARE, "share", GroupState.STABLE, 1)
            assert [g.group_id for g in (await admin.list_groups()).all()] == ["g"]
            assert (await admin.list_consumer_groups()).all() == ()

            described = await admin.describe_share_groups(["g", "nope"])
            group = described["g"].result()
            assert (group.state, group.assignor, group.coordinator is not None) == (
                GroupState.STABLE,
                "simple",
                True,
            )
            (seen,) = group.members
            assert (seen.member_id, seen.assignment, seen.member_epoch) == (
                member.member_id,
                frozenset({T0, T1}),
                group.group_epoch,
            )
            assert isinstance(described["nope"].error, GroupIdNotFoundError)

            offsets = (await admin.list_share_group_offsets("g")).all()
            assert offsets == {
                T0: SharePartitionOffsetInfo(2, None, 2),
                T1: SharePartitionOffsetInfo(0, None, 0),
            }
            busy = await admin.alter_share_group_offsets("g", {T0: 3})
            assert isinstance(busy[T0].error, NonEmptyGroupError)
            refused = await admin.delete_share_group_offsets("g", ["t"])
            assert isinstance(refused["t"].error, NonEmptyGroupError)
            not_empty = await admin.delete_share_groups(["g"])
            assert isinstance(not_empty["g"].error, NonEmptyGroupError)

            await member.heartbeat(-1)
        unknown = await admin.alter_share_group_offsets("nope", {T0: 0})
        assert isinstance(unknown[T0].error, GroupIdNotFoundError)
        assert (await admin.alter_share_group_offsets("g", {T0: 3})).all() == {T0: None}
        assert (await admin.list_share_group_offsets("g", [T0, TopicPartition("x", 0)])).all() == {
            T0: SharePartitionOffsetInfo(3, None, 1),
            TopicPartition("x", 0): None,
        }
        deleted = await admin.delete_share_group_offsets("g", ["t", "absent"])
        assert deleted["t"].result() is None
        assert isinstance(deleted["absent"].error, UnknownTopicOrPartitionError)
        assert (await admin.list_share_group_offsets("g")).all() == {}
        assert (await admin.delete_share_groups(["g"])).all() == {"g": None}
        assert (await admin.list_groups(types=["share"])).all() == ()
        with pytest.raises(ValueError, match="not an offset"):
            await admin.alter_share_group_offsets("g", {T0: -1})


def test_the_sync_admin_client_does_the_same() -> None:
    """AdminClient's twins: listed, described, offsets read, refused while the member is
    in, altered once its session timed out (``advance()`` past 45 s), deleted."""

    async def populate(cluster: MemoryCluster) -> str:
        config = AdminConfig.from_user(bootstrap_servers=cluster.bootstrap_servers)
        async with KafkaClient(config) as client:
            return (await make_group(cluster.bootstrap_servers, client)).member_id

    with (
        MemoryCluster() as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        admin.create_topics([NewTopic("t", 2)])
        member_id = anyio.run(populate, cluster)
        assert [g.type for g in admin.list_groups(states=["Stable"]).all()] == [GroupType.SHARE]
        group = admin.describe_share_groups(["g"]).all()["g"]
        assert [m.member_id for m in group.members] == [member_id]
        assert admin.list_share_group_offsets("g", [T0]).all() == {
            T0: SharePartitionOffsetInfo(2, None, 2)
        }
        busy = admin.alter_share_group_offsets("g", {T1: 5})
        assert isinstance(busy[T1].error, NonEmptyGroupError)
        cluster.advance(45)
        assert admin.describe_share_groups(["g"]).all()["g"].state == GroupState.EMPTY
        assert admin.alter_share_group_offsets("g", {T1: 5}).all() == {T1: None}
        assert admin.list_share_group_offsets("g", [T1]).all() == {
            T1: SharePartitionOffsetInfo(5, None, 0)
        }
        assert admin.delete_share_group_offsets("g", ["t"]).all() == {"t": None}
        assert admin.delete_share_groups(["g"]).all() == {"g": None}
