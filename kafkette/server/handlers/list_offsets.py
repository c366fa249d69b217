"""ListOffsets (key 2): earliest, latest, by timestamp, max timestamp.

Special timestamps: -2 earliest (the log start offset), -1 latest (the high
watermark, or the last stable offset with ``read_committed``), -3 the record
with the largest timestamp (v7+), -4 earliest local (= earliest: nothing is
tiered), -5 latest tiered (nothing is tiered: offset -1). A timestamp >= 0
finds the first record, in offset order, whose timestamp is at least it;
none (or only records the consumer may not read yet) answers offset -1 and
timestamp -1, as Kafka does.

Version 0 answers with ``old_style_offsets``: the one offset found (Kafka
listed segment base offsets up to ``max_num_offsets``; one offset is what
every client asks for).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition
from kafkette.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kafkette.server.cluster import Partition
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.list_offsets")

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1
LEADER_EPOCH_VERSION = 4


@handler(ListOffsetsRequest)
async def handle_list_offsets(
    broker: Broker, ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    version = ctx.api_version
    read_committed = request.isolation_level == READ_COMMITTED
    topics: list[ListOffsetsTopicResponse] = []
    nodes = broker.nodes
    node = ctx.node_id if nodes.multi else None
    for wanted in request.topics:
        topic = broker.cluster.topics.get(wanted.name)
        allowed = ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted.name)
        results: list[ListOffsetsPartitionResponse] = []
        for asked in wanted.partitions:
            index = asked.partition_index
            if not allowed:
                results.append(_error(index, TopicAuthorizationFailedError()))
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                results.append(_error(index, UnknownTopicOrPartitionError()))
                continue
            if node is not None and not nodes.leads(node, topic.partitions[index]):
                results.append(_error(index, NotLeaderOrFollowerError()))
                continue
            try:
                timestamp, offset, epoch = lookup(topic.partitions[index], asked, read_committed)
            except ApiError as exc:
                results.append(_error(index, exc))
                continue
            except Exception:  # e.g. an I/O error reading the log: answer, do not drop
                logger.exception("ListOffsets on %s-%d failed", wanted.name, index)
                results.append(_error(index, UnknownServerError()))
                continue
            if version == 0:
                results.append(
                    ListOffsetsPartitionResponse(
                        partition_index=index,
                        error_code=0,
                        old_style_offsets=[offset] if offset >= 0 else [],
                    )
                )
            else:
                results.append(
                    ListOffsetsPartitionResponse(
                        partition_index=index,
                        error_code=0,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=epoch if version >= LEADER_EPOCH_VERSION else -1,
                    )
                )
        topics.append(ListOffsetsTopicResponse(wanted.name, results))
    return ListOffsetsResponse(topics=topics)


def lookup(
    partition: Partition, asked: ListOffsetsPartition, read_committed: bool
) -> tuple[int, int, int]:
    """``(timestamp, offset, leader epoch)`` answering one partition's query."""
    current = asked.current_leader_epoch
    if current >= 0 and current != partition.leader_epoch:
        if current < partition.leader_epoch:
            raise FencedLeaderEpochError()
        raise UnknownLeaderEpochError()
    log = partition.log
    epoch = partition.leader_epoch
    wanted = asked.timestamp
    upper = log.last_stable_offset if read_committed else log.high_watermark
    if wanted in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset, epoch
    if wanted == LATEST:
        return -1, upper, epoch
    if wanted == LATEST_TIERED:
        return -1, -1, -1
    if wanted == MAX_TIMESTAMP:
        found = log.max_timestamp()
    elif wanted >= 0:
        found = log.offset_for_timestamp(wanted)
    else:
        return -1, -1, -1
    if found is None or found.offset >= upper:
        return -1, -1, -1
    return found.timestamp, found.offset, found.leader_epoch


def _error(index: int, error: ApiError) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(partition_index=index, error_code=error.code)
