"""Group migration through the broker's handlers and the codec (Broker.handle): a classic
member upgraded by a ConsumerGroupHeartbeat, then rejoining through JoinGroup/SyncGroup
inside the consumer group; the policy from the broker property; a classic JoinGroup
of another protocol type refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkette.consumer.assignors.base import Assignment, Subscription
from kafkette.consumer.assignors.protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from kafkette.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    SyncGroupRequest,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.server import Broker
from kafkette.structs import TopicPartition
from tests.server.dataplane import FakeClock, call, make_broker

pytestmark = pytest.mark.anyio

JOIN_VERSION = 9
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
INCONSISTENT_GROUP_PROTOCOL = 23
GROUP_ID_NOT_FOUND = 69


def join(member_id: str = "", protocol_type: str = "consumer") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=[
            JoinGroupRequestProtocol("range", encode_subscription(Subscription(topics=("t",))))
        ],
    )


def consumer_join(member_id: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=["t"],
        topic_partitions=[],
    )


async def classic_member(broker: Broker) -> tuple[str, Any]:
    """One classic member that joined alone and assigned itself every partition of t."""
    first = await call(broker, join(), JOIN_VERSION)
    assert first.error_code == MEMBER_ID_REQUIRED
    joined = await call(broker, join(first.member_id), JOIN_VERSION)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
    everything = Assignment(partitions=tuple(TopicPartition("t", p) for p in range(4)))
    synced = await call(
        broker,
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=first.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                SyncGroupRequestAssignment(first.member_id, encode_assignment(everything))
            ],
        ),
        5,
    )
    assert synced.error_code == 0
    return first.member_id, joined


def broker_with_topic(**settings: Any) -> Broker:
    broker = make_broker(FakeClock(), **settings)
    assert broker.cluster.create_topic("t", 4) is not None
    return broker


async def test_upgrade_and_classic_rejoin_over_the_wire() -> None:
    """A consumer member joins a classic group of one: the group is listed as a consumer
    group; the classic member's Heartbeat says REBALANCE_IN_PROGRESS, its JoinGroup is
    answered with its new epoch as generation and no leader, and its SyncGroup with the
    half the broker left it; the consumer member then gets the other half."""
    broker = broker_with_topic()
    classic_id, _ = await classic_member(broker)
    newcomer = str(uuid.uuid4())
    answer = await call(broker, consumer_join(newcomer), 1)
    assert (answer.error_code, answer.member_epoch) == (0, 2)
    assert answer.assignment.topic_partitions == []  # the classic member still holds all
    listed = await call(broker, ListGroupsRequest(), 5)
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("g", "consumer", "consumer")
    ]
    beat = await call(
        broker, HeartbeatRequest(group_id="g", generation_id=1, member_id=classic_id), 4
    )
    assert beat.error_code == REBALANCE_IN_PROGRESS
    rejoined = await call(broker, join(classic_id), JOIN_VERSION)
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader, rejoined.members) == (
        0,
        2,
        "",
        [],
    )
    assert (rejoined.protocol_type, rejoined.protocol_name) == ("consumer", "range")
    synced = await call(
        broker,
        SyncGroupRequest(
            group_id="g",
            generation_id=2,
            member_id=classic_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        ),
        5,
    )
    assert synced.error_code == 0
    kept = sorted(tp.partition for tp in decode_assignment(synced.assignment).partitions)
    assert len(kept) == 2
    beat = await call(
        broker, HeartbeatRequest(group_id="g", generation_id=2, member_id=classic_id), 4
    )
    assert beat.error_code == 0
    heartbeat = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=newcomer, member_epoch=2, topic_partitions=[]
    )
    answer = await call(broker, heartbeat, 1)
    (given,) = answer.assignment.topic_partitions
    assert sorted(given.partitions) == sorted(set(range(4)) - set(kept))


async def test_migration_policy_from_the_broker_property() -> None:
    """group.consumer.migration.policy=disabled: the consumer member is refused with
    GROUP_ID_NOT_FOUND and the classic group goes on."""
    broker = broker_with_topic(group_consumer_migration_policy="disabled")
    classic_id, _ = await classic_member(broker)
    answer = await call(broker, consumer_join(str(uuid.uuid4())), 1)
    assert (answer.error_code, answer.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Group g is not a consumer group",
    )
    beat = await call(
        broker, HeartbeatRequest(group_id="g", generation_id=1, member_id=classic_id), 4
    )
    assert beat.error_code == 0


async def test_classic_join_of_another_protocol_type_to_a_consumer_group() -> None:
    """A JoinGroup with protocol type connect naming a consumer group with members is
    INCONSISTENT_GROUP_PROTOCOL, as Kafka answers; the group keeps its member."""
    broker = broker_with_topic()
    newcomer = str(uuid.uuid4())
    assert (await call(broker, consumer_join(newcomer), 1)).error_code == 0
    refused = await call(broker, join(protocol_type="connect"), JOIN_VERSION)
    assert (refused.error_code, refused.member_id) == (INCONSISTENT_GROUP_PROTOCOL, "")
    assert list(broker.consumer_groups.groups["g"].members) == [newcomer]


async def test_transactional_commit_checks_of_a_consumer_group() -> None:
    """TxnOffsetCommit's member checks for a consumer group: its members and their epochs
    (a classic member's generation), as Kafka's validateOffsetCommit for a transactional
    commit: STALE_MEMBER_EPOCH, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID."""
    broker = broker_with_topic()
    classic_id, _ = await classic_member(broker)
    newcomer = str(uuid.uuid4())
    assert (await call(broker, consumer_join(newcomer), 1)).member_epoch == 2
    check = broker.groups.validate_transactional_commit
    assert check("g", 2, newcomer, None) == 0
    assert check("g", 1, newcomer, None) == 113  # STALE_MEMBER_EPOCH
    assert check("g", 1, classic_id, None) == 0  # the classic member is still at 1
    assert check("g", 2, classic_id, None) == 22  # ILLEGAL_GENERATION
    assert check("g", -1, "", None) == 25  # UNKNOWN_MEMBER_ID while it has members
