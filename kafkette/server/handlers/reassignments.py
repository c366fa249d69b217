"""AlterPartitionReassignments (45) and ListPartitionReassignments (46).

Every partition here has one replica, its leader. A reassignment names the
new replica list; the only one this broker can make is one live node, and it
completes at once: that node becomes the partition's leader, its leader epoch
is bumped, and requests for it at the old leader get NOT_LEADER_OR_FOLLOWER
(on a core standing for several nodes, :class:`~kafkette.server.nodes.NodeTable`;
this is how a test moves a leader on ``kafkette serve --nodes N``, with
Kafka's own admin API). So no reassignment is ever in progress: cancelling
one (null replicas) is NO_REASSIGNMENT_IN_PROGRESS, and the list is empty.
More than one replica, an unknown or a stopped node is
INVALID_REPLICA_ASSIGNMENT.
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
    """Make the one replica named lead the partition; whether its leader changed."""
    found = broker.cluster.topics.get(topic)
    if found is None or not 0 <= index < len(found.partitions):
        raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {index}")
    if replicas is None:
        raise NoReassignmentInProgressError(
            f"no reassignment of {topic}-{index} is in progress (they complete at once)"
        )
    nodes = broker.nodes
    if len(replicas) != 1:
        raise InvalidReplicaAssignmentError(
            f"this broker keeps one replica per partition: name one node, not {replicas}"
        )
    node = replicas[0]
    if not nodes.multi:
        if node != broker.node_id:
            raise InvalidReplicaAssignmentError(
                f"broker {node} is not registered (the only one is {broker.node_id})"
            )
        return False
    if node not in nodes.addresses or not nodes.is_live(node):
        raise InvalidReplicaAssignmentError(
            f"replica assignment {replicas} has brokers that are not alive (live: {nodes.live()})"
        )
    return nodes.move_leader(found.partitions[index], node)


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
