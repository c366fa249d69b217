"""ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and ShareGroupDescribe through
Broker.handle and the wire codec: records acquired, acknowledged, redelivered, and the
state kept across a disk broker's restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from kafkette.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafkette.protocol.messages.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kafkette.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from kafkette.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords, ShareFetchResponse
from kafkette.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.server import Broker
from tests.server.dataplane import FakeClock, batch, call, make_broker, produce, records_of
from tests.server.txn import helpers as txn

pytestmark = pytest.mark.anyio

VERSION = 2
ACCEPT, RELEASE, REJECT = 1, 2, 3
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
INVALID_RECORD_STATE = 121
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


class Member:
    """One share consumer speaking the protocol by hand."""

    def __init__(self, broker: Broker, topic_id: uuid.UUID, group: str = "g") -> None:
        self.broker, self.topic_id, self.group = broker, topic_id, group
        self.member_id = str(uuid.uuid4())
        self.epoch = 0

    async def join(self) -> list[int]:
        response = await call(
            self.broker,
            ShareGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=0,
                subscribed_topic_names=["t"],
            ),
            1,
        )
        assert response.error_code == 0
        assert response.assignment is not None
        return [p for tp in response.assignment.topic_partitions for p in tp.partitions]

    async def fetch(
        self,
        acks: list[tuple[int, int, int]] | None = None,
        max_wait_ms: int = 0,
        *,
        max_records: int = 100,
        acquire_mode: int = 0,
    ) -> ShareFetchResponse:
        batches = [AcknowledgementBatch(f, last, [t]) for f, last, t in acks or []]
        response: ShareFetchResponse = await call(
            self.broker,
            ShareFetchRequest(
                group_id=self.group,
                member_id=self.member_id,
                share_session_epoch=self.epoch,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_records=max_records,
                share_acquire_mode=acquire_mode,
                topics=[FetchTopic(self.topic_id, [FetchPartition(0, 0, batches)])],
            ),
            VERSION,
        )
        if response.error_code == 0:
            self.epoch = self.epoch + 1 if self.epoch >= 0 else -1
        return response

    async def acknowledge(self, acks: list[tuple[int, int, int]]) -> ShareAcknowledgeResponse:
        batches = [AcknowledgementBatch(f, last, [t]) for f, last, t in acks]
        response: ShareAcknowledgeResponse = await call(
            self.broker,
            ShareAcknowledgeRequest(
                group_id=self.group,
                member_id=self.member_id,
                share_session_epoch=self.epoch,
                topics=[AcknowledgeTopic(self.topic_id, [AcknowledgePartition(0, batches)])],
            ),
            VERSION,
        )
        if response.error_code == 0:
            self.epoch += 1
        return response


def acquired(response: ShareFetchResponse) -> list[AcquiredRecords]:
    assert response.error_code == 0
    return [r for t in response.responses for p in t.partitions for r in p.acquired_records]


def values(response: ShareFetchResponse) -> list[bytes | None]:
    wanted = {o for r in acquired(response) for o in range(r.first_offset, r.last_offset + 1)}
    return [
        r.value
        for t in response.responses
        for p in t.partitions
        for r in records_of(p.records)
        if r.offset in wanted
    ]


def setup(data_dir: str | None = None) -> tuple[Broker, FakeClock, uuid.UUID]:
    clock = FakeClock()
    broker = make_broker(clock, data_dir)
    topic = broker.cluster.get_topic("t") if data_dir and "t" in broker.cluster.topics else None
    if topic is None:
        topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    return broker, clock, topic.topic_id


async def produce_values(broker: Broker, *values: bytes) -> None:
    answer = await produce(broker, "t", 0, batch([(None, v) for v in values]))
    assert answer.error_code == 0


async def test_records_acquired_acknowledged_and_released_come_back() -> None:
    """Produced records are acquired once with delivery count 1; ACCEPTed and REJECTed
    ones never come back, a RELEASEd one comes back with delivery count 2."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    assert await member.join() == [0]
    assert acquired(await member.fetch()) == []  # the share partition starts at the end
    await produce_values(broker, b"a", b"b", b"c")
    first = await member.fetch()
    assert acquired(first) == [AcquiredRecords(0, 2, 1)]
    assert values(first) == [b"a", b"b", b"c"]
    assert first.acquisition_lock_timeout_ms == 30_000
    assert acquired(await member.fetch()) == []  # all three are held
    ack = await member.acknowledge([(0, 0, ACCEPT), (1, 1, RELEASE), (2, 2, REJECT)])
    assert [p.error_code for t in ack.responses for p in t.partitions] == [0]
    again = await member.fetch()
    assert acquired(again) == [AcquiredRecords(1, 1, 2)]
    assert values(again) == [b"b"]
    done = await member.fetch(acks=[(1, 1, ACCEPT)])
    assert [p.acknowledge_error_code for t in done.responses for p in t.partitions] == [0]
    assert acquired(done) == []
    records = broker.share_groups.partitions
    (share,) = records.values()
    assert share.start_offset == 3 and share.records() == {}


