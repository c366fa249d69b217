"""The asynchronous admin client.

Each operation sends the request to the broker that must serve it (any
broker for topic and config changes, which a KRaft cluster forwards to its
controller; the named broker for broker configs; partition leaders for
DeleteRecords and ListOffsets) and returns per-item outcomes
(:class:`~kafkette.admin.types.Results`). Connection failures and retriable
per-item errors are retried with backoff until ``default.api.timeout.ms``
(or the operation's ``timeout=`` in seconds, or ``timeout_ms=``, kafka-python's
spelling; giving both is a TypeError), after which the remaining items fail
with :class:`~kafkette.errors.KafkaTimeoutError`.

Consumer group operations (listing, describing and deleting groups, their
committed offsets) are in :mod:`kafkette.admin.groups`, transaction operations
(listing and describing transactions, describing producers) in
:mod:`kafkette.admin.transactions`.
"""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import anyio

from kafkette.admin.acls import AclOperations
from kafkette.admin.scram import ScramOperations
from kafkette.admin.share_groups import ShareGroupOperations
from kafkette.admin.transactions import TransactionOperations
from kafkette.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    CreatedTopic,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    Node,
    Outcome,
    PartitionDescription,
    ResourceType,
    Results,
    TopicDescription,
)
from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.telemetry import attach, client_instance_id
from kafkette.clocks import loop_clock_ms
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import (
    ApiError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    make_error,
)
from kafkette.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkette.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsTopic,
)
from kafkette.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)
from kafkette.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from kafkette.protocol.messages.delete_topics_request import DeleteTopicState
from kafkette.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkette.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.protocol.schema import Request, Response
from kafkette.structs import TopicPartition

T = TypeVar("T")
R = TypeVar("R", bound=Response)

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def _error(code: int, message: str | None = None) -> ApiError:
    return make_error(code, message)


