"""InitProducerId (key 22) for idempotent producers.

Without a transactional id every request gets a new producer id at epoch 0,
as Kafka's coordinator does (also when the producer passes its current id
and epoch, KIP-360: a fresh id is as good as a bumped epoch). Ids come from
:class:`~kafkette.server.producer_ids.ProducerIdManager`, unique across
restarts. A transactional id is the transaction coordinator's business: when
the broker has none, the answer is ``COORDINATOR_NOT_AVAILABLE``.
"""

from __future__ import annotations

from kafkette.errors import CoordinatorNotAvailableError
from kafkette.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from kafkette.server.broker import Broker, RequestContext, handler


@handler(InitProducerIdRequest)
async def handle_init_producer_id(
    broker: Broker, ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id:
        coordinator = getattr(broker, "init_transactional_producer", None)
        if coordinator is None:
            return InitProducerIdResponse(
                error_code=CoordinatorNotAvailableError.code, producer_id=-1, producer_epoch=-1
            )
        response: InitProducerIdResponse = await coordinator(ctx, request)
        return response
    return InitProducerIdResponse(
        error_code=0, producer_id=broker.producer_ids.next_id(), producer_epoch=0
    )
