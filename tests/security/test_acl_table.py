"""Kafka's authorization checks on every API, one row per (API, resource, operation).

A broker with Kafka's StandardAuthorizer and ``super.users=User:admin`` serves
requests in process, through the wire codec, as ``User:alice`` from 10.1.2.3.
Each row names the ACL the request needs and the ACLs granted first (e.g.
OffsetCommit's topic READ row grants group READ), reads the one error code
that matters, and says which code Kafka's KafkaApis gives when the ACL is
missing and which the request gets once it is there; every row is also run as
the super user (no ACL needed) and as ``User:ANONYMOUS`` (denied). The separate
tests check prefixed and deny ACLs, the filtering of Metadata, ListGroups,
ListTransactions, OffsetFetch and DescribeTransactions, that a refused Produce or
commit writes nothing, authorization before existence, Kafka's refusal texts, the
authorized-operation bit fields, and (hypothesis) the handlers against a model of
Kafka's rules for random ACL sets.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from kafkette.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkette.protocol.messages import (
    API_NAMES,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafkette.protocol.messages import add_partitions_to_txn_request as apt
from kafkette.protocol.messages import alter_configs_request as ac
from kafkette.protocol.messages import alter_partition_reassignments_request as apr
from kafkette.protocol.messages import alter_share_group_offsets_request as aso
from kafkette.protocol.messages import alter_user_scram_credentials_request as aus
from kafkette.protocol.messages import create_acls_request as ca
from kafkette.protocol.messages import create_partitions_request as cp
from kafkette.protocol.messages import create_topics_request as ct
from kafkette.protocol.messages import delete_acls_request as da
from kafkette.protocol.messages import delete_records_request as dr
from kafkette.protocol.messages import delete_share_group_offsets_request as dso
from kafkette.protocol.messages import delete_topics_request as dt
from kafkette.protocol.messages import describe_configs_request as dc
from kafkette.protocol.messages import describe_producers_request as dp
from kafkette.protocol.messages import describe_share_group_offsets_request as dsgo
from kafkette.protocol.messages import describe_topic_partitions_request as dtp
from kafkette.protocol.messages import fetch_request as fr
from kafkette.protocol.messages import incremental_alter_configs_request as iac
from kafkette.protocol.messages import join_group_request as jg
from kafkette.protocol.messages import leave_group_request as lg
from kafkette.protocol.messages import list_offsets_request as lo
from kafkette.protocol.messages import metadata_request as md
from kafkette.protocol.messages import offset_commit_request as oc
from kafkette.protocol.messages import offset_delete_request as od
from kafkette.protocol.messages import offset_fetch_request as of
from kafkette.protocol.messages import offset_for_leader_epoch_request as ofle
from kafkette.protocol.messages import produce_request as pr
from kafkette.protocol.messages import share_acknowledge_request as sa
from kafkette.protocol.messages import share_fetch_request as sf
from kafkette.protocol.messages import sync_group_request as sg
from kafkette.protocol.messages import txn_offset_commit_request as toc
from kafkette.protocol.messages import write_txn_markers_request as wtm
from kafkette.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.schema import Request
from kafkette.server import Broker, BrokerConfig
from kafkette.server.config.broker_config import STANDARD_AUTHORIZER
from kafkette.server.dispatch import ANONYMOUS, HANDLERS, CloseConnection, RequestContext
from tests.server.dataplane import FakeClock, batch

pytestmark = pytest.mark.anyio

ADMIN = "User:admin"
ALICE = "User:alice"

# Kafka's error codes.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79

# ConfigResource types (DescribeConfigs, AlterConfigs), not ACL resource types.
CONFIG_TOPIC, CONFIG_BROKER = 2, 4

TOPIC, GROUP, CLUSTER, TXN_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
Op = AclOperation

Acl = tuple[ResourceType, str, AclOperation]
"""A resource and an operation on it: what a request needs, or an ACL to grant."""


class Rig:
    """A broker with the authorizer on, topic ``t`` (2 partitions) made by the admin,
    and what a row's setup leaves for its request (member, producer id)."""

    def __init__(self) -> None:
        self.broker = Broker(
            BrokerConfig(
                authorizer_class_name=STANDARD_AUTHORIZER,
                super_users=(ADMIN,),
                group_min_session_timeout_ms=100,
            ),
            clock=FakeClock(),
        )
        self.topic_id = uuid.UUID(int=0)
        self.member_id = ""
        self.generation = -1
        self.producer_id = -1
        self.producer_epoch = -1

    async def call(self, request: Request, version: int, principal: str | None = ALICE) -> Any:
        """``request`` at ``version`` through the codec, as ``principal`` (None: a
        connection that did not authenticate), the decoded response back."""
        frame = encode_request(request, version, 7, "tests")
        header, decoded = decode_request(memoryview(bytes(frame)))
        ctx = RequestContext(header, "10.1.2.3:5555", authorizer=self.broker.authorizer)
        if principal is not None:
            ctx.principal = principal
        response = await self.broker.handle(ctx, decoded)
        assert response is not None
        correlation, parsed = decode_response(
            bytes(encode_response(response, version, 7)), request.API_KEY, version
        )
        assert correlation == 7
        return parsed

    async def admin(self, request: Request, version: int) -> Any:
        return await self.call(request, version, ADMIN)

    async def grant(
        self,
        acls: Sequence[Acl],
        *,
        principal: str = ALICE,
        permission: AclPermissionType = AclPermissionType.ALLOW,
        pattern: PatternType = PatternType.LITERAL,
    ) -> None:
        """Create the ACLs (as the admin, with CreateAcls)."""
        created = await self.admin(
            CreateAclsRequest(
                creations=[
                    ca.AclCreation(
                        resource_type=kind,
                        resource_name=name,
                        resource_pattern_type=pattern,
                        principal=principal,
                        host="*",
                        operation=operation,
                        permission_type=permission,
                    )
                    for kind, name, operation in acls
                ]
            ),
            3,
        )
        assert [r.error_code for r in created.results] == [NONE] * len(acls)


async def make_rig() -> Rig:
    rig = Rig()
    created = await rig.admin(
        CreateTopicsRequest(
            topics=[ct.CreatableTopic(name="t", num_partitions=2, replication_factor=1)]
        ),
        7,
    )
    assert [(t.name, t.error_code) for t in created.topics] == [("t", NONE)]
    rig.topic_id = created.topics[0].topic_id
    return rig


# What a row's request finds in place, made by the admin.


async def committed_offsets(rig: Rig) -> None:
    """Group ``g`` (no members) has an offset committed for t-0."""
    response = await rig.admin(commit("g", "t"), 8)
    assert response.topics[0].partitions[0].error_code == NONE


async def member(rig: Rig) -> None:
    """Group ``g`` is stable with one member (the admin's)."""
    first = await rig.admin(join(""), 5)
    assert first.error_code == MEMBER_ID_REQUIRED
    joined = await rig.admin(join(first.member_id), 5)
    assert joined.error_code == NONE
    rig.member_id, rig.generation = joined.member_id, joined.generation_id
    synced = await rig.admin(
        SyncGroupRequest(
            group_id="g",
            generation_id=rig.generation,
            member_id=rig.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[sg.SyncGroupRequestAssignment(rig.member_id, b"a")],
        ),
        5,
    )
    assert synced.error_code == NONE


async def producer(rig: Rig) -> None:
    """Transactional id ``tx`` has a producer id and epoch."""
    response = await rig.admin(
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000), 4
    )
    assert response.error_code == NONE
    rig.producer_id, rig.producer_epoch = response.producer_id, response.producer_epoch


async def transaction(rig: Rig) -> None:
    """Transactional id ``tx`` has a transaction holding t-0."""
    await producer(rig)
    added = await rig.admin(add_partitions(rig, "t"), 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0


async def offsets_transaction(rig: Rig) -> None:
    """Transactional id ``tx`` has a transaction holding group ``g``'s offsets."""
    await producer(rig)
    added = await rig.admin(add_offsets(rig), 3)
    assert added.error_code == NONE


async def empty_share_group(rig: Rig) -> None:
    """Share group ``sg`` exists with no members (the admin's member joined and left)."""
    joined = await rig.admin(
        ShareGroupHeartbeatRequest(
            group_id="sg", member_id="sm", member_epoch=0, subscribed_topic_names=["t"]
        ),
        1,
    )
    assert joined.error_code == NONE
    left = await rig.admin(
        ShareGroupHeartbeatRequest(group_id="sg", member_id="sm", member_epoch=-1), 1
    )
    assert left.error_code == NONE


# Requests.


def produce(topic: str = "t") -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            pr.TopicProduceData(topic, [pr.PartitionProduceData(0, batch([(b"k", b"v")]))])
        ],
    )


