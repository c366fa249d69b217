"""Between the generated ConsumerGroupHeartbeat / ConsumerGroupDescribe messages and the
coordinator's own types, for the request handlers."""

from __future__ import annotations

from kafkette.errors import ApiError
from kafkette.protocol.messages import consumer_group_describe_response as describe_msg
from kafkette.protocol.messages import consumer_group_heartbeat_response as heartbeat_msg
from kafkette.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.describe import DescribedGroup, TopicPartitions
from kafkette.server.groups.consumer_protocol.heartbeat import HeartbeatRequest, HeartbeatResponse


def heartbeat_request(
    message: ConsumerGroupHeartbeatRequest, api_version: int, client_id: str, client_host: str
) -> HeartbeatRequest:
    """The coordinator's view of a decoded ConsumerGroupHeartbeat."""
    owned = (
        None
        if message.topic_partitions is None
        else partitions.make((tp.topic_id, tp.partitions) for tp in message.topic_partitions)
    )
    return HeartbeatRequest(
        group_id=message.group_id,
        member_id=message.member_id,
        member_epoch=message.member_epoch,
        instance_id=message.instance_id,
        rack_id=message.rack_id,
        rebalance_timeout_ms=message.rebalance_timeout_ms,
        subscribed_topic_names=(
            None
            if message.subscribed_topic_names is None
            else tuple(message.subscribed_topic_names)
        ),
        subscribed_topic_regex=message.subscribed_topic_regex,
        server_assignor=message.server_assignor,
        owned=owned,
        client_id=client_id,
        client_host=client_host,
        api_version=api_version,
    )


def heartbeat_response(response: HeartbeatResponse) -> heartbeat_msg.ConsumerGroupHeartbeatResponse:
    """The ConsumerGroupHeartbeat response for a heartbeat that succeeded."""
    assignment = (
        None
        if response.assignment is None
        else heartbeat_msg.Assignment(
            topic_partitions=[
                heartbeat_msg.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(response.assignment.items())
            ]
        )
    )
    return heartbeat_msg.ConsumerGroupHeartbeatResponse(
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
        assignment=assignment,
    )


def heartbeat_error(error: ApiError) -> heartbeat_msg.ConsumerGroupHeartbeatResponse:
    """The ConsumerGroupHeartbeat response for a refused heartbeat."""
    return heartbeat_msg.ConsumerGroupHeartbeatResponse(
        error_code=error.code, error_message=error.detail
    )


def described_group(group: DescribedGroup) -> describe_msg.DescribedGroup:
    """One group of a ConsumerGroupDescribe response."""

    def assignment(tps: tuple[TopicPartitions, ...]) -> describe_msg.Assignment:
        return describe_msg.Assignment(
            topic_partitions=[
                describe_msg.TopicPartitions(
                    topic_id=tp.topic_id, topic_name=tp.topic_name, partitions=list(tp.partitions)
                )
                for tp in tps
            ]
        )

    return describe_msg.DescribedGroup(
        group_id=group.group_id,
        group_state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=[
            describe_msg.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assignment),
                target_assignment=assignment(m.target_assignment),
            )
            for m in group.members
        ],
    )
