"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share groups' membership (KIP-932).

Both go to the broker's :class:`~kafkette.server.share.coordinator.ShareCoordinator`.
As Kafka: a heartbeat needs READ on the group and DESCRIBE on every topic it subscribes
to; a description needs DESCRIBE on the group. A group id that is not a share group is
GROUP_ID_NOT_FOUND in a description, and in a heartbeat when a consumer or classic group
holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    TopicAuthorizationFailedError,
)
from kafkette.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kafkette.protocol.messages.share_group_describe_response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.handlers import consumer_group_hooks as consumer_groups
from kafkette.server.handlers.groups import client_host
from kafkette.server.share import wire
from kafkette.server.share.group import TopicImage

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

DEAD = "Dead"

GROUP_OPERATIONS = sum(
    1 << op for op in (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
)
"""What a share group supports in ``authorized_operations`` (Kafka's share-group ACL ops)."""


def topic_images(broker: Broker) -> dict[str, TopicImage]:
    """The cluster's topics as a share group sees them."""
    return {
        name: TopicImage(topic.topic_id, len(topic.partitions))
        for name, topic in broker.cluster.topics.items()
        if not topic.is_internal
    }


@handler(ShareGroupHeartbeatRequest)
async def handle_share_group_heartbeat(
    broker: Broker, ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    if not ctx.allows(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = GroupAuthorizationFailedError()
        return ShareGroupHeartbeatResponse(error_code=error.code, error_message=None)
    refused = sorted(
        name
        for name in request.subscribed_topic_names or ()
        if not ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    )
    if refused:
        message = f"The group is not authorized to describe topics {', '.join(refused)}."
        return ShareGroupHeartbeatResponse(
            error_code=TopicAuthorizationFailedError.code, error_message=message
        )
    if not_a_share_group(broker, request.group_id):
        return ShareGroupHeartbeatResponse(
            error_code=GroupIdNotFoundError.code,
            error_message=f"Group {request.group_id} is not a share group.",
        )
    # The group's share partitions are kept in __share_group_state from its first
    # assignment on: the topic is made before, off the event loop.
    await broker.share_state_topic.ready(broker.topic_changes)
    return broker.share_groups.heartbeat(
        request,
        topic_images(broker),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
    )


def not_a_share_group(broker: Broker, group_id: str) -> bool:
    """Whether ``group_id`` is held by a group of another type (a consumer group, or a
    classic group, also an Empty one keeping offsets): Kafka's GROUP_ID_NOT_FOUND."""
    if not group_id or group_id in broker.share_groups.groups:
        return False
    if consumer_groups.is_consumer_group(broker, group_id):
        return True
    return broker.groups.describe_group(group_id).state != DEAD


@handler(ShareGroupDescribeRequest)
async def handle_share_group_describe(
    broker: Broker, ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    names = {topic.topic_id: name for name, topic in broker.cluster.topics.items()}
    described = []
    for group_id in request.group_ids:
        if not ctx.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(_error(group_id, GroupAuthorizationFailedError.code))
            continue
        group = broker.share_groups.groups.get(group_id)
        if group is None:
            entry = _error(group_id, GroupIdNotFoundError.code)
            entry.error_message = f"Group {group_id} not found."
            described.append(entry)
            continue
        operations = -(2**31)
        if request.include_authorized_operations:
            operations = ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS)
        described.append(wire.described_group(group, names, operations))
    return ShareGroupDescribeResponse(groups=described)


def _error(group_id: str, code: int) -> DescribedGroup:
    return DescribedGroup(error_code=code, group_id=group_id)
