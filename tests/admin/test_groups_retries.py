"""The admin's group operations against a scripted coordinator: which answers are
retried (and when the coordinator is looked up again), request shapes per version,
and how answers become per-item outcomes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafkette.admin import AsyncAdminClient, GroupState, OffsetAndMetadata
from kafkette.client.metadata import BrokerInfo, ClusterMetadata
from kafkette.errors import (
    GroupAuthorizationFailedError,
    GroupSubscribedToTopicError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kafkette.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkette.protocol.messages.delete_groups_response import DeletableGroupResult
from kafkette.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
)
from kafkette.protocol.messages.list_groups_response import ListedGroup
from kafkette.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kafkette.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkette.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kafkette.protocol.schema import Request
from kafkette.structs import TopicPartition

pytestmark = pytest.mark.anyio

LOADING, NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
ASSIGNMENT = bytes.fromhex("0000 00000001 0001 74 00000002 00000000 00000001 ffffffff")
"""ConsumerProtocolAssignment v0: topic "t", partitions 0 and 1, null user data."""

Answer = Callable[[Request], Any]
PRE_KIP_848 = frozenset({ConsumerGroupDescribeRequest.API_KEY})
"""APIs the scripted broker lacks unless ``versions`` names them: it has classic groups only,
so describing a group goes straight to DescribeGroups."""


class FakeConnection:
    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node

    def version_for(self, request: Any, maximum: int | None = None) -> int:
        highest: int = request.VALID_VERSIONS[1]
        if request.API_KEY in PRE_KIP_848 and request.API_KEY not in self.client.versions:
            raise UnsupportedVersionError(f"b{self.node} does not support {request.NAME}")
        return self.client.versions.get(request.API_KEY, highest)

    async def request(self, request: Request, *, version: int | None = None) -> Any:
        self.client.log.append(("request", self.node, type(request).__name__, version))
        self.client.requests.append(request)
        answer = self.client.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeClient:
    """The slice of KafkaClient the group operations use, answering from a script."""

    def __init__(self, *answers: Any, versions: dict[int, int] | None = None) -> None:
        self.answers = list(answers)
        self.versions = versions or {}
        self.log: list[tuple[Any, ...]] = []
        self.requests: list[Request] = []
        self.coordinators = [1]
        self.brokers = {1: BrokerInfo(1, "b1", 9092), 2: BrokerInfo(2, "b2", 9093)}

    async def coordinator(self, key: str, key_type: int = 0, **_: Any) -> int:
        node = self.coordinators[0] if len(self.coordinators) == 1 else self.coordinators.pop(0)
        self.log.append(("find", key, node))
        return node

    async def coordinator_connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    async def connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    async def send(self, node: int, request: Request) -> Any:
        connection = FakeConnection(self, node)
        return await connection.request(request, version=connection.version_for(request))

    def invalidate_coordinator(self, key: str, key_type: int = 0) -> None:
        self.log.append(("invalidate", key))

    def broker(self, node: int) -> BrokerInfo | None:
        return self.brokers.get(node)

    async def refresh_metadata(self, topics: Any = None, **_: Any) -> ClusterMetadata:
        return ClusterMetadata(brokers=dict(self.brokers))

    async def close(self) -> None:
        pass


def admin_with(client: FakeClient) -> AsyncAdminClient:
    admin = AsyncAdminClient(
        bootstrap_servers="localhost:9092", retry_backoff_ms=1, retry_backoff_max_ms=1
    )
    admin._client = client  # type: ignore[assignment]
    return admin


def described(code: int = 0, **fields: Any) -> DescribeGroupsResponse:
    group = DescribedGroup(error_code=code, group_id="g", **fields)
    return DescribeGroupsResponse(groups=[group])


async def test_describe_retries_until_the_coordinator_answers() -> None:
    """NOT_COORDINATOR forgets the coordinator and finds it again (now node 2); LOAD
    keeps it; a broken connection forgets it; then the description, decoded."""
    client = FakeClient(
        described(NOT_COORDINATOR),
        described(LOADING),
        KafkaConnectionError("cut"),
        described(
            group_state="Stable",
            protocol_type="consumer",
            protocol_data="range",
            members=[
                DescribedGroupMember("m-1", "inst", "cli", "/10.0.0.1", b"", ASSIGNMENT),
                DescribedGroupMember("m-2", None, "cli", "/10.0.0.2", b"", b""),
            ],
        ),
    )
    client.coordinators = [1, 2, 2, 2]
    async with admin_with(client) as admin:
        result = (await admin.describe_consumer_groups(["g"]))["g"].result()
    assert client.log == [
        ("find", "g", 1),
        ("request", 1, "DescribeGroupsRequest", 5),
        ("invalidate", "g"),
        ("find", "g", 2),
        ("request", 2, "DescribeGroupsRequest", 5),
        ("find", "g", 2),
        ("request", 2, "DescribeGroupsRequest", 5),
        ("invalidate", "g"),
        ("find", "g", 2),
        ("request", 2, "DescribeGroupsRequest", 5),
    ]
    assert result.state == GroupState.STABLE
    assert result.partition_assignor == "range"
    assert result.coordinator is not None and result.coordinator.host == "b2"
    assert [(m.member_id, m.group_instance_id, m.host, m.assignment) for m in result.members] == [
        ("m-1", "inst", "/10.0.0.1", frozenset({TopicPartition("t", 0), TopicPartition("t", 1)})),
        ("m-2", None, "/10.0.0.2", frozenset()),
    ]


async def test_retries_end_at_the_deadline_naming_the_last_error() -> None:
    """A coordinator that keeps loading: the group's outcome is a timeout that says so."""
    client = FakeClient(*[described(LOADING)] * 1000)
    async with admin_with(client) as admin:
        outcome = (await admin.describe_consumer_groups(["g"], timeout_ms=30))["g"]
    assert isinstance(outcome.error, KafkaTimeoutError)
    assert "COORDINATOR_LOAD_IN_PROGRESS" in str(outcome.error)


