"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Each topic of a request succeeds or fails on its own, with Kafka's error
code and message. A replication factor may be as high as the number of nodes
the broker core stands for (``--nodes``: 1 by default; -1 takes
``default.replication.factor``); the replicas are placed by
:meth:`NodeTable.place <kafkette.server.nodes.NodeTable.place>`, and a manual
assignment is checked as Kafka's controller does. The data stays one log per
partition.

A request is bounded before any work is done (Kafka's limits, see
:mod:`kafkette.server.request_limits`): at most 10,000 new partitions, and
10,000 topics and configs (10,000 topics for DeleteTopics); over them every
topic fails with POLICY_VIOLATION. The partition logs are then opened (or
deleted) in steps, so that creating thousands of
partitions (a few fsyncs each on disk) does not stop the broker serving other
connections; requests that change topics are served one at a time. A deleted
disk log's directory is renamed away at once and its files freed in a worker
thread before DeleteTopics answers.

The internal topics ``__consumer_offsets`` and ``__transaction_state``
belong to the group and transaction coordinators: clients cannot create or
delete them (POLICY_VIOLATION). Kafka lets a client create them, which
leaves a coordinator with a topic it did not shape; refusing is the safer
choice for a development broker.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING

import anyio

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
)
from kafkette.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafkette.protocol.messages.create_partitions_request import CreatePartitionsTopic
from kafkette.protocol.messages.create_partitions_response import CreatePartitionsTopicResult
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
)
from kafkette.protocol.messages.delete_topics_response import DeletableTopicResult
from kafkette.protocol.schema import ZERO_UUID
from kafkette.server.cluster import INTERNAL_TOPICS, Topic
from kafkette.server.config.entries import describe_topic_configs
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.maintenance import reap
from kafkette.server.request_limits import (
    MAX_PARTITIONS_PER_REQUEST,
    MAX_RECORDS_PER_REQUEST,
    check_create_topics,
    too_large_batch,
    too_many_partitions,
)
from kafkette.server.steps import run_in_steps
from kafkette.server.topic_creation import open_partitions, open_topic

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.topics")


def _internal(name: str, action: str) -> PolicyViolationError:
    return PolicyViolationError(
        f"Topic '{name}' is internal to this broker's coordinators and cannot be {action} "
        "by a client."
    )


# ---- CreateTopics


def _check_assignments(broker: Broker, topic: CreatableTopic) -> list[list[int]]:
    """The replicas of each partition of a manual assignment, checked as Kafka's controller
    does (known nodes, each once, as many for every partition, consecutive indexes)."""
    if topic.replication_factor != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if topic.num_partitions != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    nodes = broker.nodes
    assigned: dict[int, list[int]] = {}
    factor: int | None = None
    for assignment in topic.assignments:
        index, ids = assignment.partition_index, list(assignment.broker_ids)
        if index in assigned:
            raise InvalidReplicaAssignmentError(
                f"Found multiple manual partition assignments for partition {index}"
            )
        nodes.check_assignment(ids, factor)
        nodes.check_assigned_live(ids, index)
        factor = len(ids)
        assigned[index] = ids
    if sorted(assigned) != list(range(len(assigned))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence"
        )
    return [assigned[i] for i in range(len(assigned))]


async def _create_one(
    broker: Broker, ctx: RequestContext, topic: CreatableTopic, validate_only: bool
) -> CreatableTopicResult:
    version = ctx.api_version
    name = topic.name
    cluster = broker.cluster
    if name in INTERNAL_TOPICS:
        raise _internal(name, "created")
    if name not in cluster.topics:
        cluster.check_collision(name)
    replicas: list[list[int]] | None
    if topic.assignments:
        replicas = _check_assignments(broker, topic)
        partitions, replication = len(replicas), len(replicas[0])
    else:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = broker.config.num_partitions
        elif partitions <= 0:
            raise InvalidPartitionsError(
                "Number of partitions was set to an invalid non-positive value."
            )
        replication = topic.replication_factor
        if replication == -1:
            replication = broker.config.default_replication_factor
        elif replication <= 0:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
        replicas = broker.nodes.place(name, 0, partitions, replication)
    configs: dict[str, str] = {}
    for entry in topic.configs:
        if entry.value is None:
            raise InvalidRequestError(f"Null value not supported for topic config {entry.name}")
        if entry.name in configs:
            raise InvalidRequestError(f"Duplicate config name {entry.name}")
        configs[entry.name] = entry.value
    plan = cluster.plan_topic(
        name,
        partitions,
        configs,
        replication_factor=replication,
        replicas=replicas if broker.nodes.multi else None,
    )
    created: Topic | None = None
    if not validate_only:
        created = await open_topic(cluster, plan)
        await cluster.save_topics()  # answered once the topics file names it
        logger.info("created topic %s with %d partition(s)", name, partitions)
    result = CreatableTopicResult(
        name=name,
        topic_id=created.topic_id if created is not None else ZERO_UUID,
        error_code=0,
        error_message=None,
    )
    if version >= 5 and not ctx.allows(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
        # As Kafka: created, but its configs are not the principal's to see.
        result.topic_config_error_code = TopicAuthorizationFailedError.code
        result.configs = None
    elif version >= 5:
        result.num_partitions = partitions
        result.replication_factor = replication
        result.configs = [
            CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=entry.config_source,
                is_sensitive=entry.is_sensitive,
            )
            for entry in describe_topic_configs(cluster, broker.config.overrides, plan.configs)
        ]
    return result


