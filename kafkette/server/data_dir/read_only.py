"""A broker serving a data directory read-only: requests that would write are refused.

A broker made with ``BrokerConfig(read_only=True)`` (``file:///dir?mode=ro``,
what every ``kafkette`` command opens with ``-b file://``) serves the APIs of
:data:`READ_APIS` as usual and answers every other request, unserved, with the
error Kafka gives a client allowed to read and describe but not to write:

- topics and records (Produce, CreateTopics, DeleteTopics, CreatePartitions,
  DeleteRecords, a topic's configs): ``TOPIC_AUTHORIZATION_FAILED``;
- groups and their offsets (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat,
  AlterShareGroupOffsets, DeleteShareGroupOffsets): ``GROUP_AUTHORIZATION_FAILED``;
- transactions (InitProducerId with a transactional id, AddPartitionsToTxn,
  AddOffsetsToTxn, TxnOffsetCommit, EndTxn): ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``;
- the cluster (an idempotent InitProducerId, WriteTxnMarkers, a broker's
  configs, AlterPartitionReassignments, AlterUserScramCredentials, CreateAcls,
  DeleteAcls): ``CLUSTER_AUTHORIZATION_FAILED``.

An API this table does not know is refused too: with
``CLUSTER_AUTHORIZATION_FAILED`` where its answer has a top-level error code,
else by closing the connection.

These are Kafka's own answers to a principal with READ and DESCRIBE only, so
clients know them: none is retriable (a producer fails at once instead of
retrying until ``delivery.timeout.ms``), each names what was refused, and
where the answer has an error message it says that the directory is opened
read-only. The storage refuses writes too
(:class:`~kafkette.backends.disk.read_only.ReadOnlyDiskLog`); this table makes
sure none reaches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kafkette.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkette.protocol.messages import (
    API_NAMES,
    RESPONSES,
    AddPartitionsToTxnResponse,
    AlterConfigsResponse,
    AlterUserScramCredentialsResponse,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteAclsResponse,
    DeleteGroupsResponse,
    DeleteRecordsResponse,
    DeleteTopicsResponse,
    IncrementalAlterConfigsResponse,
    OffsetCommitResponse,
    ProduceResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)
from kafkette.protocol.messages import add_partitions_to_txn_response as add_partitions
from kafkette.protocol.messages import alter_configs_response as alter_configs
from kafkette.protocol.messages import alter_user_scram_credentials_response as scram
from kafkette.protocol.messages import create_acls_response as create_acls
from kafkette.protocol.messages import create_partitions_response as create_partitions
from kafkette.protocol.messages import create_topics_response as create_topics
from kafkette.protocol.messages import delete_acls_response as delete_acls
from kafkette.protocol.messages import delete_groups_response as delete_groups
from kafkette.protocol.messages import delete_records_response as delete_records
from kafkette.protocol.messages import delete_topics_response as delete_topics
from kafkette.protocol.messages import incremental_alter_configs_response as incremental
from kafkette.protocol.messages import offset_commit_response as offset_commit
from kafkette.protocol.messages import produce_response as produce
from kafkette.protocol.messages import txn_offset_commit_response as txn_offset_commit
from kafkette.protocol.messages import write_txn_markers_response as markers
from kafkette.protocol.schema import Request, Response
from kafkette.server.dispatch import CloseConnection

READ_APIS = frozenset(
    key
    for key, name in API_NAMES.items()
    if name
    in {
        "ApiVersions",
        "ConsumerGroupDescribe",
        "DescribeAcls",
        "DescribeCluster",
        "DescribeConfigs",
        "DescribeGroups",
        "DescribeLogDirs",
        "DescribeProducers",
        "DescribeTopicPartitions",
        "DescribeShareGroupOffsets",
        "DescribeTransactions",
        "DescribeUserScramCredentials",
        "Fetch",
        "FindCoordinator",
        "ListGroups",
        "ListOffsets",
        "ListPartitionReassignments",
        "ListTransactions",
        "Metadata",
        "OffsetFetch",
        "ShareGroupDescribe",
        "OffsetForLeaderEpoch",
        "SaslAuthenticate",
        "SaslHandshake",
    }
)
"""APIs a read-only broker serves; it refuses every other one (see the module)."""

TOPIC = TopicAuthorizationFailedError.code
GROUP = GroupAuthorizationFailedError.code
TRANSACTIONAL_ID = TransactionalIdAuthorizationFailedError.code
CLUSTER = ClusterAuthorizationFailedError.code
_TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC; the others (broker, logger) are the cluster's

Builder = Callable[[Any, str], Response]


def refusal(request: Request, data_dir: str | None) -> Response | None:
    """The answer of a read-only broker serving ``data_dir`` to ``request``: None when
    the request only reads (serve it), else its refusal (see the module)."""
    key = request.API_KEY
    if key in READ_APIS:
        return None
    message = f"the data directory {data_dir} is opened read-only"
    build = _BUILDERS.get(key)
    if build is not None:
        return build(request, message)
    response_class: Any = RESPONSES[key]
    if "error_code" not in attrs.fields_dict(response_class):
        raise CloseConnection(f"{API_NAMES[key]}: {message}")
    response: Response = response_class(error_code=_TOP_LEVEL.get(key, CLUSTER))
    if hasattr(response, "error_message"):
        response.error_message = message
    return response


_TOP_LEVEL: dict[int, int] = {
    key: code
    for name, code in {
        "JoinGroup": GROUP,
        "SyncGroup": GROUP,
        "Heartbeat": GROUP,
        "LeaveGroup": GROUP,
        "OffsetDelete": GROUP,
        "ConsumerGroupHeartbeat": GROUP,
        "AlterShareGroupOffsets": GROUP,
        "DeleteShareGroupOffsets": GROUP,
        "AddOffsetsToTxn": TRANSACTIONAL_ID,
        "EndTxn": TRANSACTIONAL_ID,
        "AlterPartitionReassignments": CLUSTER,
    }.items()
    for key, api in API_NAMES.items()
    if api == name
}
"""Refused APIs whose answer has one top-level error code."""


def _produce(request: Any, message: str) -> Response:
    return ProduceResponse(
        responses=[
            produce.TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    produce.PartitionProduceResponse(
                        index=p.index, error_code=TOPIC, base_offset=-1, error_message=message
                    )
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def _offset_commit(request: Any, message: str) -> Response:
    return OffsetCommitResponse(
        topics=[
            offset_commit.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    offset_commit.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=GROUP
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _txn_offset_commit(request: Any, message: str) -> Response:
    return TxnOffsetCommitResponse(
        topics=[
            txn_offset_commit.TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    txn_offset_commit.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=TRANSACTIONAL_ID
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _create_topics(request: Any, message: str) -> Response:
    return CreateTopicsResponse(
        topics=[
            create_topics.CreatableTopicResult(
                name=topic.name,
                error_code=TOPIC,
                error_message=message,
                num_partitions=-1,
                replication_factor=-1,
            )
            for topic in request.topics
        ]
    )


def _delete_topics(request: Any, message: str) -> Response:
    named = [(t.name, t.topic_id) for t in request.topics]
    named += [(name, None) for name in request.topic_names]
    return DeleteTopicsResponse(
        responses=[
            delete_topics.DeletableTopicResult(
                name=name,
                **({"topic_id": topic_id} if topic_id is not None else {}),
                error_code=TOPIC,
                error_message=message,
            )
            for name, topic_id in named
        ]
    )


def _create_partitions(request: Any, message: str) -> Response:
    return CreatePartitionsResponse(
        results=[
            create_partitions.CreatePartitionsTopicResult(
                name=topic.name, error_code=TOPIC, error_message=message
            )
            for topic in request.topics
        ]
    )


def _delete_records(request: Any, message: str) -> Response:
    return DeleteRecordsResponse(
        topics=[
            delete_records.DeleteRecordsTopicResult(
                name=topic.name,
                partitions=[
                    delete_records.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1, error_code=TOPIC
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _config_error(resource: Any) -> int:
    return TOPIC if resource.resource_type == _TOPIC_RESOURCE else CLUSTER


def _alter_configs(request: Any, message: str) -> Response:
    return AlterConfigsResponse(
        responses=[
            alter_configs.AlterConfigsResourceResponse(
                error_code=_config_error(r),
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        ]
    )


def _incremental_alter_configs(request: Any, message: str) -> Response:
    return IncrementalAlterConfigsResponse(
        responses=[
            incremental.AlterConfigsResourceResponse(
                error_code=_config_error(r),
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        ]
    )


def _delete_groups(request: Any, message: str) -> Response:
    return DeleteGroupsResponse(
        results=[
            delete_groups.DeletableGroupResult(group_id=group, error_code=GROUP)
            for group in request.groups_names
        ]
    )


def _add_partitions_to_txn(request: Any, message: str) -> Response:
    def results(topics: Any) -> list[Any]:
        return [
            add_partitions.AddPartitionsToTxnTopicResult(
                name=topic.name,
                results_by_partition=[
                    add_partitions.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=TRANSACTIONAL_ID
                    )
                    for p in topic.partitions
                ],
            )
            for topic in topics
        ]

    return AddPartitionsToTxnResponse(
        error_code=TRANSACTIONAL_ID,
        results_by_transaction=[
            add_partitions.AddPartitionsToTxnResult(
                transactional_id=t.transactional_id, topic_results=results(t.topics)
            )
            for t in request.transactions
        ],
        results_by_topic_v3_and_below=results(request.v3_and_below_topics),
    )


def _write_txn_markers(request: Any, message: str) -> Response:
    return WriteTxnMarkersResponse(
        markers=[
            markers.WritableTxnMarkerResult(
                producer_id=marker.producer_id,
                topics=[
                    markers.WritableTxnMarkerTopicResult(
                        name=topic.name,
                        partitions=[
                            markers.WritableTxnMarkerPartitionResult(
                                partition_index=p, error_code=CLUSTER
                            )
                            for p in topic.partition_indexes
                        ],
                    )
                    for topic in marker.topics
                ],
            )
            for marker in request.markers
        ]
    )


def _alter_user_scram_credentials(request: Any, message: str) -> Response:
    users = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    return AlterUserScramCredentialsResponse(
        results=[
            scram.AlterUserScramCredentialsResult(
                user=user, error_code=CLUSTER, error_message=message
            )
            for user in users
        ]
    )


def _create_acls(request: Any, message: str) -> Response:
    return CreateAclsResponse(
        results=[
            create_acls.AclCreationResult(error_code=CLUSTER, error_message=message)
            for _ in request.creations
        ]
    )


def _delete_acls(request: Any, message: str) -> Response:
    return DeleteAclsResponse(
        filter_results=[
            delete_acls.DeleteAclsFilterResult(error_code=CLUSTER, error_message=message)
            for _ in request.filters
        ]
    )


def _init_producer_id_refusal(request: Any, message: str) -> Response:
    response: Response = RESPONSES[request.API_KEY](  # type: ignore[call-arg]
        error_code=TRANSACTIONAL_ID if request.transactional_id else CLUSTER,
        producer_id=-1,
        producer_epoch=-1,
    )
    return response


_BUILDERS: dict[int, Builder] = {
    key: build
    for name, build in {
        "Produce": _produce,
        "OffsetCommit": _offset_commit,
        "TxnOffsetCommit": _txn_offset_commit,
        "CreateTopics": _create_topics,
        "DeleteTopics": _delete_topics,
        "CreatePartitions": _create_partitions,
        "DeleteRecords": _delete_records,
        "AlterConfigs": _alter_configs,
        "IncrementalAlterConfigs": _incremental_alter_configs,
        "DeleteGroups": _delete_groups,
        "AddPartitionsToTxn": _add_partitions_to_txn,
        "WriteTxnMarkers": _write_txn_markers,
        "AlterUserScramCredentials": _alter_user_scram_credentials,
        "InitProducerId": _init_producer_id_refusal,
        "CreateAcls": _create_acls,
        "DeleteAcls": _delete_acls,
    }.items()
    for key, api in API_NAMES.items()
    if api == name
}
"""Refused APIs whose answer has an error per topic, partition, resource or user."""
