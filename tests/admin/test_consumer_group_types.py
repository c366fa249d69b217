"""The admin client on groups of both protocols (KIP-848): a ``consumer`` group is
described from ConsumerGroupDescribe (type, epochs, each member's epoch and target
assignment), a classic group from DescribeGroups; ListGroups reports and filters types."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkette import AdminClient, AsyncAdminClient, Consumer, NewTopic, TopicPartition
from kafkette.admin import GroupState, GroupType
from kafkette.testing import close_memory_cluster, memory_cluster
from tests.consumer.group.helpers import poll_until

PARTITIONS = frozenset(TopicPartition("t", p) for p in range(4))


@pytest.fixture
def servers() -> Iterator[str]:
    url = memory_cluster(
        f"admin-kip848-{uuid.uuid4().hex[:8]}",
        properties={"group.consumer.heartbeat.interval.ms": "100"},
    )
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic("t", 4)]).all()
        yield url
    finally:
        close_memory_cluster(url)


def member(servers: str, group: str, protocol: str) -> Consumer:
    consumer = Consumer(
        bootstrap_servers=servers,
        group_id=group,
        group_protocol=protocol,
        fetch_max_wait_ms=100,
        auto_offset_reset="earliest",
    )
    consumer.subscribe(["t"])
    return consumer


def test_both_group_types_described_and_listed(servers: str) -> None:
    with (
        member(servers, "new", "consumer") as a,
        member(servers, "new", "consumer") as b,
        member(servers, "old", "classic") as c,
        AdminClient(bootstrap_servers=servers) as admin,
    ):
        poll_until([a, b, c], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        poll_until([c], lambda: len(c.assignment()) == 4)
        described = admin.describe_consumer_groups(["new", "old"], timeout=10).all()

        new = described["new"]
        assert (new.type, new.state, new.protocol_type) == (
            GroupType.CONSUMER,
            GroupState.STABLE,
            "consumer",
        )
        assert new.partition_assignor == "uniform"
        assert new.group_epoch == new.target_assignment_epoch == 2  # two joins
        by_id = {m.member_id: m for m in new.members}
        assert set(by_id) == {a._core.group.member_id, b._core.group.member_id}  # type: ignore[union-attr]
        assert all(m.member_epoch == 2 for m in new.members)
        assert all(m.assignment == m.target_assignment for m in new.members)
        owned = [m.assignment for m in new.members]
        assert sorted(len(p) for p in owned) == [2, 2]
        assert owned[0] | owned[1] == PARTITIONS and not owned[0] & owned[1]

        old = described["old"]
        assert (old.type, old.state, old.group_epoch) == (
            GroupType.CLASSIC,
            GroupState.STABLE,
            None,
        )
        assert [(m.assignment, m.member_epoch, m.target_assignment) for m in old.members] == [
            (PARTITIONS, None, None)
        ]

        listed = {(g.group_id, g.type) for g in admin.list_consumer_groups().all()}
        assert listed == {("new", GroupType.CONSUMER), ("old", GroupType.CLASSIC)}
        only_new = admin.list_consumer_groups(types=["consumer"]).all()
        assert [g.group_id for g in only_new] == ["new"]
        only_old = admin.list_consumer_groups(types=[GroupType.CLASSIC]).all()
        assert [g.group_id for g in only_old] == ["old"]


@pytest.mark.anyio
async def test_async_describe_of_a_consumer_group_and_of_none(servers: str) -> None:
    with member(servers, "solo", "consumer") as solo:
        poll_until([solo], lambda: len(solo.assignment()) == 4)
        async with AsyncAdminClient(bootstrap_servers=servers) as admin:
            described = (await admin.describe_consumer_groups(["solo", "nobody"])).all()
    assert described["solo"].type is GroupType.CONSUMER
    assert [m.assignment for m in described["solo"].members] == [PARTITIONS]
    # an unknown group: not a consumer group, so DescribeGroups reports it Dead
    assert (described["nobody"].type, described["nobody"].state) == (
        GroupType.CLASSIC,
        GroupState.DEAD,
    )
