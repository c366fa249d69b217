"""The group APIs through Broker.handle and the wire codec, across versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.leave_group_request import MemberIdentity
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kafkette.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kafkette.server import Broker, BrokerConfig
from kafkette.testing import ManualClock
from tests.server.dataplane import NOW, FakeClock, call, make_broker
from tests.server.groups.harness import subscription

pytestmark = pytest.mark.anyio

INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def group_broker(**settings: Any) -> Broker:
    settings.setdefault("group_min_session_timeout_ms", 100)
    return make_broker(FakeClock(), **settings)


def join_request(member_id: str = "", metadata: bytes = b"m", **fields: Any) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=fields.pop("group_id", "g"),
        session_timeout_ms=fields.pop("session_timeout_ms", 10_000),
        rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 20_000),
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", metadata)],
        **fields,
    )


async def test_find_coordinator_every_version() -> None:
    """This node, at its advertised address, for groups and transactional ids; other key
    types are INVALID_REQUEST."""
    broker = Broker(BrokerConfig(node_id=3, advertised_host="kafka.local", advertised_port=9999))
    for version in range(4):
        response = await call(broker, FindCoordinatorRequest(key="g"), version)
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0,
            3,
            "kafka.local",
            9999,
        )
        assert response.error_message == ("" if version == 0 else "NONE")
    response = await call(broker, FindCoordinatorRequest(key="g", key_type=5), 3)
    assert (response.error_code, response.node_id, response.port) == (INVALID_REQUEST, -1, -1)
    for version in (4, 5, 6):
        response = await call(
            broker, FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]), version
        )
        assert [
            (c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators
        ] == [
            ("a", 3, "kafka.local", 9999, 0),
            ("b", 3, "kafka.local", 9999, 0),
        ]
    response = await call(broker, FindCoordinatorRequest(key_type=7, coordinator_keys=["a"]), 4)
    assert [(c.node_id, c.error_code) for c in response.coordinators] == [(-1, INVALID_REQUEST)]


async def test_one_member_lifecycle_at_several_versions() -> None:
    """Join (v4+ two steps), sync, heartbeat, commit, fetch, describe, leave, delete."""
    broker = group_broker()
    broker.cluster.create_topic("t", 2)
    first = await call(broker, join_request(), 5)
    assert (first.error_code, first.member_id) == (MEMBER_ID_REQUIRED, first.member_id)
    assert first.member_id.startswith("tests-")
    member = first.member_id
    joined = await call(broker, join_request(member), 9)
    assert (
        joined.error_code,
        joined.generation_id,
        joined.protocol_type,
        joined.protocol_name,
        joined.leader,
        joined.skip_assignment,
        [(m.member_id, m.group_instance_id, m.metadata) for m in joined.members],
    ) == (0, 1, "consumer", "range", member, False, [(member, None, b"m")])
    synced = await call(
        broker,
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member, b"all of t")],
        ),
        5,
    )
    assert (synced.error_code, synced.protocol_type, synced.protocol_name, synced.assignment) == (
        0,
        "consumer",
        "range",
        b"all of t",
    )
    for version in range(5):
        beat = await call(broker, HeartbeatRequest("g", 1, member), version)
        assert beat.error_code == 0
    assert (
        await call(broker, HeartbeatRequest("g", 0, member), 0)
    ).error_code == ILLEGAL_GENERATION

    commit = await call(
        broker,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=member,
            topics=[
                OffsetCommitRequestTopic(
                    "t",
                    [
                        OffsetCommitRequestPartition(0, 10, 4, committed_metadata="meta"),
                        OffsetCommitRequestPartition(5, 1),
                    ],
                ),
                OffsetCommitRequestTopic("nope", [OffsetCommitRequestPartition(0, 1)]),
            ],
        ),
        8,
    )
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in commit.topics
    ] == [
        ("t", [(0, 0), (5, UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nope", [(0, UNKNOWN_TOPIC_OR_PARTITION)]),
    ]

    fetched = await call(
        broker, OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic("t", [0, 1])]), 1
    )
    assert [
        (
            t.name,
            [
                (p.partition_index, p.committed_offset, p.metadata, p.error_code)
                for p in t.partitions
            ],
        )
        for t in fetched.topics
    ] == [("t", [(0, 10, "meta", 0), (1, -1, "", 0)])]
    everything = await call(broker, OffsetFetchRequest(group_id="g", topics=None), 7)
    assert [
        (
            t.name,
            [
                (p.partition_index, p.committed_offset, p.committed_leader_epoch)
                for p in t.partitions
            ],
        )
        for t in everything.topics
    ] == [("t", [(0, 10, 4)])]
    batched = await call(
        broker,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(group_id="g", topics=None),
                OffsetFetchRequestGroup(
                    group_id="other", topics=[OffsetFetchRequestTopics("t", [1])]
                ),
            ]
        ),
        8,
    )
    assert [
        (
            g.group_id,
            g.error_code,
            [
                (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in g.topics
            ],
        )
        for g in batched.groups
    ] == [("g", 0, [("t", [(0, 10)])]), ("other", 0, [("t", [(1, -1)])])]

    described = await call(
        broker, DescribeGroupsRequest(groups=["g", "nope"], include_authorized_operations=True), 5
    )
    g, nope = described.groups
    assert (
        g.error_code,
        g.group_state,
        g.protocol_type,
        g.protocol_data,
        g.authorized_operations,
    ) == (
        0,
        "Stable",
        "consumer",
        "range",
        GROUP_OPERATIONS,
    )
    assert [
        (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
        for m in g.members
    ] == [(member, "tests", "/127.0.0.1", b"m", b"all of t")]
    assert (nope.error_code, nope.group_state, nope.members) == (0, "Dead", [])
    old = await call(broker, DescribeGroupsRequest(groups=["g"]), 0)
    assert old.groups[0].authorized_operations == -(2**31)

    deleted = await call(broker, DeleteGroupsRequest(groups_names=["g", "nope"]), 2)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g", NON_EMPTY_GROUP),
        ("nope", GROUP_ID_NOT_FOUND),
    ]
    left = await call(broker, LeaveGroupRequest(group_id="g", member_id=member), 0)
    assert left.error_code == 0
    again = await call(broker, LeaveGroupRequest(group_id="g", member_id=member), 2)
    assert again.error_code == UNKNOWN_MEMBER_ID
    listed = await call(broker, ListGroupsRequest(), 4)
    assert [(x.group_id, x.protocol_type, x.group_state) for x in listed.groups] == [
        ("g", "consumer", "Empty")
    ]
    deleted = await call(broker, DeleteGroupsRequest(groups_names=["g"]), 0)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", 0)]
    assert (await call(broker, ListGroupsRequest(), 0)).groups == []


async def test_leave_group_v3_batch_and_static_removal() -> None:
    """LeaveGroup v3+: members by member id or (for static members) by instance id, with an
    error each."""
    broker = group_broker()
    static = await call(broker, join_request(group_instance_id="app-1"), 5)
    assert (static.error_code, static.member_id) == (0, static.member_id)
    assert static.member_id.startswith("app-1-")
    response = await call(
        broker,
        LeaveGroupRequest(
            group_id="g",
            members=[MemberIdentity("", "app-1"), MemberIdentity("ghost", None)],
        ),
        5,
    )
    assert (
        response.error_code,
        [(m.member_id, m.group_instance_id, m.error_code) for m in response.members],
    ) == (
        0,
        [("", "app-1", 0), ("ghost", None, UNKNOWN_MEMBER_ID)],
    )


async def test_two_members_rebalance_through_the_handlers() -> None:
    """The second member's JoinGroup waits until the first rejoins; both then sync."""
    broker = group_broker()
    first = (await call(broker, join_request(), 4)).member_id
    assert (await call(broker, join_request(first), 4)).generation_id == 1
    await call(broker, SyncGroupRequest("g", 1, first, assignments=[]), 3)
    results: dict[str, Any] = {}

    async def join(name: str, member_id: str) -> None:
        results[name] = await call(broker, join_request(member_id, metadata=name.encode()), 6)

    second = (await call(broker, join_request(), 4)).member_id
    async with anyio.create_task_group() as tg:
        tg.start_soon(join, "second", second)
        await anyio.wait_all_tasks_blocked()
        assert "second" not in results
        beat = await call(broker, HeartbeatRequest("g", 1, first), 4)
        assert beat.error_code == REBALANCE_IN_PROGRESS
        tg.start_soon(join, "first", first)
    assert results["first"].generation_id == results["second"].generation_id == 2
    assert [(m.member_id, m.metadata) for m in results["first"].members] == [
        (first, b"first"),
        (second, b"second"),
    ]
    assert results["second"].members == []

    async def sync(member_id: str, assignments: list[SyncGroupRequestAssignment]) -> None:
        results[member_id] = await call(
            broker, SyncGroupRequest("g", 2, member_id, assignments=assignments), 4
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(sync, second, [])
        await anyio.wait_all_tasks_blocked()
        assert second not in results
        tg.start_soon(
            sync,
            first,
            [SyncGroupRequestAssignment(first, b"A"), SyncGroupRequestAssignment(second, b"B")],
        )
    assert (results[first].assignment, results[second].assignment) == (b"A", b"B")


async def test_offset_commit_v2_retention_and_offset_delete() -> None:
    """A standalone commit with a retention (v2) and OffsetDelete of a consumed topic."""
    broker = group_broker()
    broker.cluster.create_topic("t", 1)
    broker.cluster.create_topic("u", 1)
    response = await call(
        broker,
        OffsetCommitRequest(
            group_id="g",
            retention_time_ms=1_000,
            topics=[OffsetCommitRequestTopic("u", [OffsetCommitRequestPartition(0, 3)])],
        ),
        2,
    )
    assert response.topics[0].partitions[0].error_code == 0
    (stored,) = broker.groups.fetch_offsets("g", [("u", 0)]).values()
    assert stored is not None
    assert (stored.offset, stored.commit_timestamp_ms, stored.expire_timestamp_ms) == (
        3,
        NOW,
        NOW + 1_000,
    )
    member = (await call(broker, join_request(), 4)).member_id
    await call(broker, join_request(member, metadata=subscription("t")), 4)
    await call(broker, SyncGroupRequest("g", 1, member, assignments=[]), 3)
    await call(
        broker,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=member,
            topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 8)])],
        ),
        7,
    )
    deleted = await call(
        broker,
        OffsetDeleteRequest(
            group_id="g",
            topics=[
                OffsetDeleteRequestTopic("t", [OffsetDeleteRequestPartition(0)]),
                OffsetDeleteRequestTopic("u", [OffsetDeleteRequestPartition(0)]),
                OffsetDeleteRequestTopic("x", [OffsetDeleteRequestPartition(0)]),
            ],
        ),
        0,
    )
    assert (
        deleted.error_code,
        [(t.name, [p.error_code for p in t.partitions]) for t in deleted.topics],
    ) == (
        0,
        [("t", [GROUP_SUBSCRIBED_TO_TOPIC]), ("u", [0]), ("x", [UNKNOWN_TOPIC_OR_PARTITION])],
    )
    missing = await call(broker, OffsetDeleteRequest(group_id="nope", topics=[]), 0)
    assert (missing.error_code, missing.topics) == (GROUP_ID_NOT_FOUND, [])


