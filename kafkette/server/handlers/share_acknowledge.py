"""ShareAcknowledge (79): acknowledgements of acquired records outside a fetch (KIP-932).

READ on the group, then the share session's epoch (a ShareAcknowledge never opens a
session: epoch 0 is INVALID_SHARE_SESSION_EPOCH), then each partition's
acknowledgements as ShareFetch applies them (:mod:`.share_fetch`). Epoch -1 then ends
the session: the member's records still acquired go back.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import ApiError, GroupAuthorizationFailedError, InvalidRequestError
from kafkette.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from kafkette.protocol.messages.share_acknowledge_response import (
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.handlers.share_fetch import apply_acknowledgements
from kafkette.server.share import wire
from kafkette.server.share.sessions import FINAL_EPOCH
from kafkette.server.share.state import Acknowledgement

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(ShareAcknowledgeRequest)
async def handle_share_acknowledge(
    broker: Broker, ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    coordinator = broker.share_groups
    group_id, member_id = request.group_id or "", request.member_id or ""
    lock_ms = coordinator.lock_duration_ms(group_id)
    if not ctx.allows(AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareAcknowledgeResponse(error_code=GroupAuthorizationFailedError.code)
    acks: dict[uuid.UUID, dict[int, list[Acknowledgement]]] = {}
    try:
        if not group_id or not member_id:
            raise InvalidRequestError("ShareAcknowledge needs a group id and a member id.")
        for topic in request.topics:
            for part in topic.partitions:
                acks.setdefault(topic.topic_id, {})[part.partition_index] = wire.acknowledgements(
                    part.acknowledgement_batches, ctx.api_version
                )
        coordinator.sessions.acknowledge(group_id, member_id, request.share_session_epoch)
    except ApiError as error:
        return ShareAcknowledgeResponse(error_code=error.code, error_message=str(error) or None)
    responses = [
        ShareAcknowledgeTopicResponse(
            topic_id,
            [
                PartitionData(
                    partition_index=index,
                    error_code=apply_acknowledgements(
                        broker, ctx, group_id, member_id, (topic_id, index), batches
                    ),
                )
                for index, batches in partitions.items()
            ],
        )
        for topic_id, partitions in acks.items()
    ]
    if request.share_session_epoch == FINAL_EPOCH:
        coordinator.close_session(group_id, member_id)
    return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=lock_ms, responses=responses)