def transactional_produce(rig: Rig) -> ProduceRequest:
    records = batch(
        [(b"k", b"v")],
        producer_id=rig.producer_id,
        producer_epoch=rig.producer_epoch,
        base_sequence=0,
        transactional=True,
    )
    return ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout_ms=30_000,
        topic_data=[pr.TopicProduceData("t", [pr.PartitionProduceData(0, records)])],
    )


def fetch(rig: Rig) -> FetchRequest:
    return FetchRequest(
        max_bytes=1 << 20,
        topics=[
            fr.FetchTopic(
                topic="t",
                topic_id=rig.topic_id,
                partitions=[fr.FetchPartition(partition=0, partition_max_bytes=1 << 20)],
            )
        ],
    )


def commit(
    group: str, topic: str, member_id: str = "", generation: int = -1
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        member_id=member_id,
        generation_id_or_member_epoch=generation,
        topics=[
            oc.OffsetCommitRequestTopic(
                topic, [oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)]
            )
        ],
    )


def join(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[jg.JoinGroupRequestProtocol("range", b"m")],
    )


def add_partitions(rig: Rig, topic: str) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=rig.producer_id,
        v3_and_below_producer_epoch=rig.producer_epoch,
        v3_and_below_topics=[apt.AddPartitionsToTxnTopic(topic, [0])],
    )


def add_offsets(rig: Rig) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(
        transactional_id="tx",
        producer_id=rig.producer_id,
        producer_epoch=rig.producer_epoch,
        group_id="g",
    )


def txn_commit(rig: Rig) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=rig.producer_id,
        producer_epoch=rig.producer_epoch,
        topics=[
            toc.TxnOffsetCommitRequestTopic(
                "t", [toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)]
            )
        ],
    )


def offset_fetch(group: str = "g") -> OffsetFetchRequest:
    return OffsetFetchRequest(
        groups=[
            of.OffsetFetchRequestGroup(
                group_id=group, topics=[of.OffsetFetchRequestTopics("t", [0])]
            )
        ]
    )


def describe_configs(kind: int, name: str) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[dc.DescribeConfigsResource(kind, name, configuration_keys=None)]
    )


def alter_configs(kind: int, name: str, config: str, value: str) -> AlterConfigsRequest:
    return AlterConfigsRequest(
        resources=[ac.AlterConfigsResource(kind, name, [ac.AlterableConfig(config, value)])]
    )


def incremental_alter_configs(
    kind: int, name: str, config: str, value: str
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                kind, name, [iac.AlterableConfig(config, config_operation=0, value=value)]
            )
        ]
    )


def acl_filter(**fields: Any) -> dict[str, Any]:
    everything: dict[str, Any] = {
        "resource_type_filter": ResourceType.ANY,
        "resource_name_filter": None,
        "pattern_type_filter": PatternType.ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }
    everything.update(fields)
    return everything


def scram_upsert() -> AlterUserScramCredentialsRequest:
    return AlterUserScramCredentialsRequest(
        upsertions=[
            aus.ScramCredentialUpsertion(
                name="bob",
                mechanism=1,
                iterations=4096,
                salt=b"s" * 16,
                salted_password=b"p" * 32,
            )
        ]
    )


# Reading the code that matters.


def partition_code(response: Any) -> int:
    """``responses[0].partition_responses[0]`` (Produce)."""
    return int(response.responses[0].partition_responses[0].error_code)


def topic_partition_code(response: Any) -> int:
    """``topics[0].partitions[0].error_code`` (most per-partition answers)."""
    return int(response.topics[0].partitions[0].error_code)


def top_code(response: Any) -> int:
    return int(response.error_code)


def field(*path: str | int) -> Callable[[Any], int]:
    """A reader following ``path`` (attribute names and list indexes)."""

    def read(response: Any) -> int:
        value = response
        for step in path:
            value = value[step] if isinstance(step, int) else getattr(value, step)
        return int(value)

    return read


@attrs.frozen
class Row:
    """One API's check of one ACL."""

    api: str
    version: int
    request: Callable[[Rig], Request]
    needs: Acl
    code: Callable[[Any], int]
    denied: int
    """Kafka's code without the ACL."""
    allowed: int
    """The code with it: NONE where the request can succeed."""
    prerequisites: tuple[Acl, ...] = ()
    """Granted in both cases: the other ACLs the request needs."""
    setup: Callable[[Rig], Awaitable[None]] | None = None

    @property
    def id(self) -> str:
        kind, name, operation = self.needs
        return f"{self.api}-v{self.version}-{kind.name}:{name}-{operation.name}"


CLUSTER_ACL = (CLUSTER, CLUSTER_NAME)

