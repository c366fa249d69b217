"""Coordinator requests that reached the wrong node, answered NOT_COORDINATOR.

When the broker core stands for several nodes (:class:`~kafkette.server.nodes.NodeTable`),
each group and transactional id has one coordinator node. A request about
one key (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat,
OffsetCommit, OffsetFetch, OffsetDelete for a group; InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn for a transactional id; TxnOffsetCommit for its
group) sent to another node is not served: it is answered NOT_COORDINATOR,
where Kafka puts that code for the API (per partition where the answer is per
partition), so the client finds the coordinator again. DescribeGroups and
ConsumerGroupDescribe answer per group in their handlers. Partition requests
are checked per partition by their handlers (NOT_LEADER_OR_FOLLOWER).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkette.errors import NotCoordinatorError
from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    ConsumerGroupHeartbeatRequest,
    EndTxnRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkette.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from kafkette.protocol.messages.offset_fetch_response import OffsetFetchResponseGroup
from kafkette.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kafkette.protocol.schema import Request, Response
from kafkette.server.faults.table import error_response
from kafkette.server.nodes import GROUP, TRANSACTION, NodeTable

NOT_COORDINATOR = NotCoordinatorError.code
OFFSET_FETCH_GROUPS_VERSION = 8
ADD_PARTITIONS_BATCH_VERSION = 4

_Keys = Callable[[Any, int], list[tuple[int, str]]]
"""The (key type, key) pairs a request is about, given its version."""


def _group(request: Any, _: int) -> list[tuple[int, str]]:
    return [(GROUP, request.group_id)]


def _transaction(request: Any, _: int) -> list[tuple[int, str]]:
    return [(TRANSACTION, request.transactional_id)]


def _init_producer_id(request: Any, _: int) -> list[tuple[int, str]]:
    txn_id = request.transactional_id
    return [] if txn_id is None else [(TRANSACTION, txn_id)]


def _add_partitions(request: Any, version: int) -> list[tuple[int, str]]:
    if version >= ADD_PARTITIONS_BATCH_VERSION:
        return []  # brokers' verification requests (KIP-890), not served by clients' routing
    return [(TRANSACTION, request.v3_and_below_transactional_id)]


def _offset_fetch(request: Any, version: int) -> list[tuple[int, str]]:
    if version < OFFSET_FETCH_GROUPS_VERSION:
        return [(GROUP, request.group_id)]
    return [(GROUP, g.group_id) for g in request.groups]


KEYS: dict[int, _Keys] = {
    JoinGroupRequest.API_KEY: _group,
    SyncGroupRequest.API_KEY: _group,
    HeartbeatRequest.API_KEY: _group,
    LeaveGroupRequest.API_KEY: _group,
    ConsumerGroupHeartbeatRequest.API_KEY: _group,
    OffsetCommitRequest.API_KEY: _group,
    OffsetDeleteRequest.API_KEY: _group,
    OffsetFetchRequest.API_KEY: _offset_fetch,
    TxnOffsetCommitRequest.API_KEY: _group,
    InitProducerIdRequest.API_KEY: _init_producer_id,
    AddPartitionsToTxnRequest.API_KEY: _add_partitions,
    AddOffsetsToTxnRequest.API_KEY: _transaction,
    EndTxnRequest.API_KEY: _transaction,
}


def misrouted(
    nodes: NodeTable, node: int | None, request: Request, version: int
) -> Response | None:
    """The NOT_COORDINATOR answer when ``request`` reached a node that does not
    coordinate its key; None when it is to be served here."""
    keys_of = KEYS.get(request.API_KEY)
    if keys_of is None or node is None:
        return None
    keys = keys_of(request, version)
    if not keys or any(nodes.coordinates(node, kind, key) for kind, key in keys):
        # A batched OffsetFetch naming some group coordinated here is served whole:
        # the groups live in the one core.
        return None
    return _answer(request, version)


def _answer(request: Any, version: int) -> Response:
    key = request.API_KEY
    if key == OffsetFetchRequest.API_KEY and version >= OFFSET_FETCH_GROUPS_VERSION:
        return OffsetFetchResponse(
            groups=[
                OffsetFetchResponseGroup(group_id=g.group_id, error_code=NOT_COORDINATOR)
                for g in request.groups
            ]
        )
    if key == AddPartitionsToTxnRequest.API_KEY:
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                AddPartitionsToTxnTopicResult(
                    name=topic.name,
                    results_by_partition=[
                        AddPartitionsToTxnPartitionResult(p, NOT_COORDINATOR)
                        for p in topic.partitions
                    ],
                )
                for topic in request.v3_and_below_topics
            ]
        )
    if key == TxnOffsetCommitRequest.API_KEY:
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    name=topic.name,
                    partitions=[
                        TxnOffsetCommitResponsePartition(p.partition_index, NOT_COORDINATOR)
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ]
        )
    return error_response(request, NOT_COORDINATOR)
