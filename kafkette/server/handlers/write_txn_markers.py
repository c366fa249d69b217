"""WriteTxnMarkers (key 27): end a producer's transaction in the given partitions.

Kafka's transaction coordinator sends it to partition leaders; an admin client
sends it too, to abort a *hanging* transaction (one whose coordinator lost
track of it, so the partition's last stable offset is stuck): Kafka's
``Admin.abortTransaction`` and ``kafka-transactions.sh abort``.

Each partition gets the control batch (:class:`~kafkette.server.txn.markers.MarkerWriter`)
unless the marker is stale, checked as Kafka's producer state does: a
producer epoch older than the one the partition knows is
``INVALID_PRODUCER_EPOCH``, a coordinator epoch older than the one of the
producer's last marker is ``TRANSACTION_COORDINATOR_FENCED``. A marker for a
producer with no open transaction in the partition is still written (it ends
nothing), as in Kafka.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkette.protocol.messages.write_txn_markers_request import WritableTxnMarker
from kafkette.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker
    from kafkette.server.cluster import Partition

logger = logging.getLogger("kafkette.server.write_txn_markers")


@handler(WriteTxnMarkersRequest)
async def handle_write_txn_markers(
    broker: Broker, ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[_write(broker, ctx, marker) for marker in request.markers]
    )


def _write(
    broker: Broker, ctx: RequestContext, marker: WritableTxnMarker
) -> WritableTxnMarkerResult:
    topics: list[WritableTxnMarkerTopicResult] = []
    nodes = broker.nodes
    node = ctx.node_id if nodes.multi else None
    # As Kafka: ALTER or CLUSTER_ACTION on the cluster (brokers and admin tools write markers).
    allowed = ctx.allows(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME) or ctx.allows(
        AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    )
    for wanted in marker.topics:
        topic = broker.cluster.topics.get(wanted.name)
        results: list[WritableTxnMarkerPartitionResult] = []
        for index in wanted.partition_indexes:
            error: ApiError | None
            if not allowed:
                error = ClusterAuthorizationFailedError()
            elif topic is None or not 0 <= index < len(topic.partitions):
                error = UnknownTopicOrPartitionError()
            elif node is not None and not nodes.leads(node, topic.partitions[index]):
                error = NotLeaderOrFollowerError()
            else:
                error = _stale(topic.partitions[index], marker)
            if error is None:
                try:
                    broker.markers.write(
                        [(wanted.name, index)],
                        producer_id=marker.producer_id,
                        producer_epoch=marker.producer_epoch,
                        coordinator_epoch=marker.coordinator_epoch,
                        commit=marker.transaction_result,
                    )
                except ApiError as exc:
                    error = exc
                except Exception:
                    logger.exception("WriteTxnMarkers on %s-%d failed", wanted.name, index)
                    error = UnknownServerError()
            results.append(WritableTxnMarkerPartitionResult(index, error.code if error else 0))
        topics.append(WritableTxnMarkerTopicResult(wanted.name, results))
    return WritableTxnMarkerResult(marker.producer_id, topics)


def _stale(partition: Partition, marker: WritableTxnMarker) -> ApiError | None:
    known = partition.log.producer_state().producers.get(marker.producer_id)
    if known is None:
        return None
    if marker.producer_epoch < known.producer_epoch:
        return InvalidProducerEpochError(
            f"marker epoch {marker.producer_epoch} is older than producer "
            f"{marker.producer_id}'s epoch {known.producer_epoch}"
        )
    if marker.coordinator_epoch < known.coordinator_epoch:
        return TransactionCoordinatorFencedError(
            f"coordinator epoch {marker.coordinator_epoch} is older than "
            f"{known.coordinator_epoch}, the epoch of the producer's last marker"
        )
    return None