ROWS = [
    Row("Produce", 11, lambda rig: produce(), (TOPIC, "t", Op.WRITE), partition_code, 29, NONE),
    Row("Produce", 3, lambda rig: produce(), (TOPIC, "t", Op.WRITE), partition_code, 29, NONE),
    Row(
        "Produce",
        11,
        transactional_produce,
        (TXN_ID, "tx", Op.WRITE),
        partition_code,
        53,
        NONE,
        prerequisites=((TOPIC, "t", Op.WRITE),),
        setup=transaction,
    ),
    Row(
        "Fetch",
        12,
        fetch,
        (TOPIC, "t", Op.READ),
        field("responses", 0, "partitions", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "Fetch",
        16,
        fetch,
        (TOPIC, "t", Op.READ),
        field("responses", 0, "partitions", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "ListOffsets",
        8,
        lambda rig: ListOffsetsRequest(
            replica_id=-1,
            topics=[lo.ListOffsetsTopic("t", [lo.ListOffsetsPartition(0, timestamp=-1)])],
        ),
        (TOPIC, "t", Op.DESCRIBE),
        topic_partition_code,
        29,
        NONE,
    ),
    Row(
        "ListOffsets",
        1,
        lambda rig: ListOffsetsRequest(
            replica_id=-1,
            topics=[lo.ListOffsetsTopic("t", [lo.ListOffsetsPartition(0, timestamp=-1)])],
        ),
        (TOPIC, "t", Op.DESCRIBE),
        topic_partition_code,
        29,
        NONE,
    ),
    Row(
        "Metadata",
        12,
        lambda rig: MetadataRequest(topics=[md.MetadataRequestTopic(name="t")]),
        (TOPIC, "t", Op.DESCRIBE),
        field("topics", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "Metadata",
        4,
        lambda rig: MetadataRequest(topics=[md.MetadataRequestTopic(name="t")]),
        (TOPIC, "t", Op.DESCRIBE),
        field("topics", 0, "error_code"),
        29,
        NONE,
    ),
    # KIP-966: a named topic the principal may not describe is refused, not left out.
    Row(
        "DescribeTopicPartitions",
        0,
        lambda rig: DescribeTopicPartitionsRequest(topics=[dtp.TopicRequest("t")]),
        (TOPIC, "t", Op.DESCRIBE),
        field("topics", 0, "error_code"),
        29,
        NONE,
    ),
    # Auto-creation needs CREATE on the cluster or the topic, DESCRIBE first.
    Row(
        "Metadata",
        12,
        lambda rig: MetadataRequest(topics=[md.MetadataRequestTopic(name="auto")]),
        (TOPIC, "auto", Op.CREATE),
        field("topics", 0, "error_code"),
        29,
        NONE,
        prerequisites=((TOPIC, "auto", Op.DESCRIBE),),
    ),
    Row(
        "Metadata",
        12,
        lambda rig: MetadataRequest(topics=[md.MetadataRequestTopic(name="auto")]),
        (*CLUSTER_ACL, Op.CREATE),
        field("topics", 0, "error_code"),
        29,
        NONE,
        prerequisites=((TOPIC, "auto", Op.DESCRIBE),),
    ),
    Row(
        "OffsetForLeaderEpoch",
        4,
        lambda rig: OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[ofle.OffsetForLeaderTopic("t", [ofle.OffsetForLeaderPartition(0)])],
        ),
        (TOPIC, "t", Op.DESCRIBE),
        topic_partition_code,
        29,
        NONE,
    ),
    # KIP-320: consumers ask with DESCRIBE on the topic, brokers with CLUSTER_ACTION.
    Row(
        "OffsetForLeaderEpoch",
        4,
        lambda rig: OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[ofle.OffsetForLeaderTopic("t", [ofle.OffsetForLeaderPartition(0)])],
        ),
        (*CLUSTER_ACL, Op.CLUSTER_ACTION),
        topic_partition_code,
        29,
        NONE,
    ),
    Row(
        "DeleteRecords",
        2,
        lambda rig: DeleteRecordsRequest(
            topics=[dr.DeleteRecordsTopic("t", [dr.DeleteRecordsPartition(0, 0)])],
            timeout_ms=30_000,
        ),
        (TOPIC, "t", Op.DELETE),
        topic_partition_code,
        29,
        NONE,
    ),
    Row(
        "CreateTopics",
        7,
        lambda rig: CreateTopicsRequest(topics=[ct.CreatableTopic("new", 1, 1)]),
        (TOPIC, "new", Op.CREATE),
        field("topics", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "CreateTopics",
        7,
        lambda rig: CreateTopicsRequest(topics=[ct.CreatableTopic("new", 1, 1)]),
        (*CLUSTER_ACL, Op.CREATE),
        field("topics", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "DeleteTopics",
        6,
        lambda rig: DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="t")], timeout_ms=30_000),
        (TOPIC, "t", Op.DELETE),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    # Kafka's controller lets DELETE on the cluster delete any topic.
    Row(
        "DeleteTopics",
        6,
        lambda rig: DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="t")], timeout_ms=30_000),
        (*CLUSTER_ACL, Op.DELETE),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "DeleteTopics",
        6,
        lambda rig: DeleteTopicsRequest(
            topics=[dt.DeleteTopicState(name=None, topic_id=rig.topic_id)], timeout_ms=30_000
        ),
        (TOPIC, "t", Op.DELETE),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "DeleteTopics",
        3,
        lambda rig: DeleteTopicsRequest(topic_names=["t"], timeout_ms=30_000),
        (TOPIC, "t", Op.DELETE),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "CreatePartitions",
        3,
        lambda rig: CreatePartitionsRequest(
            topics=[cp.CreatePartitionsTopic("t", 3, None)], timeout_ms=30_000
        ),
        (TOPIC, "t", Op.ALTER),
        field("results", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "DescribeConfigs",
        4,
        lambda rig: describe_configs(CONFIG_TOPIC, "t"),
        (TOPIC, "t", Op.DESCRIBE_CONFIGS),
        field("results", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "DescribeConfigs",
        4,
        lambda rig: describe_configs(CONFIG_BROKER, "1"),
        (*CLUSTER_ACL, Op.DESCRIBE_CONFIGS),
        field("results", 0, "error_code"),
        31,
        NONE,
    ),
    Row(
        "DescribeConfigs",
        1,
        lambda rig: describe_configs(CONFIG_TOPIC, "t"),
        (TOPIC, "t", Op.DESCRIBE_CONFIGS),
        field("results", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "AlterConfigs",
        2,
        lambda rig: alter_configs(CONFIG_TOPIC, "t", "retention.ms", "60000"),
        (TOPIC, "t", Op.ALTER_CONFIGS),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "AlterConfigs",
        2,
        lambda rig: alter_configs(CONFIG_BROKER, "1", "log.retention.ms", "60000"),
        (*CLUSTER_ACL, Op.ALTER_CONFIGS),
        field("responses", 0, "error_code"),
        31,
        NONE,
    ),
    Row(
        "IncrementalAlterConfigs",
        1,
        lambda rig: incremental_alter_configs(CONFIG_TOPIC, "t", "retention.ms", "60000"),
        (TOPIC, "t", Op.ALTER_CONFIGS),
        field("responses", 0, "error_code"),
        29,
        NONE,
    ),
    Row(
        "IncrementalAlterConfigs",
        1,
        lambda rig: incremental_alter_configs(CONFIG_BROKER, "1", "log.retention.ms", "60000"),
        (*CLUSTER_ACL, Op.ALTER_CONFIGS),
        field("responses", 0, "error_code"),
        31,
        NONE,
    ),
    Row(
        "FindCoordinator",
        6,
        lambda rig: FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]),
        (GROUP, "g", Op.DESCRIBE),
        field("coordinators", 0, "error_code"),
        30,
        NONE,
    ),
    Row(
        "FindCoordinator",
        2,
        lambda rig: FindCoordinatorRequest(key="g", key_type=0),
        (GROUP, "g", Op.DESCRIBE),
        top_code,
        30,
        NONE,
    ),
    Row(
        "FindCoordinator",
        6,
        lambda rig: FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]),
        (TXN_ID, "tx", Op.DESCRIBE),
        field("coordinators", 0, "error_code"),
        53,
        NONE,
    ),
    Row(
        "FindCoordinator",
        2,
        lambda rig: FindCoordinatorRequest(key="tx", key_type=1),
        (TXN_ID, "tx", Op.DESCRIBE),
        top_code,
        53,
        NONE,
    ),
    # From v4 a new member is first given its id (MEMBER_ID_REQUIRED); before, it joins.
    Row("JoinGroup", 9, lambda rig: join(""), (GROUP, "g", Op.READ), top_code, 30, 79),
    Row("JoinGroup", 3, lambda rig: join(""), (GROUP, "g", Op.READ), top_code, 30, NONE),
    Row(
        "SyncGroup",
        5,
        lambda rig: SyncGroupRequest(
            group_id="g",
            generation_id=rig.generation,
            member_id=rig.member_id,
            protocol_type="consumer",
            protocol_name="range",
        ),
        (GROUP, "g", Op.READ),
        top_code,
        30,
        NONE,
        setup=member,
    ),
    Row(
        "Heartbeat",
        4,
        lambda rig: HeartbeatRequest(
            group_id="g", generation_id=rig.generation, member_id=rig.member_id
        ),
        (GROUP, "g", Op.READ),
        top_code,
        30,
        NONE,
        setup=member,
    ),
    Row(
        "LeaveGroup",
        5,
        lambda rig: LeaveGroupRequest(
            group_id="g", members=[lg.MemberIdentity(member_id=rig.member_id)]
        ),
        (GROUP, "g", Op.READ),
        top_code,
        30,
        NONE,
        setup=member,
    ),
    Row(
        "LeaveGroup",
        0,
        lambda rig: LeaveGroupRequest(group_id="g", member_id=rig.member_id),
        (GROUP, "g", Op.READ),
        top_code,
        30,
        NONE,
        setup=member,
    ),
    Row(
        "OffsetCommit",
        8,
        lambda rig: commit("g", "t"),
        (GROUP, "g", Op.READ),
        topic_partition_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.READ),),
    ),
    Row(
        "OffsetCommit",
        8,
        lambda rig: commit("g", "t"),
        (TOPIC, "t", Op.READ),
        topic_partition_code,
        29,
        NONE,
        prerequisites=((GROUP, "g", Op.READ),),
    ),
    Row(
        "OffsetCommit",
        2,
        lambda rig: commit("g", "t"),
        (GROUP, "g", Op.READ),
        topic_partition_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.READ),),
    ),
    Row(
        "OffsetFetch",
        8,
        lambda rig: offset_fetch(),
        (GROUP, "g", Op.DESCRIBE),
        field("groups", 0, "error_code"),
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.DESCRIBE),),
        setup=committed_offsets,
    ),
    Row(
        "OffsetFetch",
        8,
        lambda rig: offset_fetch(),
        (TOPIC, "t", Op.DESCRIBE),
        field("groups", 0, "topics", 0, "partitions", 0, "error_code"),
        29,
        NONE,
        prerequisites=((GROUP, "g", Op.DESCRIBE),),
        setup=committed_offsets,
    ),
    Row(
        "OffsetFetch",
        7,
        lambda rig: OffsetFetchRequest(group_id="g", topics=[of.OffsetFetchRequestTopic("t", [0])]),
        (GROUP, "g", Op.DESCRIBE),
        top_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.DESCRIBE),),
        setup=committed_offsets,
    ),
    Row(
        "OffsetDelete",
        0,
        lambda rig: OffsetDeleteRequest(
            group_id="g",
            topics=[od.OffsetDeleteRequestTopic("t", [od.OffsetDeleteRequestPartition(0)])],
        ),
        (GROUP, "g", Op.DELETE),
        top_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.READ),),
        setup=committed_offsets,
    ),
    Row(
        "OffsetDelete",
        0,
        lambda rig: OffsetDeleteRequest(
            group_id="g",
            topics=[od.OffsetDeleteRequestTopic("t", [od.OffsetDeleteRequestPartition(0)])],
        ),
        (TOPIC, "t", Op.READ),
        topic_partition_code,
        29,
        NONE,
        prerequisites=((GROUP, "g", Op.DELETE),),
        setup=committed_offsets,
    ),
    Row(
        "DescribeGroups",
        5,
        lambda rig: DescribeGroupsRequest(groups=["g"]),
        (GROUP, "g", Op.DESCRIBE),
        field("groups", 0, "error_code"),
        30,
        NONE,
        setup=member,
    ),
    Row(
        "DeleteGroups",
        2,
        lambda rig: DeleteGroupsRequest(groups_names=["g"]),
        (GROUP, "g", Op.DELETE),
        field("results", 0, "error_code"),
        30,
        NONE,
        setup=committed_offsets,
    ),
    Row(
        "ConsumerGroupHeartbeat",
        0,
        lambda rig: ConsumerGroupHeartbeatRequest(
            group_id="cg",
            member_epoch=0,
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        ),
        (GROUP, "cg", Op.READ),
        top_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.DESCRIBE),),
    ),
    Row(
        "ConsumerGroupHeartbeat",
        0,
        lambda rig: ConsumerGroupHeartbeatRequest(
            group_id="cg",
            member_epoch=0,
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        ),
        (TOPIC, "t", Op.DESCRIBE),
        top_code,
        29,
        NONE,
        prerequisites=((GROUP, "cg", Op.READ),),
    ),
    Row(
        "ConsumerGroupDescribe",
        0,
        lambda rig: ConsumerGroupDescribeRequest(group_ids=["cg"]),
        (GROUP, "cg", Op.DESCRIBE),
        field("groups", 0, "error_code"),
        30,
        GROUP_ID_NOT_FOUND,
    ),
    Row(
        "ShareGroupHeartbeat",
        1,
        lambda rig: ShareGroupHeartbeatRequest(
            group_id="sg", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
        ),
        (GROUP, "sg", Op.READ),
        top_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.DESCRIBE),),
    ),
    Row(
        "ShareGroupHeartbeat",
        1,
        lambda rig: ShareGroupHeartbeatRequest(
            group_id="sg", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
        ),
        (TOPIC, "t", Op.DESCRIBE),
        top_code,
        29,
        NONE,
        prerequisites=((GROUP, "sg", Op.READ),),
    ),
    Row(
        "ShareGroupDescribe",
        1,
        lambda rig: ShareGroupDescribeRequest(group_ids=["sg"]),
        (GROUP, "sg", Op.DESCRIBE),
        field("groups", 0, "error_code"),
        30,
        GROUP_ID_NOT_FOUND,
    ),
    Row(
        "ShareFetch",
        2,
        lambda rig: sf.ShareFetchRequest(
            group_id="sg",
            member_id="m",
            topics=[sf.FetchTopic(rig.topic_id, [sf.FetchPartition(0)])],
        ),
        (GROUP, "sg", Op.READ),
        top_code,
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.READ),),
    ),
    Row(
        "ShareFetch",
        2,
        lambda rig: sf.ShareFetchRequest(
            group_id="sg",
            member_id="m",
            topics=[sf.FetchTopic(rig.topic_id, [sf.FetchPartition(0)])],
        ),
        (TOPIC, "t", Op.READ),
        field("responses", 0, "partitions", 0, "error_code"),
        29,
        NONE,
        prerequisites=((GROUP, "sg", Op.READ),),
    ),
    Row(
        "ShareAcknowledge",
        2,
        lambda rig: sa.ShareAcknowledgeRequest(
            group_id="sg",
            member_id="m",
            share_session_epoch=1,
            topics=[sa.AcknowledgeTopic(rig.topic_id, [sa.AcknowledgePartition(0, [])])],
        ),
        (GROUP, "sg", Op.READ),
        top_code,
        30,
        122,  # SHARE_SESSION_NOT_FOUND: allowed, and no session opened
    ),
    Row(
        "DescribeShareGroupOffsets",
        1,
        lambda rig: dsgo.DescribeShareGroupOffsetsRequest(
            groups=[
                dsgo.DescribeShareGroupOffsetsRequestGroup(
                    "sg", [dsgo.DescribeShareGroupOffsetsRequestTopic("t", [0])]
                )
            ]
        ),
        (GROUP, "sg", Op.DESCRIBE),
        field("groups", 0, "error_code"),
        30,
        NONE,
        prerequisites=((TOPIC, "t", Op.DESCRIBE),),
    ),
    Row(
        "DescribeShareGroupOffsets",
        1,
        lambda rig: dsgo.DescribeShareGroupOffsetsRequest(
            groups=[
                dsgo.DescribeShareGroupOffsetsRequestGroup(
                    "sg", [dsgo.DescribeShareGroupOffsetsRequestTopic("t", [0])]
                )
            ]
        ),
        (TOPIC, "t", Op.DESCRIBE),
        field("groups", 0, "topics", 0, "partitions", 0, "error_code"),
        29,
        NONE,
        prerequisites=((GROUP, "sg", Op.DESCRIBE),),
    ),
    Row(
        "AlterShareGroupOffsets",
        0,
        lambda rig: aso.AlterShareGroupOffsetsRequest(
            group_id="sg",
            topics=[
                aso.AlterShareGroupOffsetsRequestTopic(
                    "t", [aso.AlterShareGroupOffsetsRequestPartition(0, 0)]
                )
            ],
        ),
        (GROUP, "sg", Op.READ),
        top_code,
        30,
        GROUP_ID_NOT_FOUND,
        prerequisites=((TOPIC, "t", Op.READ),),
    ),
    Row(
        "AlterShareGroupOffsets",
        0,
        lambda rig: aso.AlterShareGroupOffsetsRequest(
            group_id="sg",
            topics=[
                aso.AlterShareGroupOffsetsRequestTopic(
                    "t", [aso.AlterShareGroupOffsetsRequestPartition(0, 0)]
                )
            ],
        ),
        (TOPIC, "t", Op.READ),
        field("responses", 0, "partitions", 0, "error_code"),
        29,
        NONE,
        prerequisites=((GROUP, "sg", Op.READ),),
        setup=empty_share_group,
    ),
    Row(
        "DeleteShareGroupOffsets",
        0,
        lambda rig: dso.DeleteShareGroupOffsetsRequest(
            group_id="sg", topics=[dso.DeleteShareGroupOffsetsRequestTopic("t")]
        ),
        (GROUP, "sg", Op.DELETE),
        top_code,
        30,
        GROUP_ID_NOT_FOUND,
        prerequisites=((TOPIC, "t", Op.READ),),
    ),
    Row(
        "DeleteShareGroupOffsets",
        0,
        lambda rig: dso.DeleteShareGroupOffsetsRequest(
            group_id="sg", topics=[dso.DeleteShareGroupOffsetsRequestTopic("t")]
        ),
        (TOPIC, "t", Op.READ),
        field("responses", 0, "error_code"),
        29,
        3,  # UNKNOWN_TOPIC_OR_PARTITION: allowed, and the group has no state for t
        prerequisites=((GROUP, "sg", Op.DELETE),),
        setup=empty_share_group,
    ),
    Row(
        "InitProducerId",
        5,
        lambda rig: InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000),
        (TXN_ID, "tx", Op.WRITE),
        top_code,
        53,
        NONE,
    ),
    Row(
        "InitProducerId",
        5,
        lambda rig: InitProducerIdRequest(transactional_id=None),
        (*CLUSTER_ACL, Op.IDEMPOTENT_WRITE),
        top_code,
        31,
        NONE,
    ),
    # Kafka's other way to idempotence: WRITE on some topic (authorizeByResourceType).
    Row(
        "InitProducerId",
        5,
        lambda rig: InitProducerIdRequest(transactional_id=None),
        (TOPIC, "t", Op.WRITE),
        top_code,
        31,
        NONE,
    ),
    Row(
        "AddPartitionsToTxn",
        3,
        lambda rig: add_partitions(rig, "t"),
        (TXN_ID, "tx", Op.WRITE),
        field(
            "results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code"
        ),
        53,
        NONE,
        prerequisites=((TOPIC, "t", Op.WRITE),),
        setup=producer,
    ),
    Row(
        "AddPartitionsToTxn",
        3,
        lambda rig: add_partitions(rig, "t"),
        (TOPIC, "t", Op.WRITE),
        field(
            "results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code"
        ),
        29,
        NONE,
        prerequisites=((TXN_ID, "tx", Op.WRITE),),
        setup=producer,
    ),
    Row(
        "AddOffsetsToTxn",
        4,
        add_offsets,
        (TXN_ID, "tx", Op.WRITE),
        top_code,
        53,
        NONE,
        prerequisites=((GROUP, "g", Op.READ),),
        setup=producer,
    ),
    Row(
        "AddOffsetsToTxn",
        4,
        add_offsets,
        (GROUP, "g", Op.READ),
        top_code,
        30,
        NONE,
        prerequisites=((TXN_ID, "tx", Op.WRITE),),
        setup=producer,
    ),
    Row(
        "EndTxn",
        4,
        lambda rig: EndTxnRequest(
            transactional_id="tx",
            producer_id=rig.producer_id,
            producer_epoch=rig.producer_epoch,
            committed=True,
        ),
        (TXN_ID, "tx", Op.WRITE),
        top_code,
        53,
        NONE,
        setup=transaction,
    ),
    Row(
        "TxnOffsetCommit",
        4,
        txn_commit,
        (TXN_ID, "tx", Op.WRITE),
        topic_partition_code,
        53,
        NONE,
        prerequisites=((GROUP, "g", Op.READ), (TOPIC, "t", Op.READ)),
        setup=offsets_transaction,
    ),
    Row(
        "TxnOffsetCommit",
        4,
        txn_commit,
        (GROUP, "g", Op.READ),
        topic_partition_code,
        30,
        NONE,
        prerequisites=((TXN_ID, "tx", Op.WRITE), (TOPIC, "t", Op.READ)),
        setup=offsets_transaction,
    ),
    Row(
        "TxnOffsetCommit",
        4,
        txn_commit,
        (TOPIC, "t", Op.READ),
        topic_partition_code,
        29,
        NONE,
        prerequisites=((TXN_ID, "tx", Op.WRITE), (GROUP, "g", Op.READ)),
        setup=offsets_transaction,
    ),
    Row(
        "DescribeTransactions",
        0,
        lambda rig: DescribeTransactionsRequest(transactional_ids=["tx"]),
        (TXN_ID, "tx", Op.DESCRIBE),
        field("transaction_states", 0, "error_code"),
        53,
        NONE,
        setup=producer,
    ),
    Row(
        "DescribeProducers",
        0,
        lambda rig: DescribeProducersRequest(topics=[dp.TopicRequest("t", [0])]),
        (TOPIC, "t", Op.READ),
        topic_partition_code,
        29,
        NONE,
    ),
    Row(
        "WriteTxnMarkers",
        1,
        lambda rig: WriteTxnMarkersRequest(
            markers=[
                wtm.WritableTxnMarker(
                    producer_id=rig.producer_id,
                    producer_epoch=rig.producer_epoch,
                    transaction_result=False,
                    topics=[wtm.WritableTxnMarkerTopic("t", [0])],
                )
            ]
        ),
        (*CLUSTER_ACL, Op.CLUSTER_ACTION),
        field("markers", 0, "topics", 0, "partitions", 0, "error_code"),
        31,
        NONE,
        setup=transaction,
    ),
    # Kafka lets ALTER on the cluster write markers too (admin tools do).
    Row(
        "WriteTxnMarkers",
        1,
        lambda rig: WriteTxnMarkersRequest(
            markers=[
                wtm.WritableTxnMarker(
                    producer_id=rig.producer_id,
                    producer_epoch=rig.producer_epoch,
                    transaction_result=False,
                    topics=[wtm.WritableTxnMarkerTopic("t", [0])],
                )
            ]
        ),
        (*CLUSTER_ACL, Op.ALTER),
        field("markers", 0, "topics", 0, "partitions", 0, "error_code"),
        31,
        NONE,
        setup=transaction,
    ),
    Row(
        "DescribeLogDirs",
        4,
        lambda rig: DescribeLogDirsRequest(topics=None),
        (*CLUSTER_ACL, Op.DESCRIBE),
        top_code,
        31,
        NONE,
    ),
    Row(
        "AlterPartitionReassignments",
        0,
        lambda rig: AlterPartitionReassignmentsRequest(
            topics=[apr.ReassignableTopic("t", [apr.ReassignablePartition(0, [1])])]
        ),
        (*CLUSTER_ACL, Op.ALTER),
        top_code,
        31,
        NONE,
    ),
    Row(
        "ListPartitionReassignments",
        0,
        lambda rig: ListPartitionReassignmentsRequest(topics=None),
        (*CLUSTER_ACL, Op.DESCRIBE),
        top_code,
        31,
        NONE,
    ),
    Row(
        "CreateAcls",
        3,
        lambda rig: CreateAclsRequest(
            creations=[
                ca.AclCreation(
                    resource_type=TOPIC,
                    resource_name="t",
                    resource_pattern_type=PatternType.LITERAL,
                    principal="User:bob",
                    host="*",
                    operation=Op.READ,
                    permission_type=AclPermissionType.ALLOW,
                )
            ]
        ),
        (*CLUSTER_ACL, Op.ALTER),
        field("results", 0, "error_code"),
        31,
        NONE,
    ),
    Row(
        "DeleteAcls",
        3,
        lambda rig: DeleteAclsRequest(
            filters=[da.DeleteAclsFilter(**acl_filter(principal_filter="User:bob"))]
        ),
        (*CLUSTER_ACL, Op.ALTER),
        field("filter_results", 0, "error_code"),
        31,
        NONE,
    ),
    Row(
        "DescribeAcls",
        3,
        lambda rig: DescribeAclsRequest(**acl_filter()),
        (*CLUSTER_ACL, Op.DESCRIBE),
        top_code,
        31,
        NONE,
    ),
    Row(
        "DescribeUserScramCredentials",
        0,
        lambda rig: DescribeUserScramCredentialsRequest(users=None),
        (*CLUSTER_ACL, Op.DESCRIBE),
        top_code,
        31,
        NONE,
    ),
    Row(
        "AlterUserScramCredentials",
        0,
        lambda rig: scram_upsert(),
        (*CLUSTER_ACL, Op.ALTER),
        field("results", 0, "error_code"),
        31,
        NONE,
    ),
]


