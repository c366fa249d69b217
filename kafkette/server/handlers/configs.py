"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Resources are topics (type 2), this broker (type 4: its node id, or the
empty name for the cluster-wide default), client metrics subscriptions (type 16,
KIP-714: :mod:`kafkette.server.metrics.client_metrics`) and groups (type 32: their
group configs, :mod:`kafkette.server.config.group_configs`). Every resource succeeds or fails on
its own: an unknown configuration or an invalid value is INVALID_CONFIG, a
malformed request (null value, duplicate key, APPEND to a non-list
configuration, unknown operation) INVALID_REQUEST, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION. AlterConfigs replaces the resource's whole set of
overrides; IncrementalAlterConfigs edits it (SET, DELETE, APPEND, SUBTRACT).
A BROKER resource naming ``kafkette.fault.*`` arms test faults instead
(:mod:`kafkette.server.faults.hook`, off unless the broker opted in).
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from kafkette import acl
from kafkette.errors import (
    ApiError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
)
from kafkette.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkette.protocol.messages import alter_configs_response as legacy
from kafkette.protocol.messages import incremental_alter_configs_request as incremental_request
from kafkette.protocol.messages import incremental_alter_configs_response as incremental
from kafkette.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkette.protocol.messages.describe_configs_response import DescribeConfigsResult
from kafkette.server.cluster import validate_topic_name
from kafkette.server.config.catalog import (
    ALL_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfigDef,
    ResourceType,
    TopicConfigDef,
    is_list,
)
from kafkette.server.config.entries import describe_broker_configs, describe_topic_configs
from kafkette.server.config.group_configs import (
    GROUP_CONFIGS,
    check_group_name,
    describe_group_configs,
    validate_group_configs,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.faults import hook as fault_hook
from kafkette.server.metrics.client_metrics_configs import (
    CLIENT_METRICS,
    CLIENT_METRICS_CONFIGS,
    LIST_CONFIGS,
    describe_client_metrics_configs,
)
from kafkette.server.steps import run_in_steps

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.configs")

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _check_broker_name(broker: Broker, name: str) -> bool:
    """True for the cluster-wide default resource (empty name), False for this broker."""
    if name == "":
        return True
    try:
        node = int(name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}"
        )
    return False


def _check_access(
    ctx: RequestContext, resource_type: int, name: str, operation: acl.AclOperation
) -> None:
    """Raise Kafka's error when the principal may not ``operation`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) the configs of the resource: a topic's are the topic's, a group's the
    group's, a broker's the cluster's."""
    if resource_type == ResourceType.TOPIC:
        if not ctx.allows(operation, acl.ResourceType.TOPIC, name):
            raise TopicAuthorizationFailedError()
        return
    if resource_type == ResourceType.GROUP:
        if not ctx.allows(operation, acl.ResourceType.GROUP, name):
            raise GroupAuthorizationFailedError()
        return
    cluster_wide = (ResourceType.BROKER, ResourceType.BROKER_LOGGER, CLIENT_METRICS)
    if resource_type in cluster_wide and not ctx.allows(
        operation, acl.ResourceType.CLUSTER, acl.CLUSTER_NAME
    ):
        raise ClusterAuthorizationFailedError()


def _check_subscription_name(name: str) -> None:
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")


def _unsupported_type(resource_type: int) -> InvalidRequestError:
    return InvalidRequestError(f"Unsupported resource type {resource_type}")


# ---- DescribeConfigs


