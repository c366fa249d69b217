"""ConsumerGroupDescribe (69): groups of the consumer protocol (KIP-848) described."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import GroupAuthorizationFailedError, GroupIdNotFoundError, NotCoordinatorError
from kafkette.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kafkette.protocol.messages.consumer_group_describe_response import DescribedGroup
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.groups.consumer_protocol import wire
from kafkette.server.handlers.groups import GROUP_KEY, GROUP_OPERATIONS
from kafkette.server.handlers.metadata import NOT_REQUESTED

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(ConsumerGroupDescribeRequest)
async def handle_consumer_group_describe(
    broker: Broker, ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    if broker.consumer_topics.refresh():
        broker.consumer_groups.topics_changed()
    described = []
    for group_id in request.group_ids:
        if not ctx.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused = GroupAuthorizationFailedError()
            described.append(DescribedGroup(group_id=group_id, error_code=refused.code))
            continue
        if not broker.nodes.coordinates(ctx.node_id, GROUP_KEY, group_id):
            described.append(DescribedGroup(group_id=group_id, error_code=NotCoordinatorError.code))
            continue
        try:
            group = wire.described_group(broker.consumer_groups.describe(group_id))
        except GroupIdNotFoundError as error:
            described.append(
                DescribedGroup(group_id=group_id, error_code=error.code, error_message=error.detail)
            )
            continue
        if request.include_authorized_operations:
            group.authorized_operations = ctx.authorized_operations(
                ResourceType.GROUP, group_id, GROUP_OPERATIONS
            )
        else:
            group.authorized_operations = NOT_REQUESTED
        described.append(group)
    return ConsumerGroupDescribeResponse(groups=described)