async def prepared(row: Row) -> Rig:
    rig = await make_rig()
    if row.setup is not None:
        await row.setup(rig)
    if row.prerequisites:
        await rig.grant(row.prerequisites)
    return rig


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
async def test_denied_without_the_acl(row: Row) -> None:
    """Without the ACL the request gets exactly Kafka's *_AUTHORIZATION_FAILED code."""
    rig = await prepared(row)
    response = await rig.call(row.request(rig), row.version)
    assert row.code(response) == row.denied


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
async def test_allowed_with_the_acl(row: Row) -> None:
    """With the ACL (ALLOW User:alice, host *) the request gets its ordinary answer."""
    rig = await prepared(row)
    await rig.grant([row.needs])
    response = await rig.call(row.request(rig), row.version)
    assert row.code(response) == row.allowed
    assert row.allowed != row.denied


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
async def test_the_super_user_needs_no_acl(row: Row) -> None:
    """``super.users`` may do everything: User:admin gets the allowed answer with no
    ACL at all."""
    rig = await make_rig()
    if row.setup is not None:
        await row.setup(rig)
    assert rig.broker.authorizer is not None
    assert rig.broker.authorizer.bindings == []
    response = await rig.admin(row.request(rig), row.version)
    assert row.code(response) == row.allowed


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
async def test_an_unauthenticated_client_is_user_anonymous(row: Row) -> None:
    """A connection that did not authenticate is User:ANONYMOUS: alice's ACL does not
    cover it, one for User:* does."""
    rig = await make_rig()
    if row.setup is not None:
        await row.setup(rig)
    if row.prerequisites:
        await rig.grant(row.prerequisites, principal=ANONYMOUS)
    await rig.grant([row.needs])
    response = await rig.call(row.request(rig), row.version, principal=None)
    assert row.code(response) == row.denied
    await rig.grant([row.needs], principal="User:*")
    response = await rig.call(row.request(rig), row.version, principal=None)
    assert row.code(response) == row.allowed


