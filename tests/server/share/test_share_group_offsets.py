"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets through
Broker.handle and the wire codec: start offsets and lag, Kafka's refusals (a group with
members, an unknown group, unknown topics and partitions), and an altered start offset
kept across a disk broker's restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
)
from kafkette.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
)
from kafkette.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.list_groups_request import ListGroupsRequest
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.server import Broker
from tests.server.dataplane import call
from tests.server.share.test_share_handlers import (
    ACCEPT,
    Member,
    acquired,
    produce_values,
    setup,
)

pytestmark = pytest.mark.anyio

UNKNOWN_TOPIC_OR_PARTITION = 3
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
INVALID_GROUP_ID = 24


async def describe(
    broker: Broker, group: str, partitions: list[int] | None = None, version: int = 1
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start offset, lag) of the group's partitions of "t" (or of
    every partition it has a state for when ``partitions`` is None)."""
    topics = (
        None if partitions is None else [DescribeShareGroupOffsetsRequestTopic("t", partitions)]
    )
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group, topics)]
    )
    response = await call(broker, request, version)
    (described,) = response.groups
    assert (described.group_id, described.error_code) == (group, 0)
    return [
        (t.topic_name, p.partition_index, p.start_offset, p.lag)
        for t in described.topics
        for p in t.partitions
        if p.error_code == 0
    ]


async def alter(
    broker: Broker, group: str, topic: str, offsets: dict[int, int]
) -> AlterShareGroupOffsetsResponse:
    partitions = [AlterShareGroupOffsetsRequestPartition(p, o) for p, o in offsets.items()]
    request = AlterShareGroupOffsetsRequest(
        group_id=group, topics=[AlterShareGroupOffsetsRequestTopic(topic, partitions)]
    )
    response: AlterShareGroupOffsetsResponse = await call(broker, request, 0)
    return response


async def delete(broker: Broker, group: str, topic: str) -> DeleteShareGroupOffsetsResponse:
    request = DeleteShareGroupOffsetsRequest(
        group_id=group, topics=[DeleteShareGroupOffsetsRequestTopic(topic)]
    )
    response: DeleteShareGroupOffsetsResponse = await call(broker, request, 0)
    return response


async def leave(broker: Broker, member: Member) -> None:
    request = ShareGroupHeartbeatRequest(
        group_id=member.group, member_id=member.member_id, member_epoch=-1
    )
    assert (await call(broker, request, 1)).error_code == 0


async def test_describe_gives_start_offset_and_lag() -> None:
    """The start offset moves past the accepted prefix; the lag counts the records from
    it to the high watermark that are neither accepted nor archived (v1), and v0 has no
    lag. A partition without state, and an unknown group, have start offset -1."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"0", b"1", b"2", b"3", b"4")
    assert acquired(await member.fetch()) == [AcquiredRecords(0, 4, 1)]
    await member.acknowledge([(0, 1, ACCEPT), (3, 3, ACCEPT)])
    assert await describe(broker, "g", [0]) == [("t", 0, 2, 2)]
    assert await describe(broker, "g") == [("t", 0, 2, 2)]
    assert await describe(broker, "g", [0], version=0) == [("t", 0, 2, -1)]
    assert await describe(broker, "nobody", [0]) == [("t", 0, -1, -1)]
    assert await describe(broker, "nobody") == []
    missing = DescribeShareGroupOffsetsRequest(
        groups=[
            DescribeShareGroupOffsetsRequestGroup(
                "g", [DescribeShareGroupOffsetsRequestTopic("absent", [0])]
            )
        ]
    )
    (group,) = (await call(broker, missing, 1)).groups
    assert [
        (t.topic_name, [(p.start_offset, p.error_code) for p in t.partitions]) for t in group.topics
    ] == [("absent", [(-1, 0)])]


