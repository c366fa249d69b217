"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and the classic group APIs on a
consumer-type group, through Broker.handle and the wire codec."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from kafkette.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafkette.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kafkette.server import Broker, BrokerConfig
from kafkette.server.routing import misrouted
from tests.server.dataplane import FakeClock, call, make_broker

pytestmark = pytest.mark.anyio

HB_VERSION = 1
GROUP_ID_NOT_FOUND = 69
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
NON_EMPTY_GROUP = 68
NOT_COORDINATOR = 16


def broker_with_topic(partitions: int = 4) -> tuple[Broker, FakeClock, uuid.UUID]:
    clock = FakeClock()
    broker = make_broker(clock)
    topic = broker.cluster.create_topic("t", partitions)
    assert topic is not None
    return broker, clock, topic.topic_id


def heartbeat(
    member_id: str = "",
    epoch: int = 0,
    owned: dict[uuid.UUID, list[int]] | None = None,
    **fields: Any,
) -> ConsumerGroupHeartbeatRequest:
    joining = epoch == 0
    if joining and owned is None:
        owned = {}  # a joining member owns nothing, and says so
    return ConsumerGroupHeartbeatRequest(
        group_id=fields.pop("group_id", "g"),
        member_id=member_id or str(uuid.uuid4()),
        member_epoch=epoch,
        rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 30_000 if joining else -1),
        subscribed_topic_names=fields.pop("topics", ["t"] if joining else None),
        topic_partitions=(
            None
            if owned is None
            else [TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()]
        ),
        **fields,
    )


def owned_of(response: Any) -> dict[uuid.UUID, list[int]]:
    assert response.assignment is not None
    return {tp.topic_id: list(tp.partitions) for tp in response.assignment.topic_partitions}


def commit(member_id: str, epoch: int, offset: int = 5) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommitRequestPartition(0, committed_offset=offset)]
            )
        ],
    )


async def test_first_member_joins_and_gets_every_partition() -> None:
    """A member joining with epoch 0 gets epoch 1, the broker's heartbeat interval and
    every partition of its topic."""
    broker, _, topic_id = broker_with_topic()
    response = await call(broker, heartbeat("m1"), HB_VERSION)
    assert response.error_code == 0
    assert response.member_id == "m1"
    assert response.member_epoch == 1
    assert response.heartbeat_interval_ms == 5_000
    assert owned_of(response) == {topic_id: [0, 1, 2, 3]}