async def create_topics(rig: Rig, *names: str) -> None:
    created = await rig.admin(
        CreateTopicsRequest(topics=[ct.CreatableTopic(name, 1, 1) for name in names]), 7
    )
    assert [(t.name, t.error_code) for t in created.topics] == [(name, NONE) for name in names]


async def test_a_prefixed_acl_covers_the_names_it_starts() -> None:
    """ALLOW WRITE on the prefix "t": alice produces to t and tx-topic, not to other."""
    rig = await make_rig()
    await create_topics(rig, "tx-topic", "other")
    await rig.grant([(TOPIC, "t", Op.WRITE)], pattern=PatternType.PREFIXED)
    codes = [partition_code(await rig.call(produce(name), 11)) for name in ("t", "tx-topic")]
    assert codes == [NONE, NONE]
    assert partition_code(await rig.call(produce("other"), 11)) == TOPIC_AUTHORIZATION_FAILED
    assert end_offsets(rig, "t", "tx-topic", "other") == [1, 0, 1, 0]


async def test_a_deny_overrides_an_allow() -> None:
    """ALLOW ALL on every topic and DENY READ on t: fetching t is refused, producing to
    it is not, and another topic is readable."""
    rig = await make_rig()
    await create_topics(rig, "u")
    await rig.grant([(TOPIC, "*", Op.ALL)])
    await rig.grant([(TOPIC, "t", Op.READ)], permission=AclPermissionType.DENY)
    fetched = await rig.call(fetch(rig), 12)
    assert [(p.partition_index, p.error_code) for p in fetched.responses[0].partitions] == [
        (0, TOPIC_AUTHORIZATION_FAILED)
    ]
    assert partition_code(await rig.call(produce(), 11)) == NONE
    other = await rig.call(
        FetchRequest(
            max_bytes=1 << 20,
            topics=[
                fr.FetchTopic(topic="u", partitions=[fr.FetchPartition(partition_max_bytes=1)])
            ],
        ),
        12,
    )
    assert other.responses[0].partitions[0].error_code == NONE


async def test_a_deny_for_everyone_overrides_alices_allow() -> None:
    """DENY WRITE for User:* on the prefix "t" wins over alice's literal ALLOW WRITE."""
    rig = await make_rig()
    await rig.grant([(TOPIC, "t", Op.WRITE)])
    await rig.grant(
        [(TOPIC, "t", Op.WRITE)],
        principal="User:*",
        permission=AclPermissionType.DENY,
        pattern=PatternType.PREFIXED,
    )
    assert partition_code(await rig.call(produce(), 11)) == TOPIC_AUTHORIZATION_FAILED


