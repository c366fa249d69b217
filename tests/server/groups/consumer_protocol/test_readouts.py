"""What other requests read from a consumer group: OffsetCommit and OffsetFetch checked
against member epochs, the ConsumerGroupDescribe read-out, and the conversions to and
from the generated messages (encoded and decoded as on the wire)."""

from __future__ import annotations

import uuid
from typing import TypeVar

import pytest

from kafkette.errors import (
    GroupIdNotFoundError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedVersionError,
)
from kafkette.protocol.codec import decode_message, encode_message
from kafkette.protocol.messages import consumer_group_describe_response as describe_msg
from kafkette.protocol.messages import consumer_group_heartbeat_request as request_msg
from kafkette.protocol.messages import consumer_group_heartbeat_response as response_msg
from kafkette.protocol.schema import Message
from kafkette.server.groups.consumer_protocol import wire
from kafkette.server.groups.consumer_protocol.describe import (
    DescribedGroup,
    DescribedMember,
    TopicPartitions,
)
from kafkette.server.groups.consumer_protocol.heartbeat import HeartbeatRequest, HeartbeatResponse
from kafkette.server.groups.consumer_protocol.offsets import (
    validate_offset_commit,
    validate_offset_fetch,
)
from tests.server.groups.consumer_protocol.harness import Client, Cluster

M = TypeVar("M", bound=Message)


def two_members() -> tuple[Cluster, Client, Client]:
    cluster = Cluster({"a": 2, "b": 1})
    c1 = Client(cluster, "m1", topics=("a", "b"), instance_id="i1")
    c2 = Client(cluster, "m2", topics=("a",), regex="b.*", assignor="range")
    c1.join()
    c2.join()
    c1.heartbeat()
    return cluster, c1, c2


def test_offset_commit_checks_the_member_epoch() -> None:
    """STALE_MEMBER_EPOCH unless the commit carries the member's current epoch."""
    cluster, _, _ = two_members()
    group = cluster.group()
    assert group.members["m1"].member_epoch == 1
    validate_offset_commit(group, "m1", 1, api_version=9)
    with pytest.raises(StaleMemberEpochError) as info:
        validate_offset_commit(group, "m1", 2, api_version=9)
    assert info.value.detail == (
        "The received member epoch 2 does not match the expected member epoch 1."
    )
    with pytest.raises(StaleMemberEpochError):
        validate_offset_commit(group, "m1", 0, api_version=9)
    with pytest.raises(UnknownMemberIdError):
        validate_offset_commit(group, "m9", 1, api_version=9)
    with pytest.raises(UnsupportedVersionError):
        validate_offset_commit(group, "m1", 1, api_version=8)
    validate_offset_commit(group, "m1", 1, api_version=2, transactional=True)
    # Without a member (admin client, manual assignment): only while the group is empty.
    with pytest.raises(UnknownMemberIdError):
        validate_offset_commit(group, "", -1, api_version=9)


def test_offset_commit_without_member_on_an_empty_group() -> None:
    cluster = Cluster({"a": 1})
    c1 = Client(cluster, "m1")
    c1.join()
    c1.leave()
    validate_offset_commit(cluster.group(), "", -1, api_version=9)
    validate_offset_commit(cluster.group(), "", -1, api_version=2)


def test_offset_fetch_checks_the_member_epoch_when_given() -> None:
    cluster, _, _ = two_members()
    group = cluster.group()
    validate_offset_fetch(group, None, -1)
    validate_offset_fetch(group, "m1", 1)
    with pytest.raises(StaleMemberEpochError):
        validate_offset_fetch(group, "m1", 3)
    with pytest.raises(UnknownMemberIdError):
        validate_offset_fetch(group, "m9", 1)