async def test_group_consumer_settings_reach_members() -> None:
    """group.consumer.heartbeat.interval.ms and group.consumer.assignors from the broker's
    properties: the interval in every answer, the first assignor the group's."""
    config = BrokerConfig.from_properties(
        {"group.consumer.heartbeat.interval.ms": "700", "group.consumer.assignors": "range"}
    )
    broker = Broker(config, clock=FakeClock())
    broker.cluster.create_topic("t", 1)
    response = await call(broker, heartbeat("m1"), HB_VERSION)
    assert (response.error_code, response.heartbeat_interval_ms) == (0, 700)
    described = await call(broker, ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
    assert described.groups[0].assignor_name == "range"


async def test_second_member_waits_for_revocation() -> None:
    """The second member's partitions come only after the first member acknowledged
    revoking them (the revocation handshake); then both own two each at epoch 2."""
    broker, _, topic_id = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    r2 = await call(broker, heartbeat("m2"), HB_VERSION)
    assert (r2.error_code, r2.member_epoch) == (0, 2)
    assert owned_of(r2) == {}  # the partitions are still m1's
    r1 = await call(broker, heartbeat("m1", 1, {topic_id: [0, 1, 2, 3]}), HB_VERSION)
    assert r1.error_code == 0
    assert r1.member_epoch == 1  # revoking: keeps its epoch until it acknowledges
    kept = owned_of(r1)[topic_id]
    assert len(kept) == 2
    r1 = await call(broker, heartbeat("m1", 1, {topic_id: kept}), HB_VERSION)
    assert r1.member_epoch == 2
    r2 = await call(broker, heartbeat("m2", 2, {topic_id: []}), HB_VERSION)
    assert r2.member_epoch == 2
    assert sorted(owned_of(r2)[topic_id] + kept) == [0, 1, 2, 3]


async def test_describe_lists_members_and_assignments() -> None:
    """ConsumerGroupDescribe reports the group's epochs, assignor, each member's
    subscription and assignment with topic names; an unknown id GROUP_ID_NOT_FOUND."""
    broker, _, topic_id = broker_with_topic(2)
    await call(broker, heartbeat("m1"), HB_VERSION)
    response = await call(broker, ConsumerGroupDescribeRequest(group_ids=["g", "nope"]), 0)
    g, nope = response.groups
    assert (g.group_id, g.error_code, g.group_state) == ("g", 0, "Stable")
    assert (g.group_epoch, g.assignment_epoch, g.assignor_name) == (1, 1, "uniform")
    (member,) = g.members
    assert (member.member_id, member.member_epoch, member.client_id) == ("m1", 1, "tests")
    assert member.subscribed_topic_names == ["t"]
    (tp,) = member.assignment.topic_partitions
    assert (tp.topic_id, tp.topic_name, tp.partitions) == (topic_id, "t", [0, 1])
    assert (nope.group_id, nope.error_code) == ("nope", GROUP_ID_NOT_FOUND)
    assert nope.error_message == "Group nope not found."


async def test_list_groups_with_types() -> None:
    """ListGroups v5 lists a consumer group with type "consumer" and a classic one with
    "classic", and filters by type."""
    broker, _, _ = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    await call(
        broker,
        JoinGroupRequest(
            group_id="classic",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol("range", b"m")],
        ),
        4,
    )  # MEMBER_ID_REQUIRED: the group exists, Empty, with a pending member
    listed = await call(broker, ListGroupsRequest(), 5)
    assert sorted(
        (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups
    ) == [
        ("classic", "", "Empty", "classic"),
        ("g", "consumer", "Stable", "consumer"),
    ]
    only = await call(broker, ListGroupsRequest(types_filter=["Consumer"]), 5)
    assert [g.group_id for g in only.groups] == ["g"]
    stable = await call(broker, ListGroupsRequest(states_filter=["stable"]), 5)
    assert [g.group_id for g in stable.groups] == ["g"]


async def test_offset_commit_checks_member_epoch() -> None:
    """OffsetCommit v9 from a member at its epoch is stored and fetched back; a stale epoch
    is STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, and neither is stored."""
    broker, _, _ = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    ok = await call(broker, commit("m1", 1, offset=7), 9)
    assert ok.topics[0].partitions[0].error_code == 0
    stale = await call(broker, commit("m1", 0, offset=8), 9)
    assert stale.topics[0].partitions[0].error_code == STALE_MEMBER_EPOCH
    unknown = await call(broker, commit("m9", 1, offset=9), 9)
    assert unknown.topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID
    fetched = await call(
        broker,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id="g",
                    member_id="m1",
                    member_epoch=1,
                    topics=[OffsetFetchRequestTopics("t", [0])],
                )
            ]
        ),
        9,
    )
    (group,) = fetched.groups
    assert group.error_code == 0
    assert group.topics[0].partitions[0].committed_offset == 7
    stale_fetch = await call(
        broker,
        OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id="g", member_id="m1", member_epoch=3)]
        ),
        9,
    )
    assert stale_fetch.groups[0].error_code == STALE_MEMBER_EPOCH


async def test_describe_groups_of_a_consumer_group_is_dead() -> None:
    """DescribeGroups of a consumer group id answers Dead without error, as Kafka 4's
    classic lookup does, even once it holds committed offsets."""
    broker, _, _ = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    await call(broker, commit("m1", 1), 9)
    response = await call(broker, DescribeGroupsRequest(groups=["g"]), 5)
    (g,) = response.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.members) == (0, "Dead", "", [])


async def test_classic_group_with_members_refuses_consumer_member() -> None:
    """A ConsumerGroupHeartbeat naming a classic group with members that cannot be upgraded
    is GROUP_ID_NOT_FOUND, as Kafka answers: a group of another protocol type ("Group g is
    not a consumer group"), or one whose embedded consumer protocol does not parse."""
    broker, _, _ = broker_with_topic()
    for group_id, protocol_type, message in [
        ("g", "connect", "Group g is not a consumer group"),
        (
            "h",
            "consumer",
            "Cannot upgrade the classic group h to consumer group because the embedded "
            "consumer protocol is malformed.",
        ),
    ]:
        join = JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            protocol_type=protocol_type,
            protocols=[JoinGroupRequestProtocol("range", b"m")],
        )
        await call(broker, join, 3)  # v3: joins at once, no MEMBER_ID_REQUIRED round
        response = await call(broker, heartbeat("m1", group_id=group_id), HB_VERSION)
        assert (response.error_code, response.error_message) == (GROUP_ID_NOT_FOUND, message)
        assert group_id not in broker.consumer_groups.groups
        assert len(broker.groups.engine.groups[group_id].members) == 1


