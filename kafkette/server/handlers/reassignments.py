"""AlterPartitionReassignments (45) and ListPartitionReassignments (46).

A reassignment names a partition's new replica list, and on a core standing
for several nodes (:class:`~kafkette.server.nodes.NodeTable`) it completes at
once, the data being one log: the named nodes replicate it, the running ones
in sync; the leader stays if it is among them, else the first running one
leads, its leader epoch bumped, and requests at the old leader get
NOT_LEADER_OR_FOLLOWER. Naming one node is how a test moves a leader on
``kafkette serve --nodes N`` with Kafka's own admin API. So no reassignment
is ever in progress: cancelling one (null replicas) is
NO_REASSIGNMENT_IN_PROGRESS, and the list is empty. An unknown node, one
named twice, or only stopped ones are INVALID_REPLICA_ASSIGNMENT; a lone
broker takes only itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    ClusterAuthorizationFailedError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafkette.protocol.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(AlterPartitionReassignmentsRequest)
async def handle_alter_partition_reassignments(
    broker: Broker, ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.allows(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ClusterAuthorizationFailedError()
        return AlterPartitionReassignmentsResponse(
            error_code=refused.code,
            error_message=refused.description,
            responses=[
                ReassignableTopicResponse(
                    t.name,
                    [
                        ReassignablePartitionResponse(p.partition_index, refused.code, None)
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )
    moved = False
    topics: list[ReassignableTopicResponse] = []
    for wanted in request.topics:
        results: list[ReassignablePartitionResponse] = []
        for asked in wanted.partitions:
            try:
                moved |= _reassign(broker, wanted.name, asked.partition_index, asked.replicas)
            except ApiError as exc:
                results.append(
                    ReassignablePartitionResponse(asked.partition_index, exc.code, exc.detail)
                )
            else:
                results.append(ReassignablePartitionResponse(asked.partition_index, 0, None))
        topics.append(ReassignableTopicResponse(wanted.name, results))
    if moved:
        broker.data_changed.notify()  # long polls at the old leaders answer now
    return AlterPartitionReassignmentsResponse(error_message=None, responses=topics)


def _reassign(broker: Broker, topic: str, index: int, replicas: list[int] | None) -> bool:
    """Give the partition the replicas named, at once; whether its leader changed."""
    found = broker.cluster.topics.get(topic)
    if found is None or not 0 <= index < len(found.partitions):
        raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {index}")
    if replicas is None:
        raise NoReassignmentInProgressError(
            f"no reassignment of {topic}-{index} is in progress (they complete at once)"
        )
    nodes = broker.nodes
    if not nodes.multi:
        if replicas != [broker.node_id]:
            raise InvalidReplicaAssignmentError(
                f"broker {replicas[0]} is not registered (the only one is {broker.node_id})"
                if len(replicas) == 1
                else f"this broker keeps one replica per partition: name one node, not {replicas}"
            )
        return False
    return nodes.reassign(found.partitions[index], replicas)


@handler(ListPartitionReassignmentsRequest)
async def handle_list_partition_reassignments(
    broker: Broker, ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not ctx.allows(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ClusterAuthorizationFailedError()
        return ListPartitionReassignmentsResponse(
            error_code=refused.code, error_message=refused.description, topics=[]
        )
    return ListPartitionReassignmentsResponse(error_message=None, topics=[])
