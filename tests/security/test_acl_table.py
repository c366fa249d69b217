"""Kafka's authorization checks on every API, one row per (API, resource, operation).

A broker with Kafka's StandardAuthorizer and ``super.users=User:admin`` serves
requests in process, through the wire codec, as ``User:alice`` from 10.1.2.3.
Each row names the ACL the request needs and the ACLs granted first (e.g.
OffsetCommit's topic READ row grants group READ), reads the one error code
that matters, and says which code Kafka's KafkaApis gives when the ACL is
missing and which the request gets once it is there. The separate tests check
prefixed and deny ACLs, the filtering of Metadata and ListGroups, the super
user, ``User:ANONYMOUS``, that a refused Produce writes nothing, and the
authorized-operation bit fields.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import pytest

from kafkette.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from kafkette.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkette.protocol.messages import (
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
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
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
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
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
from kafkette.protocol.messages import alter_user_scram_credentials_request as aus
from kafkette.protocol.messages import create_acls_request as ca
from kafkette.protocol.messages import create_partitions_request as cp
from kafkette.protocol.messages import create_topics_request as ct
from kafkette.protocol.messages import delete_acls_request as da
from kafkette.protocol.messages import delete_records_request as dr
from kafkette.protocol.messages import delete_topics_request as dt
from kafkette.protocol.messages import describe_configs_request as dc
from kafkette.protocol.messages import describe_producers_request as dp
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
from kafkette.protocol.messages import sync_group_request as sg
from kafkette.protocol.messages import txn_offset_commit_request as toc
from kafkette.protocol.messages import write_txn_markers_request as wtm
from kafkette.protocol.schema import Request
from kafkette.server import Broker, BrokerConfig
from kafkette.server.config import STANDARD_AUTHORIZER
from kafkette.server.dispatch import RequestContext
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


# Requests.


def produce(rig: Rig, topic: str = "t") -> ProduceRequest:
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
    Row("Produce", 11, produce, (TOPIC, "t", Op.WRITE), partition_code, 29, NONE),
    Row("Produce", 3, produce, (TOPIC, "t", Op.WRITE), partition_code, 29, NONE),
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
