"""ConsumerGroupHeartbeat (68): the consumer group protocol of KIP-848.

The request goes to the broker's
:class:`~kafkette.server.groups.consumer_protocol.ConsumerGroupCoordinator`. A group id
held by a classic group with members is first upgraded to a consumer group when
``group.consumer.migration.policy`` allows, or refused with GROUP_ID_NOT_FOUND, as Kafka 4
answers (:mod:`kafkette.server.groups.migration`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    TopicAuthorizationFailedError,
)
from kafkette.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.groups.consumer_protocol import wire
from kafkette.server.handlers import consumer_group_hooks as consumer_groups
from kafkette.server.handlers.groups import client_host

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(ConsumerGroupHeartbeatRequest)
async def handle_consumer_group_heartbeat(
    broker: Broker, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    coordinator = broker.consumer_groups
    try:
        # As Kafka: READ on the group, DESCRIBE on every topic it subscribes to by name.
        if not ctx.allows(AclOperation.READ, ResourceType.GROUP, request.group_id):
            raise GroupAuthorizationFailedError()
        refused = sorted(
            name
            for name in request.subscribed_topic_names or ()
            if not ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        )
        if refused:
            raise TopicAuthorizationFailedError(
                f"The group is not authorized to describe topics {', '.join(refused)}."
            )
        if request.group_id in broker.share_groups.groups:
            # As Kafka's GroupMetadataManager: the id is held by a group of another type.
            raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group.")
        if broker.consumer_topics.refresh():
            coordinator.topics_changed()
        heartbeat = wire.heartbeat_request(
            request, ctx.api_version, ctx.client_id or "", client_host(ctx)
        )
        migration = consumer_groups.attach(broker)
        return wire.heartbeat_response(migration.consumer_heartbeat(broker.now_ms(), heartbeat))
    except ApiError as error:
        return wire.heartbeat_error(error)