async def test_records_before_the_first_fetch_are_not_delivered() -> None:
    """share.auto.offset.reset is latest by default: what the log held when the share
    partition started is not delivered."""
    broker, _, topic_id = setup()
    await produce_values(broker, b"old")
    member = Member(broker, topic_id)
    await member.join()
    assert acquired(await member.fetch()) == []
    await produce_values(broker, b"new")
    response = await member.fetch()
    assert acquired(response) == [AcquiredRecords(1, 1, 1)]
    assert values(response) == [b"new"]


async def test_an_expired_lock_gives_the_record_to_another_member() -> None:
    """A record whose acquisition lock expired on the broker's clock goes to the next
    member that fetches, with delivery count 2; the first member can no longer
    acknowledge it."""
    broker, clock, topic_id = setup()
    one, two = Member(broker, topic_id), Member(broker, topic_id)
    await one.join()
    await two.join()
    await one.fetch()
    await two.fetch()
    await produce_values(broker, b"x")
    assert acquired(await one.fetch()) == [AcquiredRecords(0, 0, 1)]
    assert acquired(await two.fetch()) == []
    clock.advance(30_000)
    assert broker.share_groups.next_deadline_ms() == clock.now
    broker.share_groups.tick()
    assert acquired(await two.fetch()) == [AcquiredRecords(0, 0, 2)]
    late = await one.acknowledge([(0, 0, ACCEPT)])
    assert [p.error_code for t in late.responses for p in t.partitions] == [INVALID_RECORD_STATE]


async def test_a_long_poll_answers_when_records_arrive() -> None:
    """A ShareFetch with nothing to acquire waits, and answers with the records
    produced meanwhile."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    got: list[ShareFetchResponse] = []

    async def poll() -> None:
        got.append(await member.fetch(max_wait_ms=20_000))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(poll)
            await anyio.wait_all_tasks_blocked()
            assert got == []
            await produce_values(broker, b"late")
    assert values(got[0]) == [b"late"]


async def test_session_epochs_are_checked() -> None:
    """A ShareFetch in a session that does not exist, or at the wrong epoch, fails with
    the session errors; ShareAcknowledge cannot open a session."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    member.epoch = 3
    assert (await member.fetch()).error_code == SHARE_SESSION_NOT_FOUND
    member.epoch = 0
    assert (await member.acknowledge([])).error_code == INVALID_SHARE_SESSION_EPOCH
    await member.fetch()
    member.epoch = 5
    assert (await member.fetch()).error_code == INVALID_SHARE_SESSION_EPOCH


async def test_closing_the_session_gives_the_records_back() -> None:
    """Epoch -1 ends the session: the member's acquired records go back with their
    delivery count lowered, so the next member gets them at count 1."""
    broker, _, topic_id = setup()
    one, two = Member(broker, topic_id), Member(broker, topic_id)
    await one.join()
    await two.join()
    await one.fetch()
    await produce_values(broker, b"a", b"b")
    assert acquired(await one.fetch()) == [AcquiredRecords(0, 1, 1)]
    one.epoch = -1
    closing = await one.fetch(acks=[(0, 0, ACCEPT)])
    assert [p.acknowledge_error_code for t in closing.responses for p in t.partitions] == [0]
    response = await two.fetch()
    assert acquired(response) == [AcquiredRecords(1, 1, 1)]
    assert values(response) == [b"b"]