def _describe(
    broker: Broker,
    ctx: RequestContext,
    resource: DescribeConfigsResource,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResult:
    version = ctx.api_version
    result = DescribeConfigsResult(
        error_code=0,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
    synonyms = request.include_synonyms and version >= 1
    documentation = request.include_documentation and version >= 3
    try:
        try:
            _check_access(
                ctx,
                resource.resource_type,
                resource.resource_name,
                acl.AclOperation.DESCRIBE_CONFIGS,
            )
        except ApiError as refused:  # DescribeConfigs says the error's message, as Kafka
            raise type(refused)(refused.description) from None
        if resource.resource_type == ResourceType.TOPIC:
            validate_topic_name(resource.resource_name)
            topic = broker.cluster.get_topic(resource.resource_name)
            result.configs = describe_topic_configs(
                broker.cluster,
                broker.config.overrides,
                topic.configs,
                keys=resource.configuration_keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
                legacy=version == 0,
            )
        elif resource.resource_type == ResourceType.BROKER:
            result.configs = describe_broker_configs(
                broker.cluster,
                broker.config.overrides,
                default_resource=_check_broker_name(broker, resource.resource_name),
                keys=resource.configuration_keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
                legacy=version == 0,
            )
            result.configs += fault_hook.describe_entry(broker.faults, resource.configuration_keys)
        elif resource.resource_type == CLIENT_METRICS:
            _check_subscription_name(resource.resource_name)
            result.configs = describe_client_metrics_configs(
                broker.metrics.client_metrics,
                resource.resource_name,
                keys=resource.configuration_keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
            )
        elif resource.resource_type == ResourceType.GROUP:
            check_group_name(resource.resource_name, describing=True)
            result.configs = describe_group_configs(
                broker.cluster.group_configs.get(resource.resource_name, {}),
                broker.config,
                keys=resource.configuration_keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
                legacy=version == 0,
            )
        else:
            raise _unsupported_type(resource.resource_type)
    except ApiError as exc:
        result.error_code, result.error_message, result.configs = exc.code, exc.detail, []
    return result


@handler(DescribeConfigsRequest)
async def handle_describe_configs(
    broker: Broker, ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    results: list[DescribeConfigsResult] = []
    await run_in_steps(_describe_each(broker, ctx, request, results))
    ctx.large_answer = sum(len(result.configs) for result in results) > _LARGE_ANSWER_ENTRIES
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


_LARGE_ANSWER_ENTRIES = 5_000
"""Config entries past which an answer takes the loop for milliseconds to encode
(about 1 ms per 2,000 with their documentation and synonyms)."""


def _describe_each(
    broker: Broker,
    ctx: RequestContext,
    request: DescribeConfigsRequest,
    results: list[DescribeConfigsResult],
) -> Generator[None, None, None]:
    """Describe each resource, one per step; a resource named again reuses its entries,
    so that a small request naming one broker 100,000 times costs one description."""
    seen: dict[tuple[int, str, tuple[str, ...] | None], DescribeConfigsResult] = {}
    for resource in request.resources:
        keys = resource.configuration_keys
        wanted = None if keys is None else tuple(keys)
        key = (resource.resource_type, resource.resource_name, wanted)
        done = seen.get(key)
        if done is None:
            done = seen[key] = _describe(broker, ctx, resource, request)
        results.append(done)  # the same answer object: encoding only reads it
        yield


# ---- AlterConfigs and IncrementalAlterConfigs


class _Alterable(Protocol):
    name: str
    value: str | None


def _as_dict(configs: Sequence[_Alterable]) -> dict[str, str | None]:
    result: dict[str, str | None] = {}
    for entry in configs:
        if entry.name in result:
            raise InvalidRequestError(f"Error due to duplicate config keys: {entry.name}")
        result[entry.name] = entry.value
    return result


def _apply(
    broker: Broker,
    resource_type: int,
    resource_name: str,
    new_configs: dict[str, str],
    validate_only: bool,
) -> None:
    """Replace the overrides of a resource (validated; applied unless ``validate_only``)."""
    cluster = broker.cluster
    if resource_type == CLIENT_METRICS:
        broker.metrics.client_metrics.update(
            resource_name, new_configs, validate_only=validate_only
        )
        if not validate_only:
            logger.info("client metrics subscription %s now %s", resource_name, new_configs)
        return
    if resource_type == ResourceType.GROUP:
        checked = validate_group_configs(new_configs, broker.config)
        if not validate_only:
            cluster.set_group_configs(resource_name, checked)
            logger.info("group %s configuration overrides now %s", resource_name, checked)
        return
    if resource_type == ResourceType.TOPIC:
        cluster.log_config(new_configs)  # raises InvalidConfigError
        if not validate_only:
            cluster.set_topic_configs(resource_name, new_configs)
            logger.info("topic %s configuration overrides now %s", resource_name, new_configs)
    else:
        default = _check_broker_name(broker, resource_name)
        if validate_only:
            cluster.validate_dynamic_broker_configs(
                None if default else new_configs, new_configs if default else None
            )
        elif default:
            cluster.set_dynamic_broker_configs(default=new_configs)
        else:
            cluster.set_dynamic_broker_configs(per_broker=new_configs)
        if not validate_only:
            which = "default" if default else f"broker {broker.node_id}"
            logger.info("dynamic %s configuration now %s", which, new_configs)


def _current(broker: Broker, resource_type: int, resource_name: str) -> dict[str, str]:
    cluster = broker.cluster
    if resource_type == ResourceType.TOPIC:
        validate_topic_name(resource_name)
        return dict(cluster.get_topic(resource_name).configs)
    if resource_type == ResourceType.BROKER:
        if _check_broker_name(broker, resource_name):
            return dict(cluster.dynamic_default_configs)
        return dict(cluster.dynamic_broker_configs)
    if resource_type == ResourceType.GROUP:
        check_group_name(resource_name, describing=False)
        return dict(cluster.group_configs.get(resource_name, {}))
    if resource_type == CLIENT_METRICS:
        _check_subscription_name(resource_name)
        return broker.metrics.client_metrics.configs(resource_name)
    raise _unsupported_type(resource_type)


def _alter_legacy(
    broker: Broker,
    resource_type: int,
    resource_name: str,
    configs: Sequence[_Alterable],
    validate_only: bool,
) -> None:
    _current(broker, resource_type, resource_name)  # the resource must exist
    new: dict[str, str] = {}
    for name, value in _as_dict(configs).items():
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        new[name] = value
    _apply(broker, resource_type, resource_name, new, validate_only)


@handler(AlterConfigsRequest)
async def handle_alter_configs(
    broker: Broker, ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        response = legacy.AlterConfigsResourceResponse(
            error_code=0,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        try:
            _check_access(
                ctx, resource.resource_type, resource.resource_name, acl.AclOperation.ALTER_CONFIGS
            )
            if fault_hook.names_faults(resource.resource_type, resource.configs):
                fault_hook.alter(
                    broker.faults,
                    broker.nodes.ids,
                    resource.resource_name,
                    resource.configs,
                    [SET] * len(resource.configs),
                    request.validate_only,
                    broker.nodes,
                    broker.cluster.partitions,
                )
            else:
                _alter_legacy(
                    broker,
                    resource.resource_type,
                    resource.resource_name,
                    resource.configs,
                    request.validate_only,
                )
        except ApiError as exc:
            response.error_code, response.error_message = exc.code, exc.detail
        responses.append(response)
    await broker.cluster.files_saved()  # the new configs are on disk first
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _default_list(resource_type: int, name: str) -> list[str]:
    """Kafka's default of a list-typed configuration, which APPEND starts from."""
    definition: TopicConfigDef | BrokerConfigDef | None = (
        TOPIC_CONFIGS.get(name)
        if resource_type == ResourceType.TOPIC
        else ALL_BROKER_CONFIGS.get(name)
    )
    if definition is None or not definition.default:
        return []
    return definition.default.split(",")


def _alter_incremental(
    broker: Broker, resource: incremental_request.AlterConfigsResource, validate_only: bool
) -> None:
    current = _current(broker, resource.resource_type, resource.resource_name)
    known: Mapping[str, object] | frozenset[str] = (
        TOPIC_CONFIGS
        if resource.resource_type == ResourceType.TOPIC
        else GROUP_CONFIGS
        if resource.resource_type == ResourceType.GROUP
        else CLIENT_METRICS_CONFIGS
        if resource.resource_type == CLIENT_METRICS
        else ALL_BROKER_CONFIGS
    )
    seen: set[str] = set()
    for op in resource.configs:
        name, value = op.name, op.value
        if name in seen:
            raise InvalidRequestError(f"Error due to duplicate config keys: {name}")
        seen.add(name)
        if op.config_operation == DELETE:
            current.pop(name, None)
            continue
        if op.config_operation not in (SET, APPEND, SUBTRACT):
            raise InvalidRequestError(f"Unknown config operation {op.config_operation} for {name}")
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if op.config_operation == SET:
            current[name] = value
            continue
        listed = name in LIST_CONFIGS if resource.resource_type == CLIENT_METRICS else is_list(name)
        if name in known and not listed:
            verb = "append" if op.config_operation == APPEND else "subtract"
            raise InvalidRequestError(f"Config value {verb} is not allowed for config key: {name}")
        if name not in known:
            # unknown names are INVALID_CONFIG, reported by validation below
            current[name] = value
            continue
        items = [v for v in value.split(",") if v]
        if op.config_operation == APPEND:
            old = (
                current[name].split(",")
                if name in current
                else _default_list(resource.resource_type, name)
            )
            old = [v for v in old if v]
            current[name] = ",".join(old + [v for v in items if v not in old])
        else:
            old = [v for v in current.get(name, "").split(",") if v]
            current[name] = ",".join(v for v in old if v not in items)
    _apply(broker, resource.resource_type, resource.resource_name, current, validate_only)


@handler(IncrementalAlterConfigsRequest)
async def handle_incremental_alter_configs(
    broker: Broker, ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        response = incremental.AlterConfigsResourceResponse(
            error_code=0,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        try:
            _check_access(
                ctx, resource.resource_type, resource.resource_name, acl.AclOperation.ALTER_CONFIGS
            )
            if fault_hook.names_faults(resource.resource_type, resource.configs):
                fault_hook.alter(
                    broker.faults,
                    broker.nodes.ids,
                    resource.resource_name,
                    resource.configs,
                    [op.config_operation for op in resource.configs],
                    request.validate_only,
                    broker.nodes,
                    broker.cluster.partitions,
                )
            else:
                _alter_incremental(broker, resource, request.validate_only)
        except ApiError as exc:
            response.error_code, response.error_message = exc.code, exc.detail
        responses.append(response)
    await broker.cluster.files_saved()  # the new configs are on disk first
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