async def test_list_groups_filters() -> None:
    """ListGroups v4 filters by state, v5 by type (classic is the only one)."""
    broker = group_broker()
    await call(broker, OffsetCommitRequest(group_id="simple", topics=[]), 8)
    broker.cluster.create_topic("t", 1)
    await call(
        broker,
        OffsetCommitRequest(
            group_id="simple",
            topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])],
        ),
        8,
    )
    await call(broker, join_request(), 3)
    listed = await call(broker, ListGroupsRequest(states_filter=["CompletingRebalance"]), 4)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "CompletingRebalance")]
    listed = await call(broker, ListGroupsRequest(types_filter=["classic"]), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("simple", "", "Empty", "classic"),
        ("g", "consumer", "CompletingRebalance", "classic"),
    ]
    assert (await call(broker, ListGroupsRequest(types_filter=["share"]), 5)).groups == []


async def test_timer_loop_expires_sessions_on_an_injected_clock() -> None:
    """The timer loop (Broker.run_timers) notices a ManualClock moved past a session
    timeout."""
    clock = ManualClock()
    broker = Broker(BrokerConfig(group_min_session_timeout_ms=100), clock=clock)
    member = (await call(broker, join_request(session_timeout_ms=500), 3)).member_id
    async with anyio.create_task_group() as tg:
        tg.start_soon(broker.run_timers)
        clock.advance(499)
        await anyio.sleep(0.15)  # the loop's longest sleep: it has looked at least once
        assert broker.groups.engine.groups["g"].has(member)
        clock.advance(1)
        with anyio.fail_after(5):
            while broker.groups.engine.groups["g"].members:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert (await call(broker, HeartbeatRequest("g", 1, member), 0)).error_code == UNKNOWN_MEMBER_ID