class AsyncAdminClient(TransactionOperations, ScramOperations, AclOperations, ShareGroupOperations):
    """Manage topics, partitions, configs, records, consumer and share groups of a Kafka cluster.

    ``AsyncAdminClient(bootstrap_servers="localhost:9092")``; settings in
    Kafka's or Python's spelling (see :class:`~kafkette.client.config.AdminConfig`).
    Use it as ``async with`` or call :meth:`close`.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = AdminConfig.from_user(config, **settings)
        self._client = KafkaClient(self.config, clock=loop_clock_ms())
        self._telemetry = attach(self._client, "admin")  # KIP-714, while ``async with``
        self._telemetry_tasks: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> AsyncAdminClient:
        if self._telemetry is not None and self._telemetry_tasks is None:
            self._telemetry_tasks = anyio.create_task_group()
            await self._telemetry_tasks.__aenter__()
            self._telemetry_tasks.start_soon(self._telemetry.run)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.close()
        finally:
            tasks, self._telemetry_tasks = self._telemetry_tasks, None
            if tasks is not None:
                await tasks.__aexit__(None, None, None)

    async def client_instance_id(
        self, *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> uuid.UUID:
        """The client instance id the broker gave this client (KIP-714's
        GetTelemetrySubscriptions), as Java's ``clientInstanceId(Duration)``: waits up to
        ``timeout`` seconds or ``timeout_ms`` (default ``default.api.timeout.ms``, keyword-only
        like every admin operation's) for it, opening a connection if the
        client has none yet.

        Raises :class:`~kafkette.errors.IllegalStateError` with
        ``enable.metrics.push=false`` and :class:`~kafkette.errors.KafkaTimeoutError` when
        the broker did not give one in time (it has no KIP-714, or no reachable broker).

        The id comes while the client is used as ``async with`` (its telemetry task runs
        there).
        """
        ms = timeout_in_ms(None, timeout, timeout_ms)
        return await client_instance_id(self._client, None if ms is None else ms / 1000)

    async def close(self) -> None:
        if self._telemetry is not None:  # its task ends with it (KafkaClient.close does too)
            await self._telemetry.close()
        await self._client.close()

    # ---- plumbing

    def _deadline_s(self, timeout_ms: float | None) -> float:
        ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return ms / 1000

    async def _with_retries(
        self, attempt: Callable[[], Awaitable[T]], timeout_ms: float | None
    ) -> T:
        """Run ``attempt`` until it succeeds, retrying connection failures with backoff."""
        timeout_s = self._deadline_s(timeout_ms)
        tries = 0
        last_error: Exception | None = None
        try:
            with anyio.fail_after(timeout_s):
                while True:
                    try:
                        return await attempt()
                    except (KafkaConnectionError, KafkaTimeoutError) as exc:
                        last_error = exc
                        self._client.metadata.request_update()
                        await anyio.sleep(
                            backoff_ms(
                                tries,
                                self.config.retry_backoff_ms,
                                self.config.retry_backoff_max_ms,
                            )
                            / 1000
                        )
                        tries += 1
        except TimeoutError:
            last_error = last_error or self._client.last_connection_error
            cause = f"; last error: {last_error}" if last_error is not None else ""
            raise KafkaTimeoutError(
                f"admin operation did not finish within {timeout_s}s{cause}"
            ) from last_error

    async def _send_any(self, request: Request, response_type: type[R]) -> R:
        node = await self._client.any_node()
        response = await self._client.send(node, request)
        if not isinstance(response, response_type):
            raise KafkaConnectionError(f"unexpected response {type(response).__name__}")
        return response

    async def _send_to(self, node: int, request: Request, response_type: type[R]) -> R:
        response = await self._client.send(node, request)
        if not isinstance(response, response_type):
            raise KafkaConnectionError(f"unexpected response {type(response).__name__}")
        return response

    # ---- topics

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, CreatedTopic]:
        """Create topics; each topic's outcome is its :class:`CreatedTopic` or its error."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        topics = list(new_topics)
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[
                        CreatableReplicaAssignment(p, list(b))
                        for p, b in sorted(t.replica_assignments.items())
                    ],
                    configs=[CreatableTopicConfig(k, v) for k, v in t.configs.items()],
                )
                for t in topics
            ],
            timeout_ms=self.config.request_timeout_ms,
            validate_only=validate_only,
        )
        response = await self._with_retries(
            lambda: self._send_any(request, CreateTopicsResponse), timeout_ms
        )
        outcomes: dict[str, Outcome[CreatedTopic]] = {}
        for result in response.topics:
            if result.error_code:
                outcomes[result.name] = Outcome(
                    error=_error(result.error_code, result.error_message)
                )
            else:
                outcomes[result.name] = Outcome(
                    CreatedTopic(
                        result.name,
                        result.topic_id,
                        result.num_partitions,
                        result.replication_factor,
                        {c.name: c.value for c in result.configs or []},
                    )
                )
        for t in topics:
            outcomes.setdefault(t.name, Outcome(error=KafkaError(f"no result for topic {t.name}")))
        return Results(outcomes)

    async def delete_topics(
        self,
        topics: Iterable[str | uuid.UUID],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str | uuid.UUID, None]:
        """Delete topics by name or by topic id."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(topics)

        async def attempt() -> DeleteTopicsResponse:
            node = await self._client.any_node()
            connection = await self._client.connection(node)
            version = connection.version_for(DeleteTopicsRequest)
            if version >= 6:
                states = [
                    DeleteTopicState(name=None, topic_id=t)
                    if isinstance(t, uuid.UUID)
                    else DeleteTopicState(name=t)
                    for t in wanted
                ]
                request = DeleteTopicsRequest(
                    topics=states, timeout_ms=self.config.request_timeout_ms
                )
            else:
                if any(isinstance(t, uuid.UUID) for t in wanted):
                    raise KafkaError("this broker cannot delete topics by id (DeleteTopics < v6)")
                request = DeleteTopicsRequest(
                    topic_names=[str(t) for t in wanted], timeout_ms=self.config.request_timeout_ms
                )
            return await self._send_to(node, request, DeleteTopicsResponse)

        response = await self._with_retries(attempt, timeout_ms)
        outcomes: dict[str | uuid.UUID, Outcome[None]] = {}
        for result in response.responses:
            key: str | uuid.UUID
            if result.name is not None and result.name in wanted:
                key = result.name
            else:
                key = result.topic_id
            error = _error(result.error_code, result.error_message) if result.error_code else None
            outcomes[key] = Outcome(None, error)
            if result.name is not None:
                self._client.metadata.forget_topic(result.name)
        return Results(outcomes)

    async def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        """Raise topics' partition counts to the given totals."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        request = CreatePartitionsRequest(
            topics=[
                CreatePartitionsTopic(
                    name,
                    spec.total_count,
                    None
                    if spec.assignments is None
                    else [CreatePartitionsAssignment(list(a)) for a in spec.assignments],
                )
                for name, spec in new_partitions.items()
            ],
            timeout_ms=self.config.request_timeout_ms,
            validate_only=validate_only,
        )
        response = await self._with_retries(
            lambda: self._send_any(request, CreatePartitionsResponse), timeout_ms
        )
        outcomes: dict[str, Outcome[None]] = {}
        for result in response.results:
            error = _error(result.error_code, result.error_message) if result.error_code else None
            outcomes[result.name] = Outcome(None, error)
        self._client.metadata.request_update()
        return Results(outcomes)

    async def list_topics(
        self,
        *,
        include_internal: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> list[str]:
        """Names of the cluster's topics, sorted."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        snapshot = await self._with_retries(lambda: self._client.refresh_metadata(None), timeout_ms)
        return sorted(
            name for name, t in snapshot.topics.items() if include_internal or not t.is_internal
        )

    async def describe_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> Results[str, TopicDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(names)
        snapshot = await self._with_retries(
            lambda: self._client.refresh_metadata(wanted), timeout_ms
        )

        def node(node_id: int) -> Node | None:
            b = snapshot.brokers.get(node_id)
            return None if b is None else Node(b.node_id, b.host, b.port, b.rack)

        def nodes(ids: Iterable[int]) -> tuple[Node, ...]:
            # As Java's admin client: a replica on a broker Metadata does not list (a
            # stopped one) is named by its id alone.
            return tuple(node(i) or Node(i, "", -1) for i in ids)

        outcomes: dict[str, Outcome[TopicDescription]] = {}
        for name in wanted:
            info = snapshot.topics.get(name)
            if info is None:
                outcomes[name] = Outcome(error=UnknownTopicOrPartitionError(name))
            elif info.error_code:
                outcomes[name] = Outcome(error=_error(info.error_code, name))
            else:
                outcomes[name] = Outcome(
                    TopicDescription(
                        name,
                        info.topic_id,
                        info.is_internal,
                        tuple(
                            PartitionDescription(
                                p.partition,
                                node(p.leader),
                                nodes(p.replicas),
                                nodes(p.isr),
                                p.leader_epoch,
                            )
                            for p in info.partitions
                        ),
                    )
                )
        return Results(outcomes)

    async def describe_cluster(
        self, *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> ClusterDescription:
        """The cluster id, its controller and its brokers."""

        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)

        async def attempt() -> ClusterDescription:
            node_id = await self._client.any_node()
            connection = await self._client.connection(node_id)
            if not connection.supports(DescribeClusterRequest):
                snapshot = await self._client.refresh_metadata([])
                nodes = tuple(
                    Node(b.node_id, b.host, b.port, b.rack) for b in snapshot.brokers.values()
                )
                controller = next((n for n in nodes if n.id == snapshot.controller_id), None)
                return ClusterDescription(snapshot.cluster_id, controller, nodes)
            response = await self._send_to(
                node_id, DescribeClusterRequest(), DescribeClusterResponse
            )
            if response.error_code:
                raise _error(response.error_code, response.error_message)
            nodes = tuple(Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers)
            controller = next((n for n in nodes if n.id == response.controller_id), None)
            return ClusterDescription(response.cluster_id, controller, nodes)

        return await self._with_retries(attempt, timeout_ms)

    # ---- configs

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[ConfigResource, dict[str, ConfigEntry]]:
        """Every config entry of each resource (topic, broker or group), by name."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(resources)
        outcomes: dict[ConfigResource, Outcome[dict[str, ConfigEntry]]] = {}
        for node, group in self._group_by_node(wanted).items():
            request = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(_wire_type(r.type), r.name, None) for r in group
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            response = await self._with_retries(
                functools.partial(self._send_node_or_any, node, request, DescribeConfigsResponse),
                timeout_ms,
            )
            for result in response.results:
                resource = ConfigResource(
                    _resource_type(result.resource_type), result.resource_name
                )
                if result.error_code:
                    outcomes[resource] = Outcome(
                        error=_error(result.error_code, result.error_message)
                    )
                    continue
                entries = {
                    c.name: ConfigEntry(
                        c.name,
                        c.value,
                        _source(c.config_source),
                        c.is_default or c.config_source == ConfigSource.DEFAULT_CONFIG,
                        c.read_only,
                        c.is_sensitive,
                        tuple(
                            ConfigSynonym(s.name, s.value, _source(s.source)) for s in c.synonyms
                        ),
                        c.config_type,
                        c.documentation,
                    )
                    for c in result.configs
                }
                outcomes[resource] = Outcome(entries)
        return Results(outcomes)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[ConfigResource, None]:
        """Apply SET/DELETE/APPEND/SUBTRACT changes to each resource's configs."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        outcomes: dict[ConfigResource, Outcome[None]] = {}
        for node, group in self._group_by_node(list(changes)).items():
            request = IncrementalAlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        _wire_type(r.type),
                        r.name,
                        [AlterableConfig(op.name, int(op.op), op.value) for op in changes[r]],
                    )
                    for r in group
                ],
                validate_only=validate_only,
            )
            response = await self._with_retries(
                functools.partial(
                    self._send_node_or_any, node, request, IncrementalAlterConfigsResponse
                ),
                timeout_ms,
            )
            for result in response.responses:
                resource = ConfigResource(
                    _resource_type(result.resource_type), result.resource_name
                )
                error = (
                    _error(result.error_code, result.error_message) if result.error_code else None
                )
                outcomes[resource] = Outcome(None, error)
        return Results(outcomes)

    def _group_by_node(
        self, resources: list[ConfigResource]
    ) -> dict[int | None, list[ConfigResource]]:
        """Broker resources go to that broker; the rest to any broker (None)."""
        groups: dict[int | None, list[ConfigResource]] = defaultdict(list)
        for resource in resources:
            if resource.type == ResourceType.BROKER and resource.name.isdigit():
                groups[int(resource.name)].append(resource)
            else:
                groups[None].append(resource)
        return groups

    async def _send_node_or_any(
        self, node: int | None, request: Request, response_type: type[R]
    ) -> R:
        if node is None:
            return await self._send_any(request, response_type)
        if self._client.broker(node) is None:
            await self._client.refresh_metadata([])
        return await self._send_to(node, request, response_type)

    # ---- records and offsets (partition leaders)

    async def delete_records(
        self,
        before: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, int]:
        """Delete records below each offset; each outcome is the new low watermark."""

        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)

        def build(group: list[TopicPartition]) -> Request:
            by_topic: dict[str, list[DeleteRecordsPartition]] = defaultdict(list)
            for tp in group:
                by_topic[tp.topic].append(DeleteRecordsPartition(tp.partition, before[tp]))
            return DeleteRecordsRequest(
                topics=[DeleteRecordsTopic(t, ps) for t, ps in by_topic.items()],
                timeout_ms=self.config.request_timeout_ms,
            )

        def parse(response: Response) -> dict[TopicPartition, tuple[int, int]]:
            assert isinstance(response, DeleteRecordsResponse)
            return {
                TopicPartition(t.name, p.partition_index): (p.error_code, p.low_watermark)
                for t in response.topics
                for p in t.partitions
            }

        return await self._by_leader(list(before), build, parse, timeout_ms)

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, ListOffsetsResultInfo]:
        """Offsets by :class:`~kafkette.admin.types.OffsetSpec` (earliest, latest,
        max timestamp) or timestamp: the first offset whose timestamp is >= it."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        isolation = ISOLATION_LEVELS[isolation_level]

        def build(group: list[TopicPartition]) -> Request:
            by_topic: dict[str, list[ListOffsetsPartition]] = defaultdict(list)
            for tp in group:
                by_topic[tp.topic].append(ListOffsetsPartition(tp.partition, -1, specs[tp], 1))
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=[ListOffsetsTopic(t, ps) for t, ps in by_topic.items()],
                timeout_ms=self.config.request_timeout_ms,
            )

        def parse(response: Response) -> dict[TopicPartition, tuple[int, ListOffsetsResultInfo]]:
            assert isinstance(response, ListOffsetsResponse)
            return {
                TopicPartition(t.name, p.partition_index): (
                    p.error_code,
                    ListOffsetsResultInfo(p.offset, p.timestamp, p.leader_epoch),
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._by_leader(list(specs), build, parse, timeout_ms)

    async def _by_leader(
        self,
        partitions: list[TopicPartition],
        build: Callable[[list[TopicPartition]], Request],
        parse: Callable[[Response], Mapping[TopicPartition, tuple[int, T]]],
        timeout_ms: float | None,
    ) -> Results[TopicPartition, T]:
        """Send per-leader requests; retry partitions whose error is retriable."""
        outcomes: dict[TopicPartition, Outcome[T]] = {}
        pending = list(dict.fromkeys(partitions))
        timeout_s = self._deadline_s(timeout_ms)
        tries = 0
        with anyio.move_on_after(timeout_s):
            while pending:
                retry: list[TopicPartition] = []
                groups: dict[int, list[TopicPartition]] = defaultdict(list)
                for tp in pending:
                    try:
                        groups[await self._client.leader(tp.topic, tp.partition)].append(tp)
                    except (KafkaConnectionError, KafkaTimeoutError):
                        retry.append(tp)
                    except ApiError as exc:
                        outcome = self._leader_error(tp, exc)
                        outcomes[tp] = outcome
                        if outcome.error is exc:  # the partition exists; its leader is unknown
                            retry.append(tp)
                for node, group in groups.items():
                    try:
                        results = parse(await self._send_to(node, build(group), Response))
                    except KafkaConnectionError:
                        retry += group
                        continue
                    for tp in group:
                        code, value = results.get(tp, (UnknownTopicOrPartitionError.code, None))
                        if code == 0:
                            outcomes[tp] = Outcome(value)
                            continue
                        error = _error(code, str(tp))
                        outcomes[tp] = Outcome(error=error)
                        if error.retriable and code != UnknownTopicOrPartitionError.code:
                            retry.append(tp)
                if retry:
                    self._client.metadata.request_update()
                    await anyio.sleep(
                        backoff_ms(
                            tries, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                        )
                        / 1000
                    )
                    tries += 1
                pending = retry
        for tp in pending:
            if tp not in outcomes or outcomes[tp].ok:
                outcomes[tp] = Outcome(
                    error=KafkaTimeoutError(f"{tp}: no answer within {timeout_s}s")
                )
        return Results({tp: outcomes[tp] for tp in dict.fromkeys(partitions)})

    def _leader_error(self, tp: TopicPartition, exc: ApiError) -> Outcome[Any]:
        snapshot = self._client.metadata.snapshot
        info = snapshot.topics.get(tp.topic)
        if info is not None and info.error_code:
            return Outcome(error=_error(info.error_code, tp.topic))
        if info is not None and tp.partition >= len(info.partitions):
            return Outcome(error=UnknownTopicOrPartitionError(str(tp)))
        return Outcome(error=exc)


_GROUP_CONFIG_RESOURCE = 32
"""Kafka's ConfigResource.Type.GROUP: a config resource's type on the wire, where
:class:`ResourceType` says GROUP (3) as librdkafka and confluent-kafka do."""


def _wire_type(resource_type: ResourceType) -> int:
    """A config resource's type as DescribeConfigs and the alters carry it."""
    return _GROUP_CONFIG_RESOURCE if resource_type == ResourceType.GROUP else int(resource_type)


def _resource_type(value: int) -> ResourceType:
    return ResourceType.GROUP if value == _GROUP_CONFIG_RESOURCE else ResourceType(value)


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN
