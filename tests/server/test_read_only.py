"""The answers of a broker serving its data directory read-only (server/data_dir/read_only.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkette.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkette.protocol.headers import encode_response
from kafkette.protocol.messages import (
    API_NAMES,
    REQUESTS,
    AlterConfigsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    ProduceRequest,
)
from kafkette.protocol.messages.alter_configs_request import AlterConfigsResource
from kafkette.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
)
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
)
from kafkette.protocol.messages.delete_topics_request import DeleteTopicState
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.server import Broker
from kafkette.server.data_dir.read_only import READ_APIS, refusal
from kafkette.server.dispatch import HANDLERS

Broker()  # registers every handler
MESSAGE = "the data directory /d is opened read-only"
REFUSED = sorted(set(HANDLERS) - READ_APIS)


def test_reads_are_served() -> None:
    """Every API the broker serves is a read or refused; reads are not refused."""
    assert {API_NAMES[k] for k in READ_APIS & set(HANDLERS)} >= {
        "ApiVersions",
        "Metadata",
        "Fetch",
        "ListOffsets",
        "OffsetFetch",
        "DescribeGroups",
        "ListGroups",
        "DescribeConfigs",
        "DescribeProducers",
        "DescribeTransactions",
        "ListTransactions",
        "DescribeShareGroupOffsets",
    }
    for key in READ_APIS & set(HANDLERS):
        assert refusal(REQUESTS[key](), "/d") is None


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: API_NAMES[k])
def test_every_other_api_is_refused_at_every_version(key: int) -> None:
    """A refusal is built for each served API that writes, and encodes at each version
    the broker serves."""
    response = refusal(REQUESTS[key](), "/d")
    assert response is not None
    entry = HANDLERS[key]
    for version in range(entry.min_version, entry.max_version + 1):
        assert encode_response(response, version, 7)


def _produce() -> Any:
    return ProduceRequest(
        acks=1,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0), PartitionProduceData(1)]
            )
        ],
    )


def test_produce_is_refused_per_partition_with_the_message() -> None:
    response: Any = refusal(_produce(), "/d")
    assert [
        (t.name, p.index, p.error_code, p.base_offset, p.error_message)
        for t in response.responses
        for p in t.partition_responses
    ] == [
        ("t", 0, TopicAuthorizationFailedError.code, -1, MESSAGE),
        ("t", 1, TopicAuthorizationFailedError.code, -1, MESSAGE),
    ]


def test_share_group_offsets_are_refused_as_the_group() -> None:
    """Altering or deleting a share group's offsets gets GROUP_AUTHORIZATION_FAILED with
    the message, as Kafka answers a principal without READ (DELETE) on the group."""
    altered: Any = refusal(AlterShareGroupOffsetsRequest(group_id="g"), "/d")
    deleted: Any = refusal(DeleteShareGroupOffsetsRequest(group_id="g"), "/d")
    for response in (altered, deleted):
        assert (response.error_code, response.error_message) == (
            GroupAuthorizationFailedError.code,
            MESSAGE,
        )


def test_init_producer_id_is_refused_by_kind() -> None:
    """A transactional producer's InitProducerId gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    an idempotent one's CLUSTER_AUTHORIZATION_FAILED (Kafka's IDEMPOTENT_WRITE)."""
    transactional: Any = refusal(InitProducerIdRequest(transactional_id="tx"), "/d")
    idempotent: Any = refusal(InitProducerIdRequest(transactional_id=None), "/d")
    assert (transactional.error_code, transactional.producer_id) == (
        TransactionalIdAuthorizationFailedError.code,
        -1,
    )
    assert (idempotent.error_code, idempotent.producer_id) == (
        ClusterAuthorizationFailedError.code,
        -1,
    )


def test_topic_admin_is_refused_per_topic() -> None:
    created: Any = refusal(CreateTopicsRequest(topics=[CreatableTopic(name="new")]), "/d")
    assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [
        ("new", TopicAuthorizationFailedError.code, MESSAGE)
    ]
    topic_id = uuid.uuid4()
    deleted: Any = refusal(
        DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=topic_id)]), "/d"
    )
    assert [(t.name, t.topic_id, t.error_code) for t in deleted.responses] == [
        (None, topic_id, TopicAuthorizationFailedError.code)
    ]


def test_configs_are_refused_per_resource() -> None:
    """A topic's configs: TOPIC_AUTHORIZATION_FAILED; a broker's: CLUSTER_AUTHORIZATION_FAILED."""
    response: Any = refusal(
        AlterConfigsRequest(
            resources=[
                AlterConfigsResource(resource_type=2, resource_name="t"),
                AlterConfigsResource(resource_type=4, resource_name="1"),
            ]
        ),
        "/d",
    )
    assert [(r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        ("t", TopicAuthorizationFailedError.code, MESSAGE),
        ("1", ClusterAuthorizationFailedError.code, MESSAGE),
    ]


def test_group_writes_are_refused() -> None:
    joined: Any = refusal(JoinGroupRequest(group_id="g"), "/d")
    assert joined.error_code == GroupAuthorizationFailedError.code
    committed: Any = refusal(
        OffsetCommitRequest(
            group_id="g",
            topics=[
                OffsetCommitRequestTopic(
                    name="t", partitions=[OffsetCommitRequestPartition(partition_index=3)]
                )
            ],
        ),
        "/d",
    )
    assert [
        (t.name, p.partition_index, p.error_code) for t in committed.topics for p in t.partitions
    ] == [("t", 3, GroupAuthorizationFailedError.code)]