def end_offsets(rig: Rig, *topics: str) -> list[int]:
    """Every partition's log end offset, topic by topic."""
    cluster = rig.broker.cluster
    return [p.log.log_end_offset for name in topics for p in cluster.get_topic(name).partitions]


@pytest.mark.parametrize("version", [1, 4, 12])
async def test_metadata_for_all_topics_lists_exactly_what_alice_may_describe(
    version: int,
) -> None:
    """Topics with DESCRIBE (given, or implied by WRITE, or by ALL on a prefix) are
    listed; one with a DENY, t (no ACL) and the internal topics are not."""
    rig = await make_rig()
    await create_topics(rig, "a1", "a2", "b1", "b2")
    await committed_offsets(rig)  # __consumer_offsets exists
    await rig.grant([(TOPIC, "a", Op.ALL)], pattern=PatternType.PREFIXED)
    await rig.grant([(TOPIC, "a2", Op.DESCRIBE)], permission=AclPermissionType.DENY)
    await rig.grant([(TOPIC, "b1", Op.WRITE)])
    await rig.grant([(TOPIC, "b2", Op.DESCRIBE)], principal="User:bob")
    assert "__consumer_offsets" in rig.broker.cluster.topics
    response = await rig.call(MetadataRequest(topics=None), version)
    assert sorted((t.name, t.error_code, len(t.partitions)) for t in response.topics) == [
        ("a1", NONE, 1),
        ("b1", NONE, 1),
    ]
    everything = await rig.admin(MetadataRequest(topics=None), version)
    assert sorted(t.name for t in everything.topics) == [
        "__consumer_offsets",
        "a1",
        "a2",
        "b1",
        "b2",
        "t",
    ]


async def test_metadata_v0_with_no_topics_is_all_topics_filtered_too() -> None:
    rig = await make_rig()
    await create_topics(rig, "b1")
    await rig.grant([(TOPIC, "b1", Op.READ)])
    response = await rig.call(MetadataRequest(topics=[]), 0)
    assert [(t.name, t.error_code) for t in response.topics] == [("b1", NONE)]


async def test_list_groups_lists_exactly_the_groups_alice_may_describe() -> None:
    """Without DESCRIBE on the cluster only the groups alice may describe are listed;
    with it, every group."""
    rig = await make_rig()
    for group in ("g1", "g2", "h1", "h2"):
        response = await rig.admin(commit(group, "t"), 8)
        assert response.topics[0].partitions[0].error_code == NONE
    await rig.grant([(GROUP, "g1", Op.DESCRIBE)])
    await rig.grant([(GROUP, "h", Op.READ)], pattern=PatternType.PREFIXED)
    await rig.grant([(GROUP, "h2", Op.ALL)], permission=AclPermissionType.DENY)
    listed = await rig.call(ListGroupsRequest(), 5)
    assert (listed.error_code, sorted(g.group_id for g in listed.groups)) == (NONE, ["g1", "h1"])
    await rig.grant([(*CLUSTER_ACL, Op.DESCRIBE)])
    listed = await rig.call(ListGroupsRequest(), 5)
    assert sorted(g.group_id for g in listed.groups) == ["g1", "g2", "h1", "h2"]


async def test_list_transactions_lists_exactly_the_ids_alice_may_describe() -> None:
    rig = await make_rig()
    for transactional_id in ("tx", "ty", "tz"):
        response = await rig.admin(
            InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000),
            4,
        )
        assert response.error_code == NONE
    await rig.grant([(TXN_ID, "tx", Op.DESCRIBE), (TXN_ID, "tz", Op.WRITE)])
    listed = await rig.call(ListTransactionsRequest(), 1)
    assert sorted(s.transactional_id for s in listed.transaction_states) == ["tx", "tz"]


async def test_without_write_not_a_single_record_is_appended() -> None:
    """Alice may READ and DESCRIBE t but not WRITE: her produce to both partitions, with
    acks=-1 and acks=0, idempotent and not, leaves both logs exactly as they were."""
    rig = await make_rig()
    assert partition_code(await rig.admin(produce(), 11)) == NONE
    await rig.grant([(TOPIC, "t", Op.READ), (TOPIC, "t", Op.DESCRIBE)])
    assert end_offsets(rig, "t") == [1, 0]
    both = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            pr.TopicProduceData(
                "t", [pr.PartitionProduceData(i, batch([(b"k", b"v")])) for i in (0, 1)]
            )
        ],
    )
    response = await rig.call(both, 11)
    assert [
        (p.index, p.error_code, p.base_offset) for p in response.responses[0].partition_responses
    ] == [(0, TOPIC_AUTHORIZATION_FAILED, -1), (1, TOPIC_AUTHORIZATION_FAILED, -1)]
    idempotent = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            pr.TopicProduceData(
                "t",
                [
                    pr.PartitionProduceData(
                        1, batch([(b"k", b"v")], producer_id=0, producer_epoch=0, base_sequence=0)
                    )
                ],
            )
        ],
    )
    assert partition_code(await rig.call(idempotent, 11)) == TOPIC_AUTHORIZATION_FAILED
    unacknowledged = attrs.evolve(both, acks=0)
    with pytest.raises(CloseConnection):  # Kafka's only way to tell an acks=0 producer
        await rig.call(unacknowledged, 11)
    assert end_offsets(rig, "t") == [1, 0]
    fetched = await rig.admin(fetch(rig), 12)
    assert fetched.responses[0].partitions[0].high_watermark == 1


async def test_a_transactional_produce_without_write_on_the_id_appends_nothing() -> None:
    """WRITE on t but not on the transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    and nothing appended."""
    rig = await make_rig()
    await transaction(rig)
    await rig.grant([(TOPIC, "t", Op.WRITE)])
    assert partition_code(await rig.call(transactional_produce(rig), 11)) == 53
    assert end_offsets(rig, "t") == [0, 0]


async def test_without_read_on_the_group_nothing_is_committed() -> None:
    """Alice may READ t but not the group: her commit is refused and the admin reads
    back only the offset committed before."""
    rig = await make_rig()
    await committed_offsets(rig)  # t-0 at 5
    await rig.grant([(TOPIC, "t", Op.READ), (GROUP, "g", Op.DESCRIBE)])
    request = OffsetCommitRequest(
        group_id="g",
        topics=[
            oc.OffsetCommitRequestTopic(
                "t",
                [
                    oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=9),
                    oc.OffsetCommitRequestPartition(partition_index=1, committed_offset=9),
                ],
            )
        ],
    )
    response = await rig.call(request, 8)
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
        (0, GROUP_AUTHORIZATION_FAILED),
        (1, GROUP_AUTHORIZATION_FAILED),
    ]
    fetched = await rig.admin(
        OffsetFetchRequest(
            groups=[
                of.OffsetFetchRequestGroup(
                    group_id="g", topics=[of.OffsetFetchRequestTopics("t", [0, 1])]
                )
            ]
        ),
        8,
    )
    assert [
        (p.partition_index, p.committed_offset, p.error_code)
        for p in fetched.groups[0].topics[0].partitions
    ] == [(0, 5, NONE), (1, -1, NONE)]


@pytest.mark.parametrize(
    ("request_", "version", "read"),
    [
        pytest.param(lambda: produce("missing"), 11, partition_code, id="Produce"),
        pytest.param(
            lambda: MetadataRequest(
                topics=[md.MetadataRequestTopic(name="missing")], allow_auto_topic_creation=False
            ),
            12,
            field("topics", 0, "error_code"),
            id="Metadata",
        ),
        pytest.param(
            lambda: ListOffsetsRequest(
                replica_id=-1, topics=[lo.ListOffsetsTopic("missing", [lo.ListOffsetsPartition(0)])]
            ),
            8,
            topic_partition_code,
            id="ListOffsets",
        ),
        pytest.param(
            lambda: DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="missing")]),
            6,
            field("responses", 0, "error_code"),
            id="DeleteTopics",
        ),
    ],
)
async def test_authorization_comes_before_existence(
    request_: Callable[[], Request], version: int, read: Callable[[Any], int]
) -> None:
    """As Kafka: a missing topic alice may not see is TOPIC_AUTHORIZATION_FAILED (no
    hint that it does not exist); once she may, UNKNOWN_TOPIC_OR_PARTITION."""
    rig = await make_rig()
    assert read(await rig.call(request_(), version)) == TOPIC_AUTHORIZATION_FAILED
    await rig.grant([(TOPIC, "missing", Op.ALL)])
    assert read(await rig.call(request_(), version)) == UNKNOWN_TOPIC_OR_PARTITION


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