def test_describe_reports_every_field() -> None:
    """ConsumerGroupDescribe's fields: state, epochs, assignor, and per member its
    subscription, current and target assignment (topics by id and name). Range, asked by
    m2: static m1 first, so a-0 and the single b-0 (m2's regex matches b) go to m1; m2
    waits for a-1, which m1 has yet to revoke."""
    cluster, _, _ = two_members()
    a, b = cluster.topics["a"].topic_id, cluster.topics["b"].topic_id
    described = cluster.coordinator.describe("g")
    assert described == DescribedGroup(
        group_id="g",
        group_state="Reconciling",
        group_epoch=2,
        assignment_epoch=2,
        assignor_name="range",
        members=(
            DescribedMember(
                member_id="m1",
                instance_id="i1",
                rack_id=None,
                member_epoch=1,
                client_id="",
                client_host="",
                subscribed_topic_names=("a", "b"),
                subscribed_topic_regex=None,
                assignment=(TopicPartitions(a, "a", (0,)), TopicPartitions(b, "b", (0,))),
                target_assignment=(TopicPartitions(a, "a", (0,)), TopicPartitions(b, "b", (0,))),
            ),
            DescribedMember(
                member_id="m2",
                instance_id=None,
                rack_id=None,
                member_epoch=2,
                client_id="",
                client_host="",
                subscribed_topic_names=("a",),
                subscribed_topic_regex="b.*",
                assignment=(),
                target_assignment=(TopicPartitions(a, "a", (1,)),),
            ),
        ),
    )
    with pytest.raises(GroupIdNotFoundError):
        cluster.coordinator.describe("nope")
    assert cluster.coordinator.list_groups() == [("g", "Reconciling")]


def _roundtrip(message: M, version: int) -> M:
    out = bytearray()
    encode_message(message, version, out)
    decoded, end = decode_message(type(message), out, 0, version)
    assert end == len(out)
    return decoded


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_from_the_wire(version: int) -> None:
    """A decoded ConsumerGroupHeartbeat becomes the coordinator's request; a repeated topic
    in TopicPartitions is merged."""
    topic = uuid.UUID(int=5)
    message = request_msg.ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m1",
        member_epoch=4,
        instance_id="i",
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        subscribed_topic_regex="x.*" if version >= 1 else None,
        server_assignor="range",
        topic_partitions=[
            request_msg.TopicPartitions(topic_id=topic, partitions=[2, 0]),
            request_msg.TopicPartitions(topic_id=topic, partitions=[1]),
        ],
    )
    decoded = _roundtrip(message, version)
    assert isinstance(decoded, request_msg.ConsumerGroupHeartbeatRequest)
    request = wire.heartbeat_request(decoded, version, "client-1", "/127.0.0.1")
    assert request == HeartbeatRequest(
        group_id="g",
        member_id="m1",
        member_epoch=4,
        instance_id="i",
        rebalance_timeout_ms=-1,
        subscribed_topic_regex="x.*" if version >= 1 else None,
        server_assignor="range",
        owned={topic: frozenset({0, 1, 2})},
        client_id="client-1",
        client_host="/127.0.0.1",
        api_version=version,
    )


def test_heartbeat_response_to_the_wire() -> None:
    topic = uuid.UUID(int=5)
    response = wire.heartbeat_response(HeartbeatResponse("m1", 3, 5000, {topic: frozenset({2, 0})}))
    decoded = _roundtrip(response, 1)
    assert decoded == response_msg.ConsumerGroupHeartbeatResponse(
        member_id="m1",
        member_epoch=3,
        heartbeat_interval_ms=5000,
        assignment=response_msg.Assignment(
            topic_partitions=[response_msg.TopicPartitions(topic_id=topic, partitions=[0, 2])]
        ),
    )
    assert wire.heartbeat_response(HeartbeatResponse("m1", 3, 5000)).assignment is None
    error = wire.heartbeat_error(UnreleasedInstanceIdError("instance i1 is in use"))
    assert (error.error_code, error.error_message) == (111, "instance i1 is in use")


def test_describe_to_the_wire() -> None:
    cluster, _, _ = two_members()
    a, b = cluster.topics["a"].topic_id, cluster.topics["b"].topic_id
    group = wire.described_group(cluster.coordinator.describe("g"))
    decoded = _roundtrip(describe_msg.ConsumerGroupDescribeResponse(groups=[group]), 0)
    assert isinstance(decoded, describe_msg.ConsumerGroupDescribeResponse)
    (out,) = decoded.groups
    assert (out.group_id, out.group_state, out.group_epoch, out.assignor_name) == (
        "g",
        "Reconciling",
        2,
        "range",
    )
    assert [m.member_id for m in out.members] == ["m1", "m2"]
    assert out.members[0].assignment == describe_msg.Assignment(
        topic_partitions=[
            describe_msg.TopicPartitions(topic_id=a, topic_name="a", partitions=[0]),
            describe_msg.TopicPartitions(topic_id=b, topic_name="b", partitions=[0]),
        ]
    )
    assert out.members[1].target_assignment == describe_msg.Assignment(
        topic_partitions=[describe_msg.TopicPartitions(topic_id=a, topic_name="a", partitions=[1])]
    )
    assert out.members[1].subscribed_topic_regex == "b.*"
