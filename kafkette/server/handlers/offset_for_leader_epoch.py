"""OffsetForLeaderEpoch (key 23).

Consumers use it to check, after a leader change, that their position is
still on the leader's log (KIP-320). For a requested leader epoch the answer
is the largest epoch <= it that the log knows and the end offset of that
epoch: the start of the next epoch, or the log end for the current one. An
epoch older than every known one answers the requested epoch and the start
of the first known; one newer than the current epoch, or any epoch of a log
that never had an append, answers -1/-1 (Kafka's UNDEFINED).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkette.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from kafkette.server.cluster import Partition
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

UNDEFINED = (-1, -1)


class _EpochEntry(Protocol):
    epoch: int
    start_offset: int


@handler(OffsetForLeaderEpochRequest)
async def handle_offset_for_leader_epoch(
    broker: Broker, ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics: list[OffsetForLeaderTopicResult] = []
    nodes = broker.nodes
    node = ctx.node_id if nodes.multi else None
    # As Kafka (KIP-320): a broker asks with CLUSTER_ACTION, a consumer with DESCRIBE.
    replica = ctx.allows(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    for wanted in request.topics:
        topic = broker.cluster.topics.get(wanted.topic)
        allowed = replica or ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted.topic)
        results: list[EpochEndOffset] = []
        for asked in wanted.partitions:
            index = asked.partition
            try:
                if not allowed:
                    raise TopicAuthorizationFailedError()
                if topic is None or not 0 <= index < len(topic.partitions):
                    raise UnknownTopicOrPartitionError()
                partition = topic.partitions[index]
                if node is not None and not nodes.leads(node, partition):
                    raise NotLeaderOrFollowerError()
                current = asked.current_leader_epoch
                if current >= 0 and current != partition.leader_epoch:
                    if current < partition.leader_epoch:
                        raise FencedLeaderEpochError()
                    raise UnknownLeaderEpochError()
                epoch, end = end_offset_for(partition, asked.leader_epoch)
            except ApiError as exc:
                results.append(EpochEndOffset(exc.code, index, -1, -1))
                continue
            results.append(EpochEndOffset(0, index, epoch, end))
        topics.append(OffsetForLeaderTopicResult(wanted.topic, results))
    return OffsetForLeaderEpochResponse(topics=topics)


def end_offset_for(partition: Partition, requested: int) -> tuple[int, int]:
    """``(epoch, end offset)`` for ``requested`` on this partition's log."""
    log = partition.log
    entries: Sequence[_EpochEntry] = getattr(log, "leader_epochs", ())
    if requested < 0 or requested > partition.leader_epoch:
        return UNDEFINED
    if not entries:
        return UNDEFINED
    if requested >= entries[-1].epoch:
        return entries[-1].epoch, log.log_end_offset
    if requested < entries[0].epoch:
        return requested, entries[0].start_offset
    for previous, following in itertools.pairwise(entries):
        if previous.epoch <= requested < following.epoch:
            return previous.epoch, following.start_offset
    return UNDEFINED