async def test_alter_and_delete_need_an_empty_known_group() -> None:
    """While a member is in the group, alter and delete answer NON_EMPTY_GROUP; an
    unknown group is GROUP_ID_NOT_FOUND, an empty group id INVALID_GROUP_ID."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    busy = await alter(broker, "g", "t", {0: 0})
    assert (busy.error_code, busy.error_message, busy.responses) == (
        NON_EMPTY_GROUP,
        "The group is not empty.",
        [],
    )
    assert (await delete(broker, "g", "t")).error_code == NON_EMPTY_GROUP
    unknown = await alter(broker, "nope", "t", {0: 0})
    assert (unknown.error_code, unknown.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Group nope not found.",
    )
    assert (await delete(broker, "nope", "t")).error_code == GROUP_ID_NOT_FOUND
    assert (await alter(broker, "", "t", {0: 0})).error_code == INVALID_GROUP_ID


async def test_altered_start_offset_is_where_the_group_reads_next() -> None:
    """An Empty group's start offset altered to 3: described so, and the next member
    acquires from offset 3 (with delivery count 1: the old state is gone). Unknown topics
    and partitions fail per partition."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"0", b"1", b"2", b"3", b"4")
    assert acquired(await member.fetch()) == [AcquiredRecords(0, 4, 1)]
    await member.acknowledge([(0, 0, ACCEPT)])
    await leave(broker, member)

    answer = await alter(broker, "g", "t", {0: 3, 7: 0})
    assert answer.error_code == 0
    (topic,) = answer.responses
    assert (topic.topic_name, topic.topic_id) == ("t", topic_id)
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (0, 0),
        (7, UNKNOWN_TOPIC_OR_PARTITION),
    ]
    (absent,) = (await alter(broker, "g", "absent", {0: 1})).responses
    assert [(p.partition_index, p.error_code) for p in absent.partitions] == [
        (0, UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert await describe(broker, "g", [0]) == [("t", 0, 3, 2)]

    other = Member(broker, topic_id)
    await other.join()
    assert acquired(await other.fetch()) == [AcquiredRecords(3, 4, 1)]


async def test_delete_forgets_the_topic_state() -> None:
    """Deleting an Empty group's offsets of a topic leaves no state (start offset -1);
    a second delete finds nothing to delete, an unknown topic is refused by name."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await leave(broker, member)
    deleted = await delete(broker, "g", "t")
    assert deleted.error_code == 0
    assert [(t.topic_name, t.topic_id, t.error_code) for t in deleted.responses] == [
        ("t", topic_id, 0)
    ]
    assert await describe(broker, "g", [0]) == [("t", 0, -1, -1)]
    assert broker.share_groups.book.share_keys() == []
    again = await delete(broker, "g", "t")
    assert [(t.error_code, t.error_message) for t in again.responses] == [
        (UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")
    ]
    absent = await delete(broker, "g", "absent")
    assert [(t.topic_name, t.error_code) for t in absent.responses] == [
        ("absent", UNKNOWN_TOPIC_OR_PARTITION)
    ]


async def test_an_altered_start_offset_survives_a_disk_restart(tmp_path: Path) -> None:
    """On a disk broker, the altered start offset is written to __share_group_state: after
    a restart the group is listed Empty, described at that offset, and read from it."""
    broker, _, topic_id = setup(str(tmp_path))
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"0", b"1", b"2", b"3")
    await leave(broker, member)
    assert (await alter(broker, "g", "t", {0: 2})).error_code == 0
    broker.close()

    again, _, same_id = setup(str(tmp_path))
    assert same_id == topic_id
    listed = await call(again, ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Empty")]
    assert await describe(again, "g", [0]) == [("t", 0, 2, 2)]
    other = Member(again, topic_id)
    await other.join()
    assert acquired(await other.fetch()) == [AcquiredRecords(2, 3, 1)]
    again.close()


def test_served_at_kafka_4_2_versions() -> None:
    """ApiVersions lists DescribeShareGroupOffsets v0-1 (v1: the lag, KIP-1226) and
    AlterShareGroupOffsets and DeleteShareGroupOffsets v0, as Kafka 4.2."""
    broker, _, _ = setup()
    served = broker.supported_versions()
    assert {key: served[key] for key in (90, 91, 92)} == {90: (0, 1), 91: (0, 0), 92: (0, 0)}
