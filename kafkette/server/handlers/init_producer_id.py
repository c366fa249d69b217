"""InitProducerId (key 22) for idempotent and transactional producers.

Without a transactional id (null) every request gets a new producer id at
epoch 0, as Kafka's coordinator does (also when the producer passes its
current id and epoch, KIP-360: a fresh id is as good as a bumped epoch). Ids
come from :class:`~kafkette.server.producer_ids.ProducerIdManager`, unique
across restarts. With a transactional id the broker's
:class:`~kafkette.server.txn.coordinator.TransactionCoordinator` answers
(an empty one is ``INVALID_REQUEST``, as in Kafka); clients before v4 get
``INVALID_PRODUCER_EPOCH`` where it says ``PRODUCER_FENCED``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkette.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

FIRST_PRODUCER_FENCED_VERSION = 4


@handler(InitProducerIdRequest)
async def handle_init_producer_id(
    broker: Broker, ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if not ctx.allows(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            return _refused(TransactionalIdAuthorizationFailedError.code)
        result = broker.transactions.init_producer_id(
            request.transactional_id,
            request.transaction_timeout_ms,
            request.producer_id,
            request.producer_epoch,
        )
        error = result.error
        if error == ProducerFencedError.code and ctx.api_version < FIRST_PRODUCER_FENCED_VERSION:
            error = InvalidProducerEpochError.code
        return InitProducerIdResponse(
            error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )
    if not _may_write_idempotently(ctx):
        return _refused(ClusterAuthorizationFailedError.code)
    await broker.producer_ids.reserved()  # a new block's file write, in a worker thread
    return InitProducerIdResponse(
        error_code=0, producer_id=broker.producer_ids.next_id(), producer_epoch=0
    )


def _may_write_idempotently(ctx: RequestContext) -> bool:
    """Kafka's rule for an idempotent producer: IDEMPOTENT_WRITE on the cluster, or
    WRITE on some topic."""
    if ctx.authorizer is None:
        return True
    if ctx.allows(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME):
        return True
    return ctx.authorizer.authorize_any(
        ctx.principal, ctx.host, AclOperation.WRITE, ResourceType.TOPIC
    )


def _refused(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