async def test_describe_errors_per_group() -> None:
    """Another protocol type and an unreadable assignment fail their group only;
    other codes are the group's error."""
    client = FakeClient(
        described(protocol_type="connect", group_state="Stable"),
        described(
            protocol_type="consumer",
            group_state="Stable",
            members=[DescribedGroupMember("m", None, "c", "h", b"", b"\x00\x00\x00")],
        ),
        described(GroupAuthorizationFailedError.code),
    )
    async with admin_with(client) as admin:
        first = (await admin.describe_consumer_groups(["g"]))["g"].error
        second = (await admin.describe_consumer_groups(["g"]))["g"].error
        third = (await admin.describe_consumer_groups(["g"]))["g"].error
    assert type(first) is KafkaError and "not a consumer group" in str(first)
    assert type(second) is KafkaError and "unreadable assignment" in str(second)
    assert isinstance(third, GroupAuthorizationFailedError)


async def test_delete_groups_per_group_results() -> None:
    """Each group is deleted at its own coordinator, with its own outcome."""
    client = FakeClient(
        DeleteGroupsResponse(results=[DeletableGroupResult("a", NOT_AVAILABLE)]),
        DeleteGroupsResponse(results=[DeletableGroupResult("a", 0)]),
        DeleteGroupsResponse(results=[DeletableGroupResult("b", NonEmptyGroupError.code)]),
    )
    async with admin_with(client) as admin:
        result = await admin.delete_consumer_groups(["a", "b", "a"])
    assert list(result) == ["a", "b"]
    assert result["a"].ok
    assert isinstance(result["b"].error, NonEmptyGroupError)
    assert [r.groups_names for r in client.requests if isinstance(r, DeleteGroupsRequest)] == [
        ["a"],
        ["a"],
        ["b"],
    ]


def commit_answer(*codes: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                "t", [OffsetCommitResponsePartition(p, c) for p, c in enumerate(codes)]
            )
        ]
    )


