"""Metadata (key 3): brokers, topics and partition leaders; topic auto-creation;
DescribeTopicPartitions (75, KIP-966): the same partitions, paged by a cursor.

The internal topics (``__consumer_offsets``, ``__transaction_state``) are
listed with ``is_internal`` once their coordinator has made them, and are
never auto-created by name: the coordinator makes them on first use with its
own partition count and configs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, TypeVar

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    InvalidRequestError,
    InvalidTopicError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.describe_topic_partitions_response import (
    Cursor as ResponseCursor,
)
from kafkette.protocol.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kafkette.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkette.protocol.schema import ZERO_UUID
from kafkette.server.cluster import INTERNAL_TOPICS, Partition, Topic, validate_topic_name
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.nodes import NodeTable
from kafkette.server.request_limits import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from kafkette.server.steps import run_in_steps
from kafkette.server.topic_creation import open_topic

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.metadata")

S = TypeVar("S")
T = TypeVar("T")

# ACL operations (AclOperation codes) that apply to topics and to the cluster,
# as bit positions: all of them are allowed without an authorizer, and the ACLs
# say which with one. The cluster's are Kafka's seven: CREATE, ALTER, DESCRIBE,
# CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE (WRITE is not
# one of them).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
NOT_REQUESTED = -(2**31)
DESCRIBE, TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC


def cluster_operations(ctx: RequestContext, requested: bool) -> int:
    """As Kafka: the operations the principal may perform on the cluster when asked,
    none without DESCRIBE on it."""
    if not requested:
        return NOT_REQUESTED
    if not ctx.allows(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


def topic_operations(ctx: RequestContext, requested: bool, name: str) -> int:
    """The operations the principal may perform on topic ``name``, when asked."""
    if not requested:
        return NOT_REQUESTED
    return ctx.authorized_operations(ResourceType.TOPIC, name, TOPIC_OPERATIONS)


def describe_topic(broker: Broker, topic: Topic, operations: int) -> MetadataResponseTopic:
    nodes = broker.nodes
    if nodes.multi:
        partitions = [_described_partition(nodes, p) for p in topic.partitions]
    else:
        node = broker.node_id
        partitions = [
            MetadataResponsePartition(
                error_code=0,
                partition_index=p.index,
                leader_id=node,
                leader_epoch=p.leader_epoch,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for p in topic.partitions
        ]
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _described_partition(nodes: NodeTable, partition: Partition) -> MetadataResponsePartition:
    """A partition of a core standing for several nodes: its replicas, the in-sync ones
    and those whose node is stopped; without a leader (its in-sync replicas stopped)
    LEADER_NOT_AVAILABLE, as Kafka answers."""
    leader = nodes.leader(partition)
    return MetadataResponsePartition(
        error_code=0 if leader >= 0 else LeaderNotAvailableError.code,
        partition_index=partition.index,
        leader_id=leader,
        leader_epoch=partition.leader_epoch,
        replica_nodes=nodes.replicas(partition),
        isr_nodes=nodes.isr(partition),
        offline_replicas=nodes.offline(partition),
    )


def listed_brokers(broker: Broker) -> tuple[list[tuple[int, str, int, str | None]], int]:
    """The live nodes ``(id, host, port, rack)`` and the controller's id, for Metadata and
    DescribeCluster."""
    nodes = broker.nodes
    if not nodes.multi:
        host, port = broker.config.advertised
        rack = broker.config.overrides.get("broker.rack") or None
        return [(broker.node_id, host, port, rack)], broker.node_id
    live = nodes.live()
    return [(n, *nodes.addresses[n], nodes.racks[n]) for n in live], live[0] if live else -1


def _error_topic(
    name: str | None, error: ApiError, topic_id: object = ZERO_UUID
) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=error.code, name=name, topic_id=topic_id)  # type: ignore[arg-type]


@handler(MetadataRequest)
async def handle_metadata(
    broker: Broker, ctx: RequestContext, request: MetadataRequest
) -> MetadataResponse:
    version = ctx.api_version
    include_ops = request.include_topic_authorized_operations
    cluster = broker.cluster
    all_topics = request.topics is None or (version == 0 and not request.topics)
    topics: list[MetadataResponseTopic] = []

    def ops(name: str) -> int:
        return topic_operations(ctx, include_ops, name)

    if all_topics:
        # As Kafka: the topics the principal may not describe are left out.
        every = [t for t in cluster.topics.values() if ctx.allows(DESCRIBE, TOPIC, t.name)]
        await run_in_steps(_each(topics, every, lambda t: describe_topic(broker, t, ops(t.name))))
    else:
        auto_create = (
            broker.config.auto_create_topics_enable
            and not broker.config.read_only
            and (version < 4 or request.allow_auto_topic_creation)
        )
        wanted = request.topics or []
        found: list[MetadataResponseTopic | None] = []
        await run_in_steps(
            _each(
                found,
                wanted,
                lambda w: _lookup(broker, ctx, w.name, w.topic_id, auto_create, ops),
            )
        )
        missing = [w.name for w, t in zip(wanted, found, strict=True) if t is None]
        created = await _auto_create(broker, missing, ops) if missing else {}
        topics = [
            t if t is not None else created[w.name] for w, t in zip(wanted, found, strict=True)
        ]
    listed, controller = listed_brokers(broker)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(n, host, port, rack) for n, host, port, rack in listed],
        cluster_id=broker.cluster_id,
        controller_id=controller,
        topics=topics,
        cluster_authorized_operations=cluster_operations(
            ctx, request.include_cluster_authorized_operations
        ),
    )


def _each(
    results: list[T], items: Sequence[S], answer: Callable[[S], T]
) -> Generator[None, None, None]:
    """Append the answer for each item to ``results``, one item per step: a request
    may name a million topics."""
    for item in items:
        results.append(answer(item))
        yield


def _lookup(
    broker: Broker,
    ctx: RequestContext,
    name: str | None,
    topic_id: uuid.UUID,
    auto_create: bool,
    ops: Callable[[str], int],
) -> MetadataResponseTopic | None:
    """The answer for one wanted topic; None for one to auto-create."""
    cluster = broker.cluster
    if name is None:
        topic = cluster.topics_by_id.get(topic_id)
        if topic is None:
            return _error_topic(None, UnknownTopicIdError(), topic_id)
        if not ctx.allows(DESCRIBE, TOPIC, topic.name):
            return _error_topic(None, TopicAuthorizationFailedError(), topic_id)
        return describe_topic(broker, topic, ops(topic.name))
    # As Kafka: authorization before existence, so no hint of what one may not see.
    if not ctx.allows(DESCRIBE, TOPIC, name):
        return _error_topic(name, TopicAuthorizationFailedError())
    topic = cluster.topics.get(name)
    if topic is not None:
        return describe_topic(broker, topic, ops(name))
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return _error_topic(name, exc)
    if name in cluster.creating:  # a CreateTopics is opening its logs
        return _error_topic(name, LeaderNotAvailableError())
    if not auto_create or name in INTERNAL_TOPICS:
        return _error_topic(name, UnknownTopicOrPartitionError())
    if not (
        ctx.allows(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        or ctx.allows(AclOperation.CREATE, TOPIC, name)
    ):
        return _error_topic(name, TopicAuthorizationFailedError())
    return None


async def _auto_create(
    broker: Broker, names: list[str | None], ops: Callable[[str], int]
) -> dict[str | None, MetadataResponseTopic]:
    """Create the missing topics a Metadata request names, with the default partition count.

    As Kafka, the creations of one request are one batch under the per-request
    partition limit: over it none is created, each is answered LEADER_NOT_AVAILABLE
    (Kafka's answer for a topic whose creation it requested) and a warning logged.
    """
    wanted = list(dict.fromkeys(name for name in names if name is not None))
    partitions = broker.config.num_partitions
    if len(wanted) * partitions > MAX_PARTITIONS_PER_REQUEST:
        logger.warning(
            "not auto-creating %d topics of %d partitions for one Metadata request: %s",
            len(wanted),
            partitions,
            TOO_MANY_PARTITIONS,
        )
        return {name: _error_topic(name, LeaderNotAvailableError()) for name in wanted}
    cluster = broker.cluster
    answers: dict[str | None, MetadataResponseTopic] = {}
    async with broker.topic_changes:
        for name in wanted:
            topic = cluster.topics.get(name)
            if topic is None:
                try:
                    replicas = None
                    if broker.nodes.multi:  # default.replication.factor, as Kafka
                        factor = broker.config.default_replication_factor
                        replicas = broker.nodes.place(name, 0, partitions, factor)
                    plan = cluster.plan_topic(name, partitions, replicas=replicas)
                    topic = await open_topic(cluster, plan)
                except ApiError as exc:
                    answers[name] = _error_topic(name, exc)
                    continue
                logger.info("auto-created topic %s with %d partitions", name, partitions)
            answers[name] = describe_topic(broker, topic, ops(name))
    return answers


# ---- DescribeTopicPartitions (KIP-966)

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
"""Kafka's ``max.request.partition.size.limit``: the most partitions one answer holds."""


@handler(DescribeTopicPartitionsRequest)
async def handle_describe_topic_partitions(
    broker: Broker, ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    """Topics in name order with their partitions' replicas, ISR and offline replicas, at
    most ``response_partition_limit`` partitions (and Kafka's 2000) per answer, from the
    cursor on; the next cursor where the limit cut. As Kafka: every topic when none is
    named (those the principal may not describe left out), a named one it may not
    describe TOPIC_AUTHORIZATION_FAILED, no auto-creation."""
    cluster = broker.cluster
    everything = not request.topics
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    names = {t.name for t in request.topics} if not everything else set(cluster.topics)
    names = {n for n in names if n >= start_name}
    try:
        if not everything and cursor is not None and cursor.topic_name not in names:
            raise InvalidRequestError(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
                f"{cursor.topic_name}"
            )
        if cursor is not None and cursor.partition_index < 0:
            raise InvalidRequestError(
                "DescribeTopicPartitionsRequest cursor partition must be valid: "
                f"{cursor.topic_name}-{cursor.partition_index}"
            )
    except ApiError as exc:
        return DescribeTopicPartitionsResponse(
            topics=[
                DescribeTopicPartitionsResponseTopic(error_code=exc.code, name=t.name)
                for t in request.topics
            ]
        )
    refused: list[DescribeTopicPartitionsResponseTopic] = []
    allowed: list[str] = []
    for name in sorted(names):
        if ctx.allows(DESCRIBE, TOPIC, name):
            allowed.append(name)
        elif not everything:
            refused.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=TopicAuthorizationFailedError.code, name=name
                )
            )
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    response = DescribeTopicPartitionsResponse()
    for name in allowed:
        if remaining == 0:
            response.next_cursor = ResponseCursor(topic_name=name, partition_index=0)
            break
        topic = cluster.topics.get(name)
        if topic is None:
            if not everything:
                response.topics.append(_missing_partitions_topic(name))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        upper = min(len(topic.partitions), first + remaining)
        described = describe_topic(broker, topic, topic_operations(ctx, True, name))
        response.topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=[
                    DescribeTopicPartitionsResponsePartition(
                        error_code=0,
                        partition_index=p.partition_index,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=p.replica_nodes,
                        isr_nodes=p.isr_nodes,
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=p.offline_replicas,
                    )
                    for p in described.partitions[first:upper]
                ],
                topic_authorized_operations=described.topic_authorized_operations,
            )
        )
        if upper < len(topic.partitions):
            response.next_cursor = ResponseCursor(topic_name=name, partition_index=upper)
            break
        remaining -= upper - first
    response.topics.extend(refused)
    return response


def _missing_partitions_topic(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
        error: ApiError = UnknownTopicOrPartitionError()
    except InvalidTopicError as exc:
        error = exc
    return DescribeTopicPartitionsResponseTopic(
        error_code=error.code, name=name, is_internal=name in INTERNAL_TOPICS
    )