async def test_groups_and_offsets_survive_a_restart_on_disk(tmp_path: Path) -> None:
    """A disk broker writes groups and offsets to __consumer_offsets and reads them back."""
    broker = group_broker(data_dir=str(tmp_path))
    broker.cluster.create_topic("t", 1)
    member = (await call(broker, join_request(), 4)).member_id
    await call(broker, join_request(member), 4)
    await call(
        broker,
        SyncGroupRequest("g", 1, member, assignments=[SyncGroupRequestAssignment(member, b"A")]),
        3,
    )
    await call(
        broker,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=member,
            topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 42)])],
        ),
        8,
    )
    broker.close()
    reopened = group_broker(data_dir=str(tmp_path))
    try:
        described = await call(reopened, DescribeGroupsRequest(groups=["g"]), 4)
        (group,) = described.groups
        assert (group.group_state, [(m.member_id, m.member_assignment) for m in group.members]) == (
            "Stable",
            [(member, b"A")],
        )
        assert (await call(reopened, HeartbeatRequest("g", 1, member), 3)).error_code == 0
        fetched = await call(reopened, OffsetFetchRequest(group_id="g", topics=None), 7)
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in fetched.topics] == [
            ("t", [42])
        ]
    finally:
        reopened.close()


async def test_offset_fetch_require_stable_with_an_open_transaction() -> None:
    """KIP-447: while a transaction holds a group's offset, OffsetFetch with require_stable
    answers UNSTABLE_OFFSET_COMMIT for that partition; without it, the last committed one."""
    broker = group_broker()
    broker.cluster.create_topic("t", 2)
    init = await call(
        broker, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000), 4
    )
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    added = await call(broker, AddOffsetsToTxnRequest("tx", pid, epoch, "g"), 3)
    assert added.error_code == 0
    committed = await call(
        broker,
        TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            topics=[TxnOffsetCommitRequestTopic("t", [TxnOffsetCommitRequestPartition(0, 7)])],
        ),
        3,
    )
    assert committed.topics[0].partitions[0].error_code == 0
    wanted = [OffsetFetchRequestTopic("t", [0, 1])]
    stable = await call(
        broker, OffsetFetchRequest(group_id="g", topics=wanted, require_stable=True), 7
    )
    assert [
        (p.partition_index, p.committed_offset, p.error_code) for p in stable.topics[0].partitions
    ] == [
        (0, -1, UNSTABLE_OFFSET_COMMIT),
        (1, -1, 0),
    ]
    batched = await call(
        broker,
        OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup("g", topics=[OffsetFetchRequestTopics("t", [0])])],
            require_stable=True,
        ),
        8,
    )
    assert batched.groups[0].topics[0].partitions[0].error_code == UNSTABLE_OFFSET_COMMIT
    relaxed = await call(broker, OffsetFetchRequest(group_id="g", topics=wanted), 7)
    assert [(p.committed_offset, p.error_code) for p in relaxed.topics[0].partitions] == [
        (-1, 0),
        (-1, 0),
    ]