async def test_alter_offsets_retries_coordinator_errors_then_reports_per_partition() -> None:
    """A coordinator error on any partition resends the whole commit; then each
    partition has its outcome. The commit is made from outside the group."""
    client = FakeClient(
        commit_answer(0, NOT_COORDINATOR),
        commit_answer(0, UnknownTopicOrPartitionError.code),
    )
    async with admin_with(client) as admin:
        result = await admin.alter_consumer_group_offsets(
            "g", {TopicPartition("t", 0): 5, TopicPartition("t", 1): OffsetAndMetadata(6, "m", 2)}
        )
    assert result[TopicPartition("t", 0)].ok
    assert isinstance(result[TopicPartition("t", 1)].error, UnknownTopicOrPartitionError)
    assert ("invalidate", "g") in client.log
    request = client.requests[-1]
    assert isinstance(request, OffsetCommitRequest)
    assert (request.generation_id_or_member_epoch, request.member_id) == (-1, "")
    assert [
        (p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for t in request.topics
        for p in t.partitions
    ] == [(0, 5, -1, ""), (1, 6, 2, "m")]


async def test_offset_fetch_v8_and_v7_shapes() -> None:
    """v8+ names the group in a list; v2-7 at the top; null topics mean every partition."""
    v8 = OffsetFetchResponse(
        groups=[
            OffsetFetchResponseGroup(
                "g",
                [
                    OffsetFetchResponseTopics(
                        "t",
                        [
                            OffsetFetchResponsePartitions(1, 9, 3, "x", 0),
                            OffsetFetchResponsePartitions(0, -1, -1, None, 0),
                        ],
                    )
                ],
                0,
            )
        ]
    )
    v7 = OffsetFetchResponse(
        topics=[OffsetFetchResponseTopic("t", [OffsetFetchResponsePartition(0, 4, -1, None, 0)])]
    )
    client = FakeClient(v8, v7, versions={OffsetFetchRequest.API_KEY: 8})
    async with admin_with(client) as admin:
        every = await admin.list_consumer_group_offsets("g")
        client.versions[OffsetFetchRequest.API_KEY] = 7
        some = await admin.list_consumer_group_offsets("g", [TopicPartition("t", 0)])
    assert every.all() == {
        TopicPartition("t", 0): None,
        TopicPartition("t", 1): OffsetAndMetadata(9, "x", 3),
    }
    assert some.all() == {TopicPartition("t", 0): OffsetAndMetadata(4)}
    first, second = client.requests
    assert isinstance(first, OffsetFetchRequest) and isinstance(second, OffsetFetchRequest)
    assert first.groups == [OffsetFetchRequestGroup(group_id="g", topics=None)]
    assert second.group_id == "g"
    assert second.topics == [OffsetFetchRequestTopic("t", [0])]
    assert not isinstance(second.topics[0], OffsetFetchRequestTopics)


async def test_offset_fetch_group_errors_raise_and_v1_needs_partitions() -> None:
    """A group-level error raises its class; OffsetFetch v0-1 cannot list every partition."""
    client = FakeClient(
        OffsetFetchResponse(error_code=GroupAuthorizationFailedError.code),
        versions={OffsetFetchRequest.API_KEY: 7},
    )
    async with admin_with(client) as admin:
        with pytest.raises(GroupAuthorizationFailedError):
            await admin.list_consumer_group_offsets("g")
        client.versions[OffsetFetchRequest.API_KEY] = 1
        with pytest.raises(UnsupportedVersionError):
            await admin.list_consumer_group_offsets("g")


async def test_delete_offsets_group_error_fails_every_partition() -> None:
    """A request-level error fails every partition; otherwise per-partition codes."""
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    client = FakeClient(
        OffsetDeleteResponse(error_code=GroupAuthorizationFailedError.code),
        OffsetDeleteResponse(
            topics=[
                OffsetDeleteResponseTopic(
                    "t", [OffsetDeleteResponsePartition(0, 0), OffsetDeleteResponsePartition(1, 86)]
                )
            ]
        ),
    )
    async with admin_with(client) as admin:
        failed = await admin.delete_consumer_group_offsets("g", tps)
        mixed = await admin.delete_consumer_group_offsets("g", tps)
    assert all(isinstance(o.error, GroupAuthorizationFailedError) for o in failed.values())
    assert mixed[tps[0]].ok
    assert isinstance(mixed[tps[1]].error, GroupSubscribedToTopicError)


async def test_list_groups_asks_every_broker() -> None:
    """Every broker is asked; non-consumer groups are left out; a broker that fails is
    in errors; states need ListGroups v4."""
    client = FakeClient(
        ListGroupsResponse(
            groups=[
                ListedGroup("b-group", "consumer", "Stable"),
                ListedGroup("connect", "connect", "Stable"),
            ]
        ),
        ListGroupsResponse(error_code=LOADING),
        ListGroupsResponse(groups=[ListedGroup("a-simple", "", "Empty")]),
    )
    async with admin_with(client) as admin:
        listings = await admin.list_consumer_groups()
        client.versions[ListGroupsRequest.API_KEY] = 3
        old = await admin.list_consumer_groups(states=[GroupState.STABLE])
    assert [
        (g.group_id, g.is_simple_consumer_group, g.state, g.coordinator) for g in listings.all()
    ] == [
        ("a-simple", True, GroupState.EMPTY, 2),
        ("b-group", False, GroupState.STABLE, 1),
    ]
    assert old.valid == ()
    assert sorted(old.errors) == [1, 2]
    assert all(isinstance(e, UnsupportedVersionError) for e in old.errors.values())
    with pytest.raises(UnsupportedVersionError):
        old.all()
