"""A consumer group (KIP-848) survives a restart of the disk broker: its records in
``__consumer_offsets`` give back the same members, epochs and assignments
(ConsumerGroupDescribe), a member heartbeating with its epoch carries on without
rejoining, and one that stays silent is expired a session timeout after the restart.
Through Broker.handle and the wire codec, on a manual clock."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkette.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    OffsetFetchRequest,
)
from kafkette.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from kafkette.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic
from kafkette.server import Broker, BrokerConfig
from kafkette.server.groups.log_store import OFFSETS_TOPIC
from tests.server.dataplane import FakeClock, call
from tests.server.groups.test_consumer_group_handlers import commit

pytestmark = pytest.mark.anyio

HB_VERSION = 1
SESSION_MS = 45_000  # group.consumer.session.timeout.ms's default
UNKNOWN_MEMBER_ID = 25


def disk_broker(clock: FakeClock, data_dir: Path) -> Broker:
    return Broker(BrokerConfig(data_dir=str(data_dir), offsets_topic_num_partitions=1), clock=clock)


def beat(
    member_id: str, epoch: int, owned: dict[uuid.UUID, list[int]] | None, **fields: Any
) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", -1),
        topic_partitions=None
        if owned is None
        else [TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()],
        **fields,
    )


def owned_of(response: Any) -> dict[uuid.UUID, list[int]]:
    assert response.assignment is not None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


async def stable_group(broker: Broker, topic_id: uuid.UUID) -> dict[str, list[int]]:
    """m1 (topic names, range) and m2 (a regex, static) in group g, both at epoch 2 with
    two partitions each; what each holds."""
    r1 = await call(
        broker,
        beat(
            "m1",
            0,
            {},
            rebalance_timeout_ms=20_000,
            subscribed_topic_names=["t"],
            server_assignor="range",
        ),
        HB_VERSION,
    )
    assert (r1.error_code, r1.member_epoch, owned_of(r1)) == (0, 1, {topic_id: [0, 1, 2, 3]})
    r2 = await call(
        broker,
        beat(
            "m2",
            0,
            {},
            rebalance_timeout_ms=20_000,
            subscribed_topic_names=[],
            subscribed_topic_regex="t.*",
            instance_id="static-2",
        ),
        HB_VERSION,
    )
    assert (r2.error_code, r2.member_epoch) == (0, 2)
    r1 = await call(broker, beat("m1", 1, {topic_id: [0, 1, 2, 3]}), HB_VERSION)
    kept = owned_of(r1)[topic_id]
    r1 = await call(broker, beat("m1", 1, {topic_id: kept}), HB_VERSION)
    assert r1.member_epoch == 2
    r2 = await call(broker, beat("m2", 2, {}, instance_id="static-2"), HB_VERSION)
    given = owned_of(r2)[topic_id]
    r2 = await call(broker, beat("m2", 2, {topic_id: given}, instance_id="static-2"), 1)
    assert (r2.error_code, r2.member_epoch) == (0, 2)
    assert sorted(kept + given) == [0, 1, 2, 3]
    return {"m1": kept, "m2": given}


async def describe(broker: Broker) -> Any:
    response = await call(broker, ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
    (group,) = response.groups
    assert group.error_code == 0
    return group


async def test_a_consumer_group_survives_a_restart(tmp_path: Path) -> None:
    """After a restart: the same ConsumerGroupDescribe (epochs, members, regex, instance
    id, assignments, assignor); m1 heartbeating with its epoch is not fenced; m2, silent,
    is expired a session timeout after the restart (not after its last heartbeat), and m1
    then gets every partition; the committed offset is there too."""
    clock = FakeClock()
    broker = disk_broker(clock, tmp_path)
    topic = broker.cluster.create_topic("t", 4)
    assert topic is not None
    topic_id = topic.topic_id
    held = await stable_group(broker, topic_id)
    assert (await call(broker, commit("m1", 2, offset=17), 9)).topics[0].partitions[
        0
    ].error_code == 0
    before = await describe(broker)
    assert (before.group_epoch, before.assignment_epoch, before.group_state) == (2, 2, "Stable")
    broker.close()

    clock.advance(60_000)  # longer than a session: only the restart time counts
    broker = disk_broker(clock, tmp_path)
    after = await describe(broker)
    assert after == before
    members = {m.member_id: m for m in after.members}
    assert members["m2"].subscribed_topic_regex == "t.*"
    assert members["m2"].instance_id == "static-2"
    assert {m: members[m].assignment.topic_partitions[0].partitions for m in held} == held

    clock.advance(SESSION_MS - 1)
    r1 = await call(broker, beat("m1", 2, {topic_id: held["m1"]}), HB_VERSION)
    assert (r1.error_code, r1.member_epoch) == (0, 2)  # not fenced, no rejoin
    assert len((await describe(broker)).members) == 2  # m2's session runs until 45 000 ms
    clock.advance(1)
    r1 = await call(broker, beat("m1", 2, {topic_id: held["m1"]}), HB_VERSION)
    assert (r1.error_code, r1.member_epoch) == (0, 3)
    assert owned_of(r1) == {topic_id: [0, 1, 2, 3]}
    r2 = await call(broker, beat("m2", 2, {topic_id: held["m2"]}, instance_id="static-2"), 1)
    assert r2.error_code == UNKNOWN_MEMBER_ID
    final = await describe(broker)
    assert [(m.member_id, m.member_epoch) for m in final.members] == [("m1", 3)]
    fetched = await call(
        broker,
        OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic("t", [0])]),
        7,
    )
    assert fetched.topics[0].partitions[0].committed_offset == 17
    broker.close()


async def test_restart_after_compaction(tmp_path: Path) -> None:
    """Compacting ``__consumer_offsets`` keeps the latest record per key: the group read
    back after a compaction and a restart is the one before, and m2 carries on."""
    clock = FakeClock()
    broker = disk_broker(clock, tmp_path)
    topic = broker.cluster.create_topic("t", 4)
    assert topic is not None
    held = await stable_group(broker, topic.topic_id)
    for _ in range(3):  # a leave and a rejoin: tombstones and superseded values
        await call(broker, beat("m3", 0, {}, subscribed_topic_names=["t"]), HB_VERSION)
        await call(broker, beat("m3", -1, None), HB_VERSION)
    before = await describe(broker)
    log = broker.cluster.get_partition(OFFSETS_TOPIC, 0).log
    records_before = log.log_end_offset
    log.roll()
    stats = log.compact(force=True)
    assert stats is not None
    broker.close()

    broker = disk_broker(clock, tmp_path)
    assert await describe(broker) == before
    kept = broker.cluster.get_partition(OFFSETS_TOPIC, 0).log
    assert kept.log_end_offset == records_before
    r2 = await call(
        broker,
        beat("m2", before.group_epoch, {topic.topic_id: held["m2"]}, instance_id="static-2"),
        1,
    )
    assert (r2.error_code, r2.member_epoch) == (0, before.group_epoch)
    broker.close()


async def test_a_memory_broker_starts_without_the_group() -> None:
    """Without a data directory nothing outlives the broker, as before."""
    clock = FakeClock()
    broker = Broker(BrokerConfig(), clock=clock)
    topic = broker.cluster.create_topic("t", 4)
    assert topic is not None
    await stable_group(broker, topic.topic_id)
    broker.close()
    broker = Broker(BrokerConfig(), clock=clock)
    response = await call(broker, ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
    assert response.groups[0].error_code == 69  # GROUP_ID_NOT_FOUND
    broker.close()