async def test_leave_and_delete_group_with_offsets() -> None:
    """DeleteGroups refuses a consumer group with members (NON_EMPTY_GROUP); after the
    member leaves with epoch -1 it deletes the group and its committed offsets."""
    broker, _, _ = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    await call(broker, commit("m1", 1), 9)
    refused = await call(broker, DeleteGroupsRequest(groups_names=["g"]), 2)
    assert refused.results[0].error_code == NON_EMPTY_GROUP
    left = await call(broker, heartbeat("m1", -1), HB_VERSION)
    assert (left.error_code, left.member_epoch) == (0, -1)
    deleted = await call(broker, DeleteGroupsRequest(groups_names=["g"]), 2)
    assert deleted.results[0].error_code == 0
    assert "g" not in broker.consumer_groups.groups
    assert broker.groups.fetch_offsets("g", None) == {}
    gone = await call(broker, heartbeat("m1", 1), HB_VERSION)
    assert gone.error_code == GROUP_ID_NOT_FOUND


async def test_session_expiry_through_the_timer_loop() -> None:
    """The coordinators' timer loop removes a member whose session expired: its next
    heartbeat is UNKNOWN_MEMBER_ID and the group is Empty."""
    broker, clock, _ = broker_with_topic()
    await call(broker, heartbeat("m1"), HB_VERSION)
    async with anyio.create_task_group() as tg:
        tg.start_soon(broker.run_timers)
        clock.advance(45_001)
        with anyio.fail_after(5):
            while broker.consumer_groups.groups["g"].members:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    late = await call(broker, heartbeat("m1", 1), HB_VERSION)
    assert late.error_code == UNKNOWN_MEMBER_ID


async def test_new_topic_reaches_a_regex_member() -> None:
    """A member subscribed by SubscribedTopicRegex is assigned a topic created after it
    joined, at its next heartbeat."""
    broker, _, topic_id = broker_with_topic(1)
    first = await call(
        broker, heartbeat("m1", topics=None, subscribed_topic_regex="t.*"), HB_VERSION
    )
    assert owned_of(first) == {topic_id: [0]}
    new = broker.cluster.create_topic("t2", 1)
    assert new is not None
    later = await call(broker, heartbeat("m1", 1, {topic_id: [0]}), HB_VERSION)
    assert later.member_epoch == 2
    assert owned_of(later) == {topic_id: [0], new.topic_id: [0]}


async def test_heartbeat_at_another_node_is_not_coordinator() -> None:
    """With several nodes, a ConsumerGroupHeartbeat at a node not coordinating the group
    is answered NOT_COORDINATOR."""
    from kafkette.server.nodes import GROUP, numbered_nodes

    nodes = numbered_nodes([("localhost", 9092 + i) for i in range(3)])
    node = nodes.coordinator(GROUP, "g")
    other = next(n for n in nodes.addresses if n != node)
    answer = misrouted(nodes, other, heartbeat("m1"), HB_VERSION)
    assert isinstance(answer, ConsumerGroupHeartbeatResponse)
    assert answer.error_code == NOT_COORDINATOR
    assert misrouted(nodes, node, heartbeat("m1"), HB_VERSION) is None


async def test_describe_at_another_node_is_not_coordinator() -> None:
    """With several nodes, ConsumerGroupDescribe answers NOT_COORDINATOR for each group
    coordinated elsewhere and describes the ones coordinated at the node asked."""
    from kafkette.protocol.messages.request_header import RequestHeader
    from kafkette.server.dispatch import RequestContext
    from kafkette.server.nodes import GROUP, numbered_nodes

    broker, _, _ = broker_with_topic()
    broker.nodes = numbered_nodes([("localhost", 9092 + i) for i in range(3)])
    await call(broker, heartbeat("m1"), HB_VERSION)
    node = broker.nodes.coordinator(GROUP, "g")
    other = next(n for n in broker.nodes.addresses if n != node)
    header = RequestHeader(request_api_key=69, request_api_version=0, correlation_id=1)
    request = ConsumerGroupDescribeRequest(group_ids=["g"])
    elsewhere = await broker.handle(RequestContext(header, node_id=other), request)
    here = await broker.handle(RequestContext(header, node_id=node), request)
    assert isinstance(elsewhere, ConsumerGroupDescribeResponse)
    assert isinstance(here, ConsumerGroupDescribeResponse)
    assert [(g.group_id, g.error_code) for g in elsewhere.groups] == [("g", NOT_COORDINATOR)]
    assert [(g.group_id, g.error_code, len(g.members)) for g in here.groups] == [("g", 0, 1)]