CLUSTER_OPERATIONS = bits(
    Op.CREATE,
    Op.ALTER,
    Op.DESCRIBE,
    Op.CLUSTER_ACTION,
    Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
    Op.IDEMPOTENT_WRITE,
)
TOPIC_OPERATIONS = bits(
    Op.READ,
    Op.WRITE,
    Op.CREATE,
    Op.DELETE,
    Op.ALTER,
    Op.DESCRIBE,
    Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
)


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        ((), 0),
        # Kafka answers 0 to a principal that may not DESCRIBE the cluster.
        ((Op.IDEMPOTENT_WRITE, Op.CREATE), 0),
        ((Op.DESCRIBE,), bits(Op.DESCRIBE)),
        # ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS.
        (
            (Op.ALTER, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE),
            bits(Op.ALTER, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE),
        ),
        (
            (Op.DESCRIBE, Op.CLUSTER_ACTION, Op.CREATE),
            bits(Op.DESCRIBE, Op.CLUSTER_ACTION, Op.CREATE),
        ),
        ((Op.ALL,), CLUSTER_OPERATIONS),
    ],
)
async def test_cluster_authorized_operations_are_the_granted_ones(
    granted: tuple[AclOperation, ...], expected: int
) -> None:
    """DescribeCluster and Metadata (v8-10) report exactly the cluster operations the
    ACLs grant alice (Kafka's seven at most: WRITE is not one)."""
    rig = await make_rig()
    if granted:
        await rig.grant([(*CLUSTER_ACL, op) for op in granted])
    described = await rig.call(
        DescribeClusterRequest(include_cluster_authorized_operations=True), 1
    )
    assert (described.error_code, described.cluster_authorized_operations) == (NONE, expected)
    for version in (8, 10):
        metadata = await rig.call(
            MetadataRequest(topics=[], include_cluster_authorized_operations=True), version
        )
        assert metadata.cluster_authorized_operations == expected


async def test_the_super_users_cluster_operations_are_kafkas_seven() -> None:
    rig = await make_rig()
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    assert (await rig.admin(request, 0)).cluster_authorized_operations == CLUSTER_OPERATIONS
    unasked = await rig.admin(DescribeClusterRequest(), 0)
    assert unasked.cluster_authorized_operations == -(2**31)


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        ((Op.DESCRIBE,), bits(Op.DESCRIBE)),
        (
            (Op.READ, Op.ALTER_CONFIGS),
            bits(Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS),
        ),
        ((Op.WRITE, Op.DELETE, Op.CREATE), bits(Op.WRITE, Op.DELETE, Op.CREATE, Op.DESCRIBE)),
        ((Op.ALL,), TOPIC_OPERATIONS),
    ],
)
async def test_topic_authorized_operations_are_the_granted_ones(
    granted: tuple[AclOperation, ...], expected: int
) -> None:
    """Metadata's topic_authorized_operations (v8+) are exactly what the ACLs grant,
    named and in an all-topics answer; a DENY takes its operation out."""
    rig = await make_rig()
    await rig.grant([(TOPIC, "t", op) for op in granted])
    for version in (8, 12):
        for topics in ([md.MetadataRequestTopic(name="t")], None):
            response = await rig.call(
                MetadataRequest(topics=topics, include_topic_authorized_operations=True), version
            )
            assert [(t.name, t.topic_authorized_operations) for t in response.topics] == [
                ("t", expected)
            ]
    await rig.grant([(TOPIC, "t", Op.DESCRIBE_CONFIGS)], permission=AclPermissionType.DENY)
    response = await rig.call(
        MetadataRequest(
            topics=[md.MetadataRequestTopic(name="t")], include_topic_authorized_operations=True
        ),
        12,
    )
    assert response.topics[0].topic_authorized_operations == expected & ~bits(Op.DESCRIBE_CONFIGS)


async def test_refusals_carry_kafkas_messages_and_names() -> None:
    """The texts Kafka puts beside the codes: FindCoordinator before v4 and
    DescribeConfigs give the error's message, CreateTopics "Authorization failed.",
    DeleteTopics "Topic authorization failed."; a topic deleted by id is named back
    only to a principal that may describe it."""
    rig = await make_rig()
    for version in (1, 2, 3):
        for key_type, key, message in (
            (0, "g", "Group authorization failed."),
            (1, "tx", "Transactional Id authorization failed."),
        ):
            found = await rig.call(FindCoordinatorRequest(key=key, key_type=key_type), version)
            assert (
                found.error_code,
                found.error_message,
                found.node_id,
                found.host,
                found.port,
            ) == (
                30 if key_type == 0 else 53,
                message,
                -1,
                "",
                -1,
            )
    described = await rig.call(
        DescribeConfigsRequest(
            resources=[
                dc.DescribeConfigsResource(CONFIG_TOPIC, "t", None),
                dc.DescribeConfigsResource(CONFIG_BROKER, "1", None),
            ]
        ),
        4,
    )
    assert [
        (r.resource_name, r.error_code, r.error_message, r.configs) for r in described.results
    ] == [
        ("t", 29, "Topic authorization failed.", []),
        ("1", 31, "Cluster authorization failed.", []),
    ]
    created = await rig.call(CreateTopicsRequest(topics=[ct.CreatableTopic("new", 1, 1)]), 7)
    assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [
        ("new", 29, "Authorization failed.")
    ]
    by_name = DeleteTopicsRequest(topics=[dt.DeleteTopicState(name="t")])
    by_id = DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=None, topic_id=rig.topic_id)])
    deleted = await rig.call(by_name, 6)
    assert [(t.name, t.topic_id, t.error_code, t.error_message) for t in deleted.responses] == [
        ("t", uuid.UUID(int=0), 29, "Topic authorization failed.")
    ]
    deleted = await rig.call(by_id, 6)
    assert [(t.name, t.topic_id, t.error_code) for t in deleted.responses] == [
        (None, rig.topic_id, 29)
    ]
    await rig.grant([(TOPIC, "t", Op.DESCRIBE)])
    deleted = await rig.call(by_id, 6)
    assert [(t.name, t.topic_id, t.error_code, t.error_message) for t in deleted.responses] == [
        ("t", rig.topic_id, 29, "Topic authorization failed.")
    ]
    assert "t" in rig.broker.cluster.topics


async def test_a_topic_created_without_describe_configs_hides_its_configs() -> None:
    """As Kafka: CREATE alone creates the topic, but CreateTopics v5+ answers
    TOPIC_AUTHORIZATION_FAILED for its configs, which it leaves out."""
    rig = await make_rig()
    await rig.grant([(TOPIC, "new", Op.CREATE), (TOPIC, "seen", Op.CREATE)])
    await rig.grant([(TOPIC, "seen", Op.DESCRIBE_CONFIGS)])
    created = await rig.call(
        CreateTopicsRequest(
            topics=[ct.CreatableTopic("new", 2, 1), ct.CreatableTopic("seen", 1, 1)]
        ),
        7,
    )
    new, seen = created.topics
    assert (new.error_code, new.topic_config_error_code, new.configs) == (0, 29, None)
    assert (seen.error_code, seen.topic_config_error_code, seen.num_partitions) == (0, 0, 1)
    assert seen.configs is not None and len(seen.configs) > 0
    assert [len(rig.broker.cluster.get_topic(n).partitions) for n in ("new", "seen")] == [2, 1]


