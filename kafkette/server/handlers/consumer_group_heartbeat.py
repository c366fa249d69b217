"""ConsumerGroupHeartbeat (68): the consumer group protocol of KIP-848.

The request goes to the broker's
:class:`~kafkette.server.groups.consumer_protocol.ConsumerGroupCoordinator`. A group id
held by a classic group with members is refused with GROUP_ID_NOT_FOUND, as Kafka 4
answers when migration does not apply; online migration between classic and consumer
groups is not served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.errors import ApiError, GroupIdNotFoundError
from kafkette.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.groups.consumer_protocol import wire
from kafkette.server.handlers.groups import client_host

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


def classic_group_with_members(broker: Broker, group_id: str) -> bool:
    """Whether ``group_id`` names a classic group that has (or is taking) members."""
    group = broker.groups.engine.groups.get(group_id)
    return group is not None and bool(group.members or group.pending_members)


@handler(ConsumerGroupHeartbeatRequest)
async def handle_consumer_group_heartbeat(
    broker: Broker, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    coordinator = broker.consumer_groups
    try:
        if classic_group_with_members(broker, request.group_id):
            raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group")
        if broker.consumer_topics.refresh():
            coordinator.topics_changed()
        heartbeat = wire.heartbeat_request(
            request, ctx.api_version, ctx.client_id or "", client_host(ctx)
        )
        return wire.heartbeat_response(coordinator.heartbeat(broker.now_ms(), heartbeat))
    except ApiError as error:
        return wire.heartbeat_error(error)
