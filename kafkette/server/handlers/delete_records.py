"""DeleteRecords (key 21): move a partition's log start offset.

Offset -1 means the high watermark. An offset past the high watermark (or
otherwise negative) is ``OFFSET_OUT_OF_RANGE``; the answer's low watermark is
the new log start offset (-1 on error). As in Kafka, a topic whose
``cleanup.policy`` lacks ``delete`` (compact only) refuses with
``POLICY_VIOLATION``.

On disk the new log start's producer snapshot and checkpoints are written and
fsynced in a worker thread (:meth:`Log.delete_records_steps
<kafkette.backends.log.Log.delete_records_steps>`), not on the event loop; the
answer waits for them, so an acknowledged deletion survives a crash.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from kafkette.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.maintenance import drive

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.delete_records")


@handler(DeleteRecordsRequest)
async def handle_delete_records(
    broker: Broker, ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics: list[DeleteRecordsTopicResult] = []
    nodes = broker.nodes
    node = ctx.node_id if nodes.multi else None
    for wanted in request.topics:
        topic = broker.cluster.topics.get(wanted.name)
        allowed = ctx.allows(AclOperation.DELETE, ResourceType.TOPIC, wanted.name)
        results: list[DeleteRecordsPartitionResult] = []
        for asked in wanted.partitions:
            index = asked.partition_index
            error: ApiError
            if not allowed:
                error = TopicAuthorizationFailedError()
            elif topic is None or not 0 <= index < len(topic.partitions):
                error = UnknownTopicOrPartitionError()
            elif node is not None and not nodes.leads(node, topic.partitions[index]):
                error = NotLeaderOrFollowerError()
            else:
                log = topic.partitions[index].log
                try:
                    if not log.config.delete:
                        raise PolicyViolationError(
                            f"records of {wanted.name}-{index} cannot be deleted: "
                            "its cleanup.policy does not include delete"
                        )
                    low = await drive(log.delete_records_steps(asked.offset))
                except ApiError as exc:
                    error = exc
                except Exception:
                    logger.exception("DeleteRecords on %s-%d failed", wanted.name, index)
                    error = UnknownServerError()
                else:
                    results.append(DeleteRecordsPartitionResult(index, low, 0))
                    continue
            results.append(DeleteRecordsPartitionResult(index, -1, error.code))
        topics.append(DeleteRecordsTopicResult(wanted.name, results))
    return DeleteRecordsResponse(topics=topics)