async def test_offset_fetch_of_all_topics_leaves_out_the_ones_alice_may_not_describe() -> None:
    rig = await make_rig()
    await create_topics(rig, "u", "v")
    for topic in ("t", "u", "v"):
        response = await rig.admin(commit("g", topic), 8)
        assert response.topics[0].partitions[0].error_code == NONE
    await rig.grant([(GROUP, "g", Op.DESCRIBE), (TOPIC, "u", Op.DESCRIBE), (TOPIC, "v", Op.READ)])
    fetched = await rig.call(
        OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g", topics=None)]), 8
    )
    assert [
        (t.name, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in fetched.groups[0].topics
    ] == [("u", [(0, 5, NONE)]), ("v", [(0, 5, NONE)])]
    old = await rig.call(OffsetFetchRequest(group_id="g", topics=None), 7)
    assert sorted(t.name for t in old.topics) == ["u", "v"]


async def test_describe_transactions_leaves_out_topics_alice_may_not_describe() -> None:
    rig = await make_rig()
    await create_topics(rig, "u")
    await transaction(rig)  # t-0
    added = await rig.admin(add_partitions(rig, "u"), 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    await rig.grant([(TXN_ID, "tx", Op.DESCRIBE), (TOPIC, "u", Op.DESCRIBE)])
    described = await rig.call(DescribeTransactionsRequest(transactional_ids=["tx"]), 0)
    state = described.transaction_states[0]
    assert (state.error_code, state.transaction_state) == (NONE, "Ongoing")
    assert [(t.topic, t.partitions) for t in state.topics] == [("u", [0])]
    everything = await rig.admin(DescribeTransactionsRequest(transactional_ids=["tx"]), 0)
    assert sorted((t.topic, t.partitions) for t in everything.transaction_states[0].topics) == [
        ("t", [0]),
        ("u", [0]),
    ]


GROUP_OPERATIONS = bits(Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
"""Kafka 4's group operations (AclEntry.supportedOperations(GROUP))."""


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        ((Op.DESCRIBE,), bits(Op.DESCRIBE)),
        ((Op.READ,), bits(Op.READ, Op.DESCRIBE)),
        ((Op.DELETE, Op.DESCRIBE), bits(Op.DELETE, Op.DESCRIBE)),
        # Kafka 4's group configs (KIP-848): ALTER_CONFIGS implies DESCRIBE_CONFIGS.
        ((Op.DESCRIBE, Op.ALTER_CONFIGS), bits(Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)),
        ((Op.ALL,), GROUP_OPERATIONS),
    ],
)
async def test_group_authorized_operations_are_the_granted_ones(
    granted: tuple[AclOperation, ...], expected: int
) -> None:
    """DescribeGroups and ConsumerGroupDescribe report the group operations the ACLs
    grant alice (READ implies DESCRIBE)."""
    rig = await make_rig()
    await member(rig)
    joined = await rig.admin(
        ConsumerGroupHeartbeatRequest(
            group_id="cg",
            member_epoch=0,
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        ),
        0,
    )
    assert joined.error_code == NONE
    await rig.grant([(GROUP, group, op) for group in ("g", "cg") for op in granted])
    classic = await rig.call(
        DescribeGroupsRequest(groups=["g"], include_authorized_operations=True), 5
    )
    assert [(g.error_code, g.group_state, g.authorized_operations) for g in classic.groups] == [
        (NONE, "Stable", expected)
    ]
    consumer = await rig.call(
        ConsumerGroupDescribeRequest(group_ids=["cg"], include_authorized_operations=True), 0
    )
    assert [(g.error_code, g.authorized_operations) for g in consumer.groups] == [(NONE, expected)]


async def test_no_one_adds_an_internal_topic_to_a_transaction() -> None:
    """As Kafka (internal topics are left out of AddPartitionsToTxn's authorization): a
    client's AddPartitionsToTxn naming __consumer_offsets gets TOPIC_AUTHORIZATION_FAILED,
    even from the super user, and nothing is added (the other partition: not attempted)."""
    rig = await make_rig()
    await committed_offsets(rig)  # __consumer_offsets exists
    await producer(rig)
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=rig.producer_id,
        v3_and_below_producer_epoch=rig.producer_epoch,
        v3_and_below_topics=[
            apt.AddPartitionsToTxnTopic("__consumer_offsets", [0]),
            apt.AddPartitionsToTxnTopic("t", [0]),
        ],
    )
    response = await rig.admin(request, 3)
    assert [
        (t.name, p.partition_index, p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [("__consumer_offsets", 0, 29), ("t", 0, 55)]
    described = await rig.admin(DescribeTransactionsRequest(transactional_ids=["tx"]), 0)
    assert (
        described.transaction_states[0].transaction_state,
        described.transaction_states[0].topics,
    ) == (
        "Empty",
        [],
    )


NOT_IN_THE_TABLE = {
    "ApiVersions": "asked before authentication; Kafka checks nothing",
    "SaslHandshake": "authentication itself",
    "SaslAuthenticate": "authentication itself",
    "DescribeCluster": "test_cluster_authorized_operations_are_the_granted_ones",
    "ListGroups": "test_list_groups_lists_exactly_the_groups_alice_may_describe",
    "ListTransactions": "test_list_transactions_lists_exactly_the_ids_alice_may_describe",
    # KIP-714: Kafka's KafkaApis authorizes neither; any authenticated client is asked for
    # its metrics and pushes them.
    "GetTelemetrySubscriptions": "client telemetry, authorized by nothing in Kafka",
    "PushTelemetry": "client telemetry, authorized by nothing in Kafka",
}


def test_every_api_the_broker_serves_is_checked_here() -> None:
    """A new handler needs a row (or a test named above): the table covers every
    served API but those that filter instead of refusing and authentication."""
    Broker()  # registers every handler
    served = {API_NAMES[key] for key in HANDLERS}
    in_rows = {row.api for row in ROWS}
    assert in_rows <= served
    assert served - in_rows == set(NOT_IN_THE_TABLE)
    named = {name for name in NOT_IN_THE_TABLE.values() if name.startswith("test_")}
    assert named <= set(globals())


# A model of Kafka's rules for alice on one topic, written apart from the authorizer, to
# check what the handlers answer for random ACL sets.

MODEL_TOPIC = "tx-topic"
BINDINGS = st.builds(
    lambda pattern, principal, host, operation, permission: (
        *pattern,
        principal,
        host,
        operation,
        permission,
    ),
    st.sampled_from(
        [
            (PatternType.LITERAL, MODEL_TOPIC),
            (PatternType.LITERAL, "*"),
            (PatternType.LITERAL, "tx"),
            (PatternType.PREFIXED, "t"),
            (PatternType.PREFIXED, "tx-"),
            (PatternType.PREFIXED, MODEL_TOPIC),
            (PatternType.PREFIXED, "tx-topic-2"),
            (PatternType.PREFIXED, "u"),
        ]
    ),
    st.sampled_from([ALICE, "User:*", "User:bob"]),
    st.sampled_from(["*", "10.1.2.3", "10.9.9.9"]),
    st.sampled_from(
        [Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS]
    ),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
Binding = tuple[PatternType, str, str, str, AclOperation, AclPermissionType]
IMPLYING = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}


def model_allows(
    bindings: Sequence[Binding], operation: AclOperation, topic: str = MODEL_TOPIC
) -> bool:
    """Kafka's decision for alice at 10.1.2.3 on ``topic``: a matching DENY wins, else
    a matching ALLOW (which implies DESCRIBE / DESCRIBE_CONFIGS) allows."""
    allowed = False
    for pattern, name, principal, host, op, permission in bindings:
        literal = pattern == PatternType.LITERAL
        covers = name in (topic, "*") if literal else topic.startswith(name)
        if not covers or principal not in (ALICE, "User:*") or host not in ("*", "10.1.2.3"):
            continue
        if permission == AclPermissionType.DENY:
            if op in (Op.ALL, operation):
                return False
        elif op in (Op.ALL, operation) or op in IMPLYING.get(operation, ()):
            allowed = True
    return allowed


@settings(max_examples=150, deadline=None)
@given(st.lists(BINDINGS, max_size=6))
def test_the_handlers_decide_as_kafkas_rules(bindings: list[Binding]) -> None:
    """For random ACLs: Produce to the topic is 0 exactly when alice may WRITE it (and
    the record is appended), Fetch when she may READ; Metadata lists exactly the topics
    (it and t) she may DESCRIBE, each with exactly the operations she may perform."""

    async def check() -> None:
        rig = await make_rig()
        await create_topics(rig, MODEL_TOPIC)
        for pattern, name, principal, host, op, permission in bindings:
            created = await rig.admin(
                CreateAclsRequest(
                    creations=[
                        ca.AclCreation(TOPIC, name, pattern, principal, host, op, permission)
                    ]
                ),
                3,
            )
            assert created.results[0].error_code == NONE
        write, read = (model_allows(bindings, op) for op in (Op.WRITE, Op.READ))
        produced = partition_code(await rig.call(produce(MODEL_TOPIC), 11))
        assert produced == (NONE if write else TOPIC_AUTHORIZATION_FAILED)
        assert end_offsets(rig, MODEL_TOPIC) == [1 if write else 0]
        fetched = await rig.call(
            FetchRequest(
                max_bytes=1 << 20,
                topics=[fr.FetchTopic(MODEL_TOPIC, partitions=[fr.FetchPartition(0)])],
            ),
            12,
        )
        assert fetched.responses[0].partitions[0].error_code == (
            NONE if read else TOPIC_AUTHORIZATION_FAILED
        )
        listed = await rig.call(
            MetadataRequest(topics=None, include_topic_authorized_operations=True), 12
        )

        def operations(topic: str) -> int:
            granted = (op for op in Op if model_allows(bindings, op, topic))
            return bits(*(op for op in granted if TOPIC_OPERATIONS >> op & 1))

        expected = [
            (topic, operations(topic))
            for topic in ("t", MODEL_TOPIC)
            if model_allows(bindings, Op.DESCRIBE, topic)
        ]
        assert sorted((t.name, t.topic_authorized_operations) for t in listed.topics) == expected

    anyio.run(check)


async def test_transactional_records_need_a_transactional_id() -> None:
    """As Kafka: a Produce holding transactional batches but no transactional id is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED whoever sends it (the super user here), and
    nothing is appended."""
    rig = await make_rig()
    await transaction(rig)
    request = attrs.evolve(transactional_produce(rig), transactional_id=None)
    assert partition_code(await rig.admin(request, 11)) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_offsets(rig, "t") == [0, 0]
    assert partition_code(await rig.admin(transactional_produce(rig), 11)) == NONE
    assert end_offsets(rig, "t") == [1, 0]
