"""The classic group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
OffsetCommit (8), OffsetFetch (9), DeleteGroups (42) and OffsetDelete (47).

Each handler turns a request of any version into a call on the broker's
:class:`~kafkette.server.groups.coordinator.GroupCoordinator` and its answer
into the response of that version. What depends on the cluster (does a topic
exist?) is checked here; the group rules live in the coordinator. This node
is the coordinator of every group and transactional id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    NotCoordinatorError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    make_error,
)
from kafkette.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkette.protocol.messages.delete_groups_response import DeletableGroupResult
from kafkette.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
)
from kafkette.protocol.messages.find_coordinator_response import Coordinator
from kafkette.protocol.messages.join_group_response import JoinGroupResponseMember
from kafkette.protocol.messages.leave_group_response import MemberResponse
from kafkette.protocol.messages.list_groups_response import ListedGroup
from kafkette.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kafkette.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.groups.engine import JoinParams
from kafkette.server.groups.queries import DEAD_GROUP
from kafkette.server.groups.store import CommittedOffset, PartitionKey
from kafkette.server.handlers import consumer_group_hooks as consumer_groups
from kafkette.server.handlers import share_group_hooks as share_groups
from kafkette.server.handlers.metadata import NOT_REQUESTED

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

GROUP_KEY = 0
TRANSACTION_KEY = 1
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
"""The ACL operations on a group, as bits: Kafka 4's READ, DELETE, DESCRIBE,
DESCRIBE_CONFIGS and ALTER_CONFIGS (the last two for KIP-848's group configs)."""
NO_RETENTION = -1
DEFAULT_TIMESTAMP = -1

READ, DESCRIBE = AclOperation.READ, AclOperation.DESCRIBE
TOPIC, GROUP, TRANSACTIONAL_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.TRANSACTIONAL_ID,
)


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it (Java's InetAddress: ``/127.0.0.1``)."""
    peer = ctx.client_host
    if "://" not in peer and peer.count(":") == 1:
        peer = peer.rpartition(":")[0]
    elif peer.startswith("[") and "]:" in peer:
        peer = peer[1 : peer.index("]:")]
    return "/" + peer


def partition_exists(broker: Broker, topic: str, partition: int) -> bool:
    known = broker.cluster.topics.get(topic)
    return known is not None and 0 <= partition < len(known.partitions)


# -- FindCoordinator ------------------------------------------------------------------


@handler(FindCoordinatorRequest)
async def handle_find_coordinator(
    broker: Broker, ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    host, port = broker.config.advertised
    valid = request.key_type in (GROUP_KEY, TRANSACTION_KEY)
    error = 0 if valid else InvalidRequestError.code
    node, host, port = (broker.node_id, host, port) if valid else (-1, "", -1)
    message = None if valid else f"unknown coordinator key type {request.key_type}"
    if ctx.api_version < 4:
        refusal = _coordinator_refusal(ctx, request.key_type, request.key) if valid else None
        if valid and refusal is None:
            await _coordinator_topic_ready(broker, request.key_type)
        if refusal is not None:  # with the error's message, as Kafka's error response
            return FindCoordinatorResponse(
                error_code=refusal,
                error_message=make_error(refusal).description,
                node_id=-1,
                host="",
                port=-1,
            )
        if valid and broker.nodes.multi:
            error, node, host, port = _coordinator_node(broker, request.key_type, request.key)
        # Kafka sets the message of NONE ("NONE") here, and none per key from v4.
        return FindCoordinatorResponse(
            error_code=error, error_message=message or "NONE", node_id=node, host=host, port=port
        )
    coordinators: list[Coordinator] = []
    for key in request.coordinator_keys:
        refusal = _coordinator_refusal(ctx, request.key_type, key) if valid else None
        if valid and refusal is None:
            await _coordinator_topic_ready(broker, request.key_type)
        if refusal is not None:
            coordinators.append(_coordinator(key, refusal, -1, "", -1))
        elif valid and broker.nodes.multi:
            coordinators.append(
                _coordinator(key, *_coordinator_node(broker, request.key_type, key))
            )
        else:
            coordinators.append(
                Coordinator(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
            )
    return FindCoordinatorResponse(coordinators=coordinators)


async def _coordinator_topic_ready(broker: Broker, key_type: int) -> None:
    """Create the coordinator's internal topic if it does not exist yet, as Kafka does
    when FindCoordinator first needs it, its logs opened off the event loop (on disk,
    50 partition logs stopped the loop for 20-35 ms when the first commit made them)."""
    topic = broker.offsets_topic if key_type == GROUP_KEY else broker.transaction_state_topic
    await topic.ready(broker.topic_changes)


def _coordinator_refusal(ctx: RequestContext, key_type: int, key: str) -> int | None:
    """As Kafka: finding a coordinator needs DESCRIBE on the group or transactional id."""
    if key_type == GROUP_KEY:
        if not ctx.allows(DESCRIBE, GROUP, key):
            return GroupAuthorizationFailedError.code
    elif not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, key):
        return TransactionalIdAuthorizationFailedError.code
    return None


def _coordinator_node(broker: Broker, key_type: int, key: str) -> tuple[int, int, str, int]:
    """(error code, node id, host, port) of the node coordinating ``key`` among several;
    COORDINATOR_NOT_AVAILABLE while every node is stopped."""
    node = broker.nodes.coordinator(key_type, key)
    if node < 0:
        return CoordinatorNotAvailableError.code, -1, "", -1
    return 0, node, *broker.nodes.addresses[node]


def _coordinator(key: str, error: int, node: int, host: str, port: int) -> Coordinator:
    return Coordinator(
        key=key, node_id=node, host=host, port=port, error_code=error, error_message=None
    )


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------


@handler(JoinGroupRequest)
async def handle_join_group(
    broker: Broker, ctx: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    consumer_groups.attach(broker)
    version = ctx.api_version
    if not ctx.allows(READ, GROUP, request.group_id):
        return JoinGroupResponse(
            error_code=GroupAuthorizationFailedError.code,
            protocol_name="" if version < 7 else None,
            member_id=request.member_id,
        )
    params = JoinParams(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=(
            request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms
        ),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    result = await broker.groups.join_group(params)
    protocol_name = result.protocol_name or ("" if version < 7 else None)
    return JoinGroupResponse(
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment if version >= 9 else False,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(member_id=m, group_instance_id=instance, metadata=metadata)
            for m, instance, metadata in result.members
        ],
    )


@handler(SyncGroupRequest)
async def handle_sync_group(
    broker: Broker, ctx: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    consumer_groups.attach(broker)
    if not ctx.allows(READ, GROUP, request.group_id):
        return SyncGroupResponse(error_code=GroupAuthorizationFailedError.code)
    result = await broker.groups.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: a.assignment for a in request.assignments},
    )
    return SyncGroupResponse(
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@handler(HeartbeatRequest)
async def handle_heartbeat(
    broker: Broker, ctx: RequestContext, request: HeartbeatRequest
) -> HeartbeatResponse:
    consumer_groups.attach(broker)
    if not ctx.allows(READ, GROUP, request.group_id):
        return HeartbeatResponse(error_code=GroupAuthorizationFailedError.code)
    error = broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(error_code=error)


@handler(LeaveGroupRequest)
async def handle_leave_group(
    broker: Broker, ctx: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    consumer_groups.attach(broker)
    if not ctx.allows(READ, GROUP, request.group_id):
        return LeaveGroupResponse(error_code=GroupAuthorizationFailedError.code)
    if ctx.api_version < 3:
        leaving: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    group_error, errors = broker.groups.leave_group(request.group_id, leaving)
    if ctx.api_version < 3:
        # One member and one error code: the group's, else the member's.
        return LeaveGroupResponse(error_code=group_error or (errors[0] if errors else 0))
    if group_error:
        return LeaveGroupResponse(error_code=group_error)
    return LeaveGroupResponse(
        members=[
            MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=error)
            for (member_id, instance_id), error in zip(leaving, errors, strict=True)
        ]
    )


# -- offsets ----------------------------------------------------------------------------


@handler(OffsetCommitRequest)
async def handle_offset_commit(
    broker: Broker, ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    version = ctx.api_version
    now = broker.groups.now_ms()
    retention = request.retention_time_ms if 2 <= version <= 4 else NO_RETENTION
    expire = None if retention == NO_RETENTION else now + retention
    if not ctx.allows(READ, GROUP, request.group_id):
        refused = GroupAuthorizationFailedError.code
        keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        return _offset_commit_response(request, dict.fromkeys(keys, refused))
    errors: dict[PartitionKey, int] = {}
    offsets: dict[PartitionKey, CommittedOffset] = {}
    for topic in request.topics:
        topic_allowed = ctx.allows(READ, TOPIC, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not topic_allowed:
                errors[key] = TopicAuthorizationFailedError.code
                continue
            if not partition_exists(broker, topic.name, p.partition_index):
                errors[key] = UnknownTopicOrPartitionError.code
                continue
            committed_at = p.commit_timestamp
            offsets[key] = CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=now if committed_at == DEFAULT_TIMESTAMP else committed_at,
                expire_timestamp_ms=expire,
            )
    consumer_error = consumer_groups.offset_commit_error(
        broker, request.group_id, request.member_id, request.generation_id_or_member_epoch, version
    )
    if consumer_error:
        errors = {
            (t.name, p.partition_index): consumer_error
            for t in request.topics
            for p in t.partitions
        }
    elif offsets and consumer_error is not None:  # a consumer group's, stored as a simple one's
        errors.update(broker.groups.commit_offsets(request.group_id, -1, "", None, offsets))
    elif offsets:
        errors.update(
            broker.groups.commit_offsets(
                request.group_id,
                request.generation_id_or_member_epoch,
                request.member_id,
                request.group_instance_id,
                offsets,
            )
        )
    return _offset_commit_response(request, errors)


def _offset_commit_response(
    request: OffsetCommitRequest, errors: dict[PartitionKey, int]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


Fetched = list[tuple[str, list[tuple[int, CommittedOffset | None, int]]]]


def _fetched(
    broker: Broker,
    ctx: RequestContext,
    group_id: str,
    topics: Iterable[tuple[str, list[int]]] | None,
    require_stable: bool,
) -> Fetched:
    """(topic, [(partition, committed or None, error)]) in request order (sorted for all).
    With ``require_stable`` (KIP-447), an offset an open transaction holds is
    UNSTABLE_OFFSET_COMMIT."""
    wanted = None if topics is None else [(t, p) for t, parts in topics for p in parts]
    found = broker.groups.fetch_offsets(group_id, wanted)
    keys = list(found) if topics is None else [(t, p) for t, parts in topics for p in parts]
    by_topic: dict[str, list[tuple[int, CommittedOffset | None, int]]] = {}
    for topic, partition in keys:
        # As Kafka: a topic the principal may not DESCRIBE is refused when named, left
        # out when the request asks for every topic.
        if not ctx.allows(DESCRIBE, TOPIC, topic):
            if topics is not None:
                entries = by_topic.setdefault(topic, [])
                entries.append((partition, None, TopicAuthorizationFailedError.code))
            continue
        entries = by_topic.setdefault(topic, [])
        if require_stable and broker.transactions.has_pending_offsets(group_id, (topic, partition)):
            entries.append((partition, None, UnstableOffsetCommitError.code))
        else:
            entries.append((partition, found.get((topic, partition)), 0))
    return list(by_topic.items())


@handler(OffsetFetchRequest)
async def handle_offset_fetch(
    broker: Broker, ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    stable = request.require_stable
    if ctx.api_version < 8:
        topics = (
            None
            if request.topics is None
            else [(t.name, list(t.partition_indexes)) for t in request.topics]
        )
        if not ctx.allows(DESCRIBE, GROUP, request.group_id):
            return OffsetFetchResponse(error_code=GroupAuthorizationFailedError.code)
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(
                    name=topic,
                    partitions=[
                        OffsetFetchResponsePartition(
                            partition_index=p,
                            committed_offset=-1 if o is None else o.offset,
                            committed_leader_epoch=-1 if o is None else o.leader_epoch,
                            metadata="" if o is None else o.metadata,
                            error_code=error,
                        )
                        for p, o, error in parts
                    ],
                )
                for topic, parts in _fetched(broker, ctx, request.group_id, topics, stable)
            ]
        )
    groups = []
    for group in request.groups:
        wanted = (
            None
            if group.topics is None
            else [(t.name, list(t.partition_indexes)) for t in group.topics]
        )
        error = (
            consumer_groups.offset_fetch_error(
                broker, group.group_id, group.member_id, group.member_epoch
            )
            if ctx.allows(DESCRIBE, GROUP, group.group_id)
            else GroupAuthorizationFailedError.code
        )
        if error:
            groups.append(OffsetFetchResponseGroup(group_id=group.group_id, error_code=error))
            continue
        groups.append(
            OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=[
                    OffsetFetchResponseTopics(
                        name=topic,
                        partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=-1 if o is None else o.offset,
                                committed_leader_epoch=-1 if o is None else o.leader_epoch,
                                metadata="" if o is None else o.metadata,
                                error_code=error,
                            )
                            for p, o, error in parts
                        ],
                    )
                    for topic, parts in _fetched(broker, ctx, group.group_id, wanted, stable)
                ],
            )
        )
    return OffsetFetchResponse(groups=groups)


@handler(OffsetDeleteRequest)
async def handle_offset_delete(
    broker: Broker, ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not ctx.allows(AclOperation.DELETE, GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=GroupAuthorizationFailedError.code)
    errors: dict[PartitionKey, int] = {}
    known: list[PartitionKey] = []
    for topic in request.topics:
        topic_allowed = ctx.allows(READ, TOPIC, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not topic_allowed:
                errors[key] = TopicAuthorizationFailedError.code
            elif partition_exists(broker, topic.name, p.partition_index):
                known.append(key)
            else:
                errors[key] = UnknownTopicOrPartitionError.code
    group_error, deleted = broker.groups.delete_offsets(request.group_id, known)
    if group_error:
        return OffsetDeleteResponse(error_code=group_error)
    errors.update(deleted)
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


# -- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------------


@handler(ListGroupsRequest)
async def handle_list_groups(
    broker: Broker, ctx: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    version = ctx.api_version
    overviews = consumer_groups.list_groups(
        broker,
        broker.groups.list_groups(request.states_filter, request.types_filter),
        request.states_filter,
        request.types_filter,
    )
    overviews = share_groups.list_groups(
        broker, overviews, request.states_filter, request.types_filter
    )
    if not ctx.allows(DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # As Kafka: without DESCRIBE on the cluster, only the groups one may describe.
        overviews = [g for g in overviews if ctx.allows(DESCRIBE, GROUP, g.group_id)]
    node = ctx.node_id
    if broker.nodes.multi and node is not None:  # each node lists the groups it coordinates
        overviews = [g for g in overviews if broker.nodes.coordinates(node, GROUP_KEY, g.group_id)]
    return ListGroupsResponse(
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state if version >= 4 else "",
                group_type=g.group_type if version >= 5 else "",
            )
            for g in overviews
        ]
    )


@handler(DescribeGroupsRequest)
async def handle_describe_groups(
    broker: Broker, ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    version = ctx.api_version
    described = []
    for group_id in request.groups:
        if not ctx.allows(DESCRIBE, GROUP, group_id):
            described.append(
                DescribedGroup(error_code=GroupAuthorizationFailedError.code, group_id=group_id)
            )
            continue
        operations = (
            ctx.authorized_operations(GROUP, group_id, GROUP_OPERATIONS)
            if request.include_authorized_operations
            else NOT_REQUESTED
        )
        if not broker.nodes.coordinates(ctx.node_id, GROUP_KEY, group_id):
            described.append(DescribedGroup(error_code=NotCoordinatorError.code, group_id=group_id))
            continue
        summary = (
            DEAD_GROUP
            if consumer_groups.is_consumer_group(broker, group_id)
            or share_groups.is_share_group(broker, group_id)
            else broker.groups.describe_group(group_id)
        )
        described.append(
            DescribedGroup(
                error_code=0,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id if version >= 4 else None,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
                authorized_operations=operations if version >= 3 else NOT_REQUESTED,
            )
        )
    return DescribeGroupsResponse(groups=described)


@handler(DeleteGroupsRequest)
async def handle_delete_groups(
    broker: Broker, ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    refused = {
        g: GroupAuthorizationFailedError.code
        for g in request.groups_names
        if not ctx.allows(AclOperation.DELETE, GROUP, g)
    }
    here = [
        g
        for g in request.groups_names
        if g not in refused and broker.nodes.coordinates(ctx.node_id, GROUP_KEY, g)
    ]
    errors = consumer_groups.delete_groups(broker, here)
    errors.update(share_groups.delete_groups(broker, here))
    errors.update(refused)
    errors.update(broker.groups.delete_groups(g for g in here if g not in errors))
    for group_id in request.groups_names:
        errors.setdefault(group_id, NotCoordinatorError.code)
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=group_id, error_code=errors[group_id])
            for group_id in request.groups_names
        ]
    )