@handler(CreateTopicsRequest)
async def handle_create_topics(
    broker: Broker, ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    too_large = check_create_topics(request.topics, broker.config.num_partitions)
    results: list[CreatableTopicResult] = []
    async with broker.topic_changes:
        for topic in request.topics:
            try:
                if too_large is not None:
                    raise too_large
                if counts[topic.name] > 1:
                    raise InvalidRequestError(
                        f"Create topics request contains multiple entries for the topic "
                        f"{topic.name}."
                    )
                if not (
                    ctx.allows(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                    or ctx.allows(AclOperation.CREATE, ResourceType.TOPIC, topic.name)
                ):
                    raise TopicAuthorizationFailedError("Authorization failed.")  # Kafka's text
                result = await _create_one(broker, ctx, topic, request.validate_only)
            except ApiError as exc:
                result = CreatableTopicResult(
                    name=topic.name, error_code=exc.code, error_message=exc.detail
                )
                if ctx.api_version >= 5:
                    result.configs = None
            results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


# ---- DeleteTopics


async def _delete_one(
    broker: Broker, ctx: RequestContext, name: str | None, topic_id: uuid.UUID
) -> DeletableTopicResult:
    version = ctx.api_version
    cluster = broker.cluster
    try:
        if name is not None and topic_id != ZERO_UUID:
            raise InvalidRequestError("Topic name and topic id cannot both be set.")
        # As Kafka's controller: DELETE on the cluster may delete every topic; else
        # DESCRIBE before existence (by name), then DELETE.
        everything = ctx.allows(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME)
        if not everything and name is not None and not _may(ctx, AclOperation.DESCRIBE, name):
            raise TopicAuthorizationFailedError(TopicAuthorizationFailedError.description)
        topic: Topic
        if name is None:
            if topic_id == ZERO_UUID:
                raise InvalidRequestError("Either the topic name or the topic id must be set.")
            topic = cluster.get_topic_by_id(topic_id)
        else:
            topic = cluster.get_topic(name)
        if not everything and not _may(ctx, AclOperation.DELETE, topic.name):
            # A topic named by id is named back only to a principal that may describe it.
            shown = topic.name if _may(ctx, AclOperation.DESCRIBE, topic.name) else name
            return DeletableTopicResult(
                name=shown,
                topic_id=topic_id,
                error_code=TopicAuthorizationFailedError.code,
                error_message=TopicAuthorizationFailedError.description,
            )
        if not broker.config.delete_topic_enable:
            if version < 3:
                raise InvalidRequestError("Topic deletion is disabled.")
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        if topic.is_internal:
            raise _internal(topic.name, "deleted")
        try:
            # The topics file is the commit point (see Cluster.remove_topic): written in
            # a worker thread, and only then the logs deleted; not cancelled half way.
            with anyio.CancelScope(shield=True):
                cluster.detach_topic(topic)
                await cluster.save_topics()
                await run_in_steps(cluster.delete_logs(topic))
        finally:
            broker.groups.topics_deleted([topic.name])  # as Kafka: committed offsets go too
            broker.data_changed.notify()
        logger.info("deleted topic %s", topic.name)
        return DeletableTopicResult(
            name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None
        )
    except ApiError as exc:
        return DeletableTopicResult(
            name=name, topic_id=topic_id, error_code=exc.code, error_message=exc.detail
        )


def _may(ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return ctx.allows(operation, ResourceType.TOPIC, topic)


@handler(DeleteTopicsRequest)
async def handle_delete_topics(
    broker: Broker, ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    version = ctx.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    counts = Counter(wanted)
    results: list[DeletableTopicResult] = []
    too_large = too_large_batch() if len(wanted) > MAX_RECORDS_PER_REQUEST else None
    async with broker.topic_changes:
        for name, topic_id in wanted:
            if too_large is not None or counts[(name, topic_id)] > 1:
                error = too_large or InvalidRequestError("Duplicate topic in request.")
                results.append(
                    DeletableTopicResult(
                        name=name,
                        topic_id=topic_id,
                        error_code=error.code,
                        error_message=error.detail,
                    )
                )
                continue
            results.append(await _delete_one(broker, ctx, name, topic_id))
    # The logs' directories were renamed away; their files are freed here, off the loop
    # (a multi-GiB log takes a second or more), before the answer: the space is free then.
    await reap(broker.cluster.storage)
    if version < 6:
        for result in results:
            result.topic_id = ZERO_UUID
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


# ---- CreatePartitions


def _new_partitions(broker: Broker, topics: list[CreatePartitionsTopic]) -> int:
    """How many partitions a CreatePartitions request would add to the topics that exist."""
    total = 0
    for topic in topics:
        existing = broker.cluster.topics.get(topic.name)
        if existing is not None:
            total += max(0, topic.count - len(existing.partitions))
    return total


def _check_new_partitions(broker: Broker, topic: CreatePartitionsTopic) -> Topic:
    """The topic to grow, if this request's part for it is valid (else an ApiError)."""
    existing = broker.cluster.get_topic(topic.name)
    if existing.is_internal:
        raise _internal(topic.name, "changed")
    broker.cluster.check_new_partition_count(topic.name, topic.count)
    _new_replicas(broker, existing, topic)
    return existing


def _new_replicas(broker: Broker, existing: Topic, topic: CreatePartitionsTopic) -> list[list[int]]:
    """The replicas of the partitions ``topic`` adds to ``existing``: as assigned (checked
    as Kafka's controller does), or placed as the topic's first ones were."""
    nodes = broker.nodes
    current = len(existing.partitions)
    added = topic.count - current
    factor = len(nodes.replicas(existing.partitions[0])) if nodes.multi else 1
    if topic.assignments is None:
        return nodes.place(topic.name, current, added, factor)
    if len(topic.assignments) != added:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {added} additional partition(s), but only "
            f"{len(topic.assignments)} assignment(s) were specified."
        )
    replicas = []
    for offset, assignment in enumerate(topic.assignments):
        ids = list(assignment.broker_ids)
        nodes.check_assignment(ids, factor)
        nodes.check_assigned_live(ids, current + offset)
        replicas.append(ids)
    return replicas


async def _add_partitions(
    broker: Broker, topic: CreatePartitionsTopic, validate_only: bool
) -> CreatePartitionsTopicResult:
    existing = _check_new_partitions(broker, topic)
    if not validate_only:
        replicas = _new_replicas(broker, existing, topic)
        cluster = broker.cluster
        config = cluster.log_config(existing.configs)
        start = len(existing.partitions)
        opened = await open_partitions(cluster, topic.name, start, topic.count, config)
        if broker.nodes.multi:
            for partition, assigned in zip(opened, replicas, strict=True):
                broker.nodes.assign(partition, assigned)
        cluster.extend_topic(existing, opened)
        await cluster.save_topics()
        logger.info("topic %s now has %d partition(s)", topic.name, topic.count)
    return CreatePartitionsTopicResult(topic.name, 0, None)


@handler(CreatePartitionsRequest)
async def handle_create_partitions(
    broker: Broker, ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results: list[CreatePartitionsTopicResult] = []
    async with broker.topic_changes:
        too_large: ApiError | None = None
        if len(request.topics) > MAX_RECORDS_PER_REQUEST:
            too_large = too_large_batch()
        elif _new_partitions(broker, request.topics) > MAX_PARTITIONS_PER_REQUEST:
            too_large = too_many_partitions()
        for topic in request.topics:
            try:
                if too_large is not None:
                    raise too_large
                if counts[topic.name] > 1:
                    raise InvalidRequestError("Duplicate topic in request.")
                if not ctx.allows(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                    raise TopicAuthorizationFailedError()
                result = await _add_partitions(broker, topic, request.validate_only)
            except ApiError as exc:
                result = CreatePartitionsTopicResult(topic.name, exc.code, exc.detail)
            results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