async def test_describe_names_members_and_assignment() -> None:
    """ShareGroupDescribe shows a share group's members and assignments, and
    GROUP_ID_NOT_FOUND for a group that is not one."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    response = await call(broker, ShareGroupDescribeRequest(group_ids=["g", "nope"]), 1)
    described, missing = response.groups
    assert (described.error_code, described.group_state, described.assignor_name) == (
        0,
        "Stable",
        "simple",
    )
    (entry,) = described.members
    assert entry.member_id == member.member_id
    assert [(tp.topic_name, tp.partitions) for tp in entry.assignment.topic_partitions] == [
        ("t", [0])
    ]
    assert missing.error_code == GROUP_ID_NOT_FOUND


async def test_state_survives_a_disk_broker_restart(tmp_path: Path) -> None:
    """A disk broker reopened on its data directory replays __share_group_state: an
    accepted record is not redelivered, the record in flight comes back, and the start
    offset holds (what was in the log before is still not delivered)."""
    broker, _, topic_id = setup(str(tmp_path))
    await produce_values(broker, b"before")
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"a", b"b")
    assert acquired(await member.fetch()) == [AcquiredRecords(1, 2, 1)]
    await member.acknowledge([(1, 1, ACCEPT)])
    broker.close()

    again, _, same_id = setup(str(tmp_path))
    assert same_id == topic_id
    other = Member(again, topic_id)
    await other.join()
    response = await other.fetch()
    assert acquired(response) == [AcquiredRecords(2, 2, 1)]
    assert values(response) == [b"b"]
    again.close()


async def test_transaction_markers_are_never_delivered() -> None:
    """The marker that commits a transaction is archived, not acquired: the records
    before it are delivered, and accepting them moves the start offset past the marker."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    initialized = await txn.init(broker, "tx")
    pid, epoch = initialized.producer_id, initialized.producer_epoch
    assert await txn.add_partitions(broker, "tx", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert (await txn.send(broker, "t", 0, pid, epoch, 0, [b"p", b"q"])).error_code == 0
    assert await txn.end(broker, "tx", pid, epoch, True) == 0
    response = await member.fetch()
    assert acquired(response) == [AcquiredRecords(0, 1, 1)]
    assert values(response) == [b"p", b"q"]
    await member.acknowledge([(0, 1, ACCEPT)])
    (share,) = broker.share_groups.partitions.values()
    assert share.start_offset == 3 and share.records() == {}


async def test_list_describe_and_delete_share_groups() -> None:
    """ListGroups lists a share group with type share (and only it under that filter),
    DescribeGroups reports it Dead, DeleteGroups refuses it while it has members and
    then deletes it with its share-partition state."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id, group="sg")
    await member.join()
    await member.fetch()
    listed = await call(broker, ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("sg", "share", "Stable", "share")
    ]
    described = await call(broker, DescribeGroupsRequest(groups=["sg"]), 5)
    assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Dead")
    refused = await call(broker, DeleteGroupsRequest(groups_names=["sg"]), 2)
    assert [r.error_code for r in refused.results] == [NON_EMPTY_GROUP]
    left = await call(
        broker,
        ShareGroupHeartbeatRequest(group_id="sg", member_id=member.member_id, member_epoch=-1),
        1,
    )
    assert left.error_code == 0
    empty = await call(broker, ListGroupsRequest(states_filter=["Empty"]), 5)
    assert [g.group_id for g in empty.groups] == ["sg"]
    deleted = await call(broker, DeleteGroupsRequest(groups_names=["sg"]), 2)
    assert [r.error_code for r in deleted.results] == [0]
    assert broker.share_groups.groups == {} and broker.share_groups.partitions == {}
    assert broker.share_groups.book.share_keys() == []
    gone = await call(broker, ShareGroupDescribeRequest(group_ids=["sg"]), 1)
    assert gone.groups[0].error_code == GROUP_ID_NOT_FOUND


async def test_a_record_released_to_the_delivery_count_limit_is_archived() -> None:
    """group.share.delivery.count.limit (5): a record released on each of its five
    deliveries is archived, never delivered again, and the start offset passes it."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"poison", b"next")
    assert acquired(await member.fetch()) == [AcquiredRecords(0, 1, 1)]
    await member.acknowledge([(1, 1, ACCEPT)])
    for count in range(1, 5):
        response = await member.fetch(acks=[(0, 0, RELEASE)])
        assert acquired(response) == [AcquiredRecords(0, 0, count + 1)]
    assert acquired(await member.fetch(acks=[(0, 0, RELEASE)])) == []
    (share,) = broker.share_groups.partitions.values()
    assert share.start_offset == 2 and share.records() == {}


async def test_broker_settings_shape_locks_and_delivery_limit() -> None:
    """group.share.record.lock.duration.ms and group.share.delivery.count.limit are the
    broker's: a 2 s lock is announced and expires at 2 s, and with a limit of 2 a record
    whose second lock expires is archived."""
    clock = FakeClock()
    broker = make_broker(
        clock, group_share_record_lock_duration_ms=2_000, group_share_delivery_count_limit=2
    )
    topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    member = Member(broker, topic.topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"slow")
    first = await member.fetch()
    assert (first.acquisition_lock_timeout_ms, acquired(first)) == (
        2_000,
        [AcquiredRecords(0, 0, 1)],
    )
    clock.advance(1_999)
    broker.share_groups.tick()
    assert acquired(await member.fetch()) == []
    clock.advance(1)
    broker.share_groups.tick()
    assert acquired(await member.fetch()) == [AcquiredRecords(0, 0, 2)]
    clock.advance(2_000)
    broker.share_groups.tick()
    assert acquired(await member.fetch()) == []
    (share,) = broker.share_groups.partitions.values()
    assert share.start_offset == 1


async def test_a_group_id_held_by_a_consumer_group_is_not_a_share_group() -> None:
    """ShareGroupHeartbeat for an id a consumer group (KIP-848) holds is refused with
    GROUP_ID_NOT_FOUND, and no share group is made."""
    broker, _, _ = setup()
    joined = await call(
        broker,
        ConsumerGroupHeartbeatRequest(
            group_id="taken",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        ),
        0,
    )
    assert joined.error_code == 0
    refused = await call(
        broker,
        ShareGroupHeartbeatRequest(
            group_id="taken", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
        ),
        1,
    )
    assert (refused.error_code, refused.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Group taken is not a share group.",
    )
    assert broker.share_groups.groups == {}


async def test_max_records_aligns_to_stored_batches_unless_record_limit() -> None:
    """Batch-optimized (mode 0) acquires the stored batch holding the last record whole,
    past max_records; record-limit (mode 1) stops at max_records. Either way the response
    carries only the stored batches from the first to the last acquired record."""
    broker, _, topic_id = setup()
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    await produce_values(broker, b"a", b"b", b"c")
    await produce_values(broker, b"d", b"e")
    await produce_values(broker, b"f")
    whole = await member.fetch(max_records=2)
    assert acquired(whole) == [AcquiredRecords(0, 2, 1)]
    (part,) = [p for t in whole.responses for p in t.partitions]
    assert [r.value for r in records_of(part.records)] == [b"a", b"b", b"c"]
    exact = await member.fetch(max_records=1, acquire_mode=1)
    assert acquired(exact) == [AcquiredRecords(3, 3, 1)]
    (part,) = [p for t in exact.responses for p in t.partitions]
    assert [r.value for r in records_of(part.records)] == [b"d", b"e"]
    assert values(exact) == [b"d"]
    rest = await member.fetch(max_records=500)
    assert acquired(rest) == [AcquiredRecords(4, 5, 1)]
    (part,) = [p for t in rest.responses for p in t.partitions]
    assert [r.value for r in records_of(part.records)] == [b"d", b"e", b"f"]
