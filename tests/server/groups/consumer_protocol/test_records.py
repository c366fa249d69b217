"""Consumer groups kept as Kafka's records: what the coordinator writes when (exact keys,
values and order, tombstones), Kafka's bytes for a value, and groups rebuilt from the
records equal to the live ones, with their timers restarted from the load time; a
hypothesis test that this holds after any sequence of heartbeats, leaves, timeouts and
topic changes (classic and mixed groups too), also across restarts."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, rule

from kafkette.errors import FencedMemberEpochError, UnknownMemberIdError, UnknownServerError
from kafkette.protocol.messages import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kafkette.protocol.messages import consumer_group_current_member_assignment_value as current
from kafkette.protocol.messages import consumer_group_partition_metadata_value as topics_msg
from kafkette.protocol.messages import consumer_group_target_assignment_member_value as target
from kafkette.server.groups.consumer_protocol import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    MemberState,
    records,
)
from kafkette.server.groups.consumer_protocol import partitions as ps
from kafkette.server.groups.consumer_protocol.member import ClassicMember, Member
from kafkette.server.groups.consumer_protocol.records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    Change,
    RecordKey,
    RecordValue,
)
from tests.server.groups.consumer_protocol.harness import Client, Cluster, topic_id
from tests.server.groups.consumer_protocol.test_mixed_state_machine import MixedMachine
from tests.server.groups.consumer_protocol.test_state_machine import GroupMachine

A = topic_id("a")


class RecordLog:
    """A ``record_sink`` that keeps what it is given as bytes, like the offsets topic."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[tuple[bytes, bytes | None]]]] = []

    def __call__(self, group_id: str, changes: list[Change]) -> None:
        self.batches.append(
            (
                group_id,
                [
                    (records.encode_key(k), None if v is None else records.encode_value(v))
                    for k, v in changes
                ],
            )
        )

    def latest(self) -> dict[RecordKey, RecordValue]:
        """The latest value per key, read back from the bytes (what compaction keeps)."""
        values: dict[RecordKey, RecordValue] = {}
        for _, batch in self.batches:
            for raw_key, raw_value in batch:
                key = records.decode_key(int.from_bytes(raw_key[:2], "big"), raw_key, 2)
                if raw_value is None:
                    values.pop(key, None)
                else:
                    values[key] = records.decode_value(key, raw_value)
        return values

    def last(self) -> list[tuple[RecordKey, RecordValue | None]]:
        """The last batch, decoded."""
        _, batch = self.batches[-1]
        out: list[tuple[RecordKey, RecordValue | None]] = []
        for raw_key, raw_value in batch:
            key = records.decode_key(int.from_bytes(raw_key[:2], "big"), raw_key, 2)
            out.append((key, None if raw_value is None else records.decode_value(key, raw_value)))
        return out


def persisted(cluster: Cluster) -> RecordLog:
    log = RecordLog()
    cluster.coordinator.record_sink = log
    return log


def snapshot(group: ConsumerGroup) -> dict[str, Any]:
    """What a group's records must give back (not its timers)."""
    return {
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": dict(group.members),
        "target": {m: ps.make(a.items()) for m, a in group.target.items()},
        "partition_epochs": dict(group.partition_epochs),
        "static_members": dict(group.static_members),
        "subscription_metadata": dict(group.subscription_metadata),
    }


def snapshots(groups: dict[str, ConsumerGroup]) -> dict[str, dict[str, Any]]:
    return {group_id: snapshot(group) for group_id, group in groups.items()}


def restarted(cluster: Cluster, log: RecordLog) -> ConsumerGroupCoordinator:
    """A new coordinator over the same topics, restored from the log at the cluster's time."""
    fresh = ConsumerGroupCoordinator(
        cluster.coordinator.config, lambda: cluster.topics, id_factory=cluster._ids()
    )
    fresh.restore(log.latest(), cluster.now)
    fresh.record_sink = log
    return fresh


# ---- what is written when


def test_join_writes_kafkas_records_in_kafkas_order() -> None:
    """A first member joining: its metadata, the subscribed topics, the group epoch, its
    target, the assignment epoch and its current assignment, in one batch."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    Client(cluster, "m1", rebalance_timeout_ms=5_000).join()
    assert log.batches[0][0] == "g"
    assert log.last() == [
        (
            RecordKey(MEMBER_METADATA, "g", "m1"),
            ConsumerGroupMemberMetadataValue(
                instance_id=None,
                rack_id=None,
                client_id="",
                client_host="",
                subscribed_topic_names=["a"],
                subscribed_topic_regex=None,
                rebalance_timeout_ms=5_000,
                server_assignor=None,
                classic_member_metadata=None,
            ),
        ),
        (
            RecordKey(PARTITION_METADATA, "g"),
            ConsumerGroupPartitionMetadataValue(
                topics=[topics_msg.TopicMetadata(topic_id=A, topic_name="a", num_partitions=2)]
            ),
        ),
        (RecordKey(GROUP_METADATA, "g"), ConsumerGroupMetadataValue(epoch=1)),
        (
            RecordKey(TARGET_MEMBER, "g", "m1"),
            ConsumerGroupTargetAssignmentMemberValue(
                topic_partitions=[target.TopicPartition(topic_id=A, partitions=[0, 1])]
            ),
        ),
        (
            RecordKey(TARGET_METADATA, "g"),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=1),
        ),
        (
            RecordKey(CURRENT_ASSIGNMENT, "g", "m1"),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=1,
                previous_member_epoch=0,
                state=0,
                assigned_partitions=[current.TopicPartitions(topic_id=A, partitions=[0, 1])],
                partitions_pending_revocation=[],
            ),
        ),
    ]
    assert len(log.batches) == 1


def test_an_unchanged_heartbeat_writes_nothing() -> None:
    """A heartbeat that changes nothing but the session timer appends no record."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    client = Client(cluster, "m1")
    client.join()
    client.heartbeat()
    assert len(log.batches) == 1


def test_second_member_and_revocation() -> None:
    """A second member: its metadata, the new epoch, both targets; the first member's
    move to UNREVOKED_PARTITIONS with a partition pending revocation."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    m1, m2 = Client(cluster, "m1"), Client(cluster, "m2")
    m1.join()
    m2.join()
    assert [key for key, _ in log.last()] == [
        RecordKey(MEMBER_METADATA, "g", "m2"),
        RecordKey(GROUP_METADATA, "g"),
        RecordKey(TARGET_MEMBER, "g", "m1"),
        RecordKey(TARGET_MEMBER, "g", "m2"),
        RecordKey(TARGET_METADATA, "g"),
        RecordKey(CURRENT_ASSIGNMENT, "g", "m2"),
    ]
    m1.revokes = False
    m1.heartbeat()
    (key, value), *_ = log.last()
    assert key == RecordKey(CURRENT_ASSIGNMENT, "g", "m1")
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    assert (value.member_epoch, value.previous_member_epoch, value.state) == (1, 1, 1)
    assert len(value.assigned_partitions) == 1
    assert len(value.partitions_pending_revocation) == 1


def test_leave_writes_tombstones_then_the_new_epoch() -> None:
    """A member leaving: tombstones for its current assignment, target and metadata, then
    the group epoch; the new target is computed at the next heartbeat."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    m1, m2 = Client(cluster, "m1"), Client(cluster, "m2")
    m1.join()
    m2.join()
    m2.leave()
    assert log.last() == [
        (RecordKey(CURRENT_ASSIGNMENT, "g", "m2"), None),
        (RecordKey(TARGET_MEMBER, "g", "m2"), None),
        (RecordKey(MEMBER_METADATA, "g", "m2"), None),
        (RecordKey(GROUP_METADATA, "g"), ConsumerGroupMetadataValue(epoch=3)),
    ]


def test_session_expiry_and_group_deletion_write_tombstones() -> None:
    """A member removed by its session timer is tombstoned; DeleteGroups of the Empty group
    tombstones the group's own records; nothing is left in the log."""
    cluster = Cluster({"a": 2}, session_timeout_ms=10_000)
    log = persisted(cluster)
    Client(cluster, "m1").join()
    cluster.advance(10_000)
    assert [value for _, value in log.last()][:3] == [None, None, None]
    cluster.coordinator.delete_group("g")
    assert log.last() == [
        (RecordKey(TARGET_METADATA, "g"), None),
        (RecordKey(PARTITION_METADATA, "g"), None),
        (RecordKey(GROUP_METADATA, "g"), None),
    ]
    assert log.latest() == {}


def test_group_tombstones_in_kafkas_order() -> None:
    """A group going with two members (here: downgraded away, as a deleted group would):
    current assignments, targets, the assignment epoch, member metadata, partition
    metadata, group epoch, as ConsumerGroup.createGroupTombstoneRecords orders them."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    Client(cluster, "m1").join()
    Client(cluster, "m2").join()
    del cluster.coordinator.groups["g"]
    cluster.coordinator.persist("g")
    assert log.last() == [
        (RecordKey(CURRENT_ASSIGNMENT, "g", "m1"), None),
        (RecordKey(CURRENT_ASSIGNMENT, "g", "m2"), None),
        (RecordKey(TARGET_MEMBER, "g", "m1"), None),
        (RecordKey(TARGET_MEMBER, "g", "m2"), None),
        (RecordKey(TARGET_METADATA, "g"), None),
        (RecordKey(MEMBER_METADATA, "g", "m1"), None),
        (RecordKey(MEMBER_METADATA, "g", "m2"), None),
        (RecordKey(PARTITION_METADATA, "g"), None),
        (RecordKey(GROUP_METADATA, "g"), None),
    ]


def test_refused_heartbeat_writes_nothing() -> None:
    """A heartbeat refused (fenced epoch) leaves the log as it was."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    client = Client(cluster, "m1")
    client.join()
    client.epoch = 7
    with pytest.raises(FencedMemberEpochError):
        client.heartbeat()
    assert len(log.batches) == 1


# ---- Kafka's bytes


def test_current_assignment_value_bytes() -> None:
    """ConsumerGroupCurrentMemberAssignmentValue v0 as Kafka's flexible encoding lays it
    out: int16 version, int32 epochs, int8 state, compact arrays of (uuid, compact int32
    array), empty tagged fields."""
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=5,
        previous_member_epoch=4,
        state=1,
        assigned_partitions=[current.TopicPartitions(topic_id=A, partitions=[0, 2])],
        partitions_pending_revocation=[current.TopicPartitions(topic_id=A, partitions=[1])],
    )
    expected = (
        bytes.fromhex("0000 00000005 00000004 01")
        + b"\x02"
        + A.bytes
        + bytes.fromhex("03 00000000 00000002 00")
        + b"\x02"
        + A.bytes
        + bytes.fromhex("02 00000001 00")
        + b"\x00"
    )
    assert records.encode_value(value) == expected
    key = RecordKey(CURRENT_ASSIGNMENT, "g", "m")
    assert records.decode_value(key, expected) == value


def test_member_metadata_value_bytes() -> None:
    """ConsumerGroupMemberMetadataValue v0: nullable compact strings (0 = null), the
    subscribed names, the rebalance timeout; a consumer-protocol member's
    ClassicMemberMetadata (tag 0, default null) left out, as Kafka leaves it."""
    value = ConsumerGroupMemberMetadataValue(
        instance_id="i",
        rack_id=None,
        client_id="c",
        client_host="/h",
        subscribed_topic_names=["a"],
        subscribed_topic_regex=None,
        rebalance_timeout_ms=300,
        server_assignor="range",
        classic_member_metadata=None,
    )
    expected = (
        bytes.fromhex("0000")
        + b"\x02i\x00\x02c\x03/h\x02\x02a\x00"
        + (300).to_bytes(4, "big")
        + b"\x06range"
        + b"\x00"
    )
    assert records.encode_value(value) == expected
    assert records.decode_value(RecordKey(MEMBER_METADATA, "g", "m"), expected) == value


def test_member_metadata_without_the_tag_is_a_consumer_protocol_member() -> None:
    """The value as Kafka writes it for a consumer-protocol member (no tagged field at
    all) rebuilds a member without classic metadata."""
    raw = bytes.fromhex("0000") + b"\x00\x00\x02c\x03/h\x02\x02a\x00" + bytes(4) + b"\x00\x00"
    key = RecordKey(MEMBER_METADATA, "g", "m")
    groups = records.rebuild({key: records.decode_value(key, raw)}, Cluster().coordinator.config, 0)
    assert groups["g"].members["m"].classic is None
    assert groups["g"].members["m"].subscribed_topic_names == ("a",)


# ---- rebuilt from the records


def test_rebuilt_group_equals_the_live_one_and_timers_restart() -> None:
    """Two members mid-revocation and a static member: the coordinator restored from the
    records holds the same group; sessions restart at the load time, and a revocation
    timer for the member that still has partitions to give up."""
    cluster = Cluster({"a": 4, "b": 2}, session_timeout_ms=10_000)
    log = persisted(cluster)
    m1 = Client(cluster, "m1", topics=("a", "b"), rebalance_timeout_ms=7_000)
    m2 = Client(cluster, "m2", topics=("a",), instance_id="static", assignor="range")
    m1.join()
    m1.heartbeat()
    cluster.now = 3_000
    m2.join()
    m1.revokes = False
    m1.heartbeat()
    live = cluster.coordinator.groups["g"]
    assert live.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    cluster.now = 50_000
    fresh = restarted(cluster, log)
    assert snapshots(fresh.groups) == snapshots(cluster.coordinator.groups)
    group = fresh.groups["g"]
    assert group.session_deadlines == {"m1": 60_000, "m2": 60_000}
    assert group.revocation_deadlines == {"m1": (live.members["m1"].member_epoch, 57_000)}
    assert group.static_member("static") is group.members["m2"]


def test_classic_member_metadata_round_trips() -> None:
    """A member using the classic protocol keeps its session timeout and protocols; on
    load its session restarts with group.consumer.session.timeout.ms, as Kafka's
    onLoaded schedules every member's."""
    group = ConsumerGroup("g")
    member = Member(
        member_id="c1",
        client_id="cid",
        subscribed_topic_names=("a",),
        member_epoch=3,
        previous_member_epoch=3,
        assigned={A: frozenset({0})},
        classic=ClassicMember(session_timeout_ms=6_000, protocols=(("range", b"\x00\x01"),)),
    )
    group.put(member)
    group.group_epoch = group.assignment_epoch = 3
    group.target["c1"] = {A: frozenset({0})}
    cluster = Cluster({"a": 1})
    rebuilt = records.rebuild(records.group_records(group), cluster.coordinator.config, 100)
    assert snapshot(rebuilt["g"]) == snapshot(group)
    assert rebuilt["g"].members["c1"].classic == ClassicMember(
        session_timeout_ms=6_000, protocols=(("range", b"\x00\x01"),)
    )
    assert rebuilt["g"].session_deadlines == {"c1": 45_100}


def test_a_restored_member_continues_and_a_silent_one_expires() -> None:
    """After a restart a member heartbeating with its epoch carries on without being
    fenced; one that stays silent is removed when its session runs out from the load
    time, and the other gets its partitions."""
    cluster = Cluster({"a": 2}, session_timeout_ms=10_000)
    log = persisted(cluster)
    m1, m2 = Client(cluster, "m1"), Client(cluster, "m2")
    m1.join()
    m2.join()
    for _ in range(3):
        m1.heartbeat()
        m2.heartbeat()
    epoch = m1.epoch
    cluster.now = 100_000
    cluster.coordinator = restarted(cluster, log)
    cluster.advance(9_000)
    assert m1.heartbeat().member_epoch == epoch
    cluster.advance(1_000)  # m2's session (from the load at 100 000) is over
    assert sorted(cluster.coordinator.groups["g"].members) == ["m1"]
    m1.heartbeat()
    m1.heartbeat()
    assert m1.holds() == {"a": [0, 1]}
    with pytest.raises(UnknownMemberIdError):
        m2.heartbeat()
    assert snapshots(restarted(cluster, log).groups) == snapshots(cluster.coordinator.groups)


def test_records_of_a_partition_held_twice_are_not_loaded() -> None:
    """Contradicting records (one partition in two members' current assignments) leave
    that group out rather than stop the broker."""
    group = ConsumerGroup("g")
    group.put(Member(member_id="m1", member_epoch=1, assigned={A: frozenset({0})}))
    written = records.group_records(group)
    written[RecordKey(MEMBER_METADATA, "g", "m2")] = written[RecordKey(MEMBER_METADATA, "g", "m1")]
    written[RecordKey(CURRENT_ASSIGNMENT, "g", "m2")] = written[
        RecordKey(CURRENT_ASSIGNMENT, "g", "m1")
    ]
    ok = ConsumerGroup("h")
    written.update(records.group_records(ok))
    rebuilt = records.rebuild(written, Cluster().coordinator.config, 0)
    assert list(rebuilt) == ["h"]


def test_unknown_member_state_is_kept_as_unknown() -> None:
    """A state code from a newer broker is read as UNKNOWN (Kafka's MemberState.UNKNOWN)."""
    group = ConsumerGroup("g")
    group.put(Member(member_id="m1", member_epoch=1))
    written = records.group_records(group)
    value = written[RecordKey(CURRENT_ASSIGNMENT, "g", "m1")]
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    value.state = 42
    rebuilt = records.rebuild(written, Cluster().coordinator.config, 0)
    assert rebuilt["g"].members["m1"].state is MemberState.UNKNOWN


# ---- property: rebuilt == live, whatever happened


class PersistedGroupMachine(GroupMachine):
    """The consumer group state machine with its records written and, now and then, the
    coordinator replaced by one restored from them (a broker restart)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = persisted(self.cluster)

    @rule()
    def broker_restarts(self) -> None:
        self.cluster.coordinator = restarted(self.cluster, self.log)

    @invariant()
    def records_give_back_the_live_groups(self) -> None:
        rebuilt = records.rebuild(self.log.latest(), self.cluster.coordinator.config, 0)
        assert snapshots(rebuilt) == snapshots(self.cluster.coordinator.groups)


PersistedGroupMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_persisted_group = PersistedGroupMachine.TestCase


class PersistedMixedMachine(MixedMachine):
    """Classic and consumer members on one id, upgraded and downgraded: the consumer group
    records always give back the consumer groups (none once downgraded)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = RecordLog()
        self.mixed.consumer.record_sink = self.log

    @invariant()
    def records_give_back_the_live_groups(self) -> None:
        rebuilt = records.rebuild(self.log.latest(), self.mixed.consumer.config, 0)
        assert snapshots(rebuilt) == snapshots(self.mixed.consumer.groups)


PersistedMixedMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_persisted_mixed_group = PersistedMixedMachine.TestCase


def test_each_kind_has_its_value_type() -> None:
    """Every record of a group with a member decodes to the value type of its key."""
    group = ConsumerGroup("g")
    group.put(Member(member_id="m", member_epoch=1, assigned={uuid.UUID(int=1): frozenset({0})}))
    group.target["m"] = {uuid.UUID(int=1): frozenset({0})}
    for key, value in records.group_records(group).items():
        assert type(records.decode_value(key, records.encode_value(value))) is type(value)


def test_a_refused_write_is_logged_and_written_with_the_next_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sink refusing a batch (a Kafka error) does not fail the heartbeat; the records
    are written with the group's next change, after which the log gives back the group."""
    cluster = Cluster({"a": 2})
    log = persisted(cluster)
    refuse = [True]

    def sink(group_id: str, changes: list[Change]) -> None:
        if refuse[0]:
            raise UnknownServerError("too large")
        log(group_id, changes)

    cluster.coordinator.record_sink = sink
    m1 = Client(cluster, "m1")
    with caplog.at_level(logging.ERROR, logger="kafkette.server.groups.consumer"):
        assert m1.join().member_epoch == 1
    assert log.batches == []
    assert caplog.messages == [
        "group g: 6 record(s) not written to __consumer_offsets, retried with its next "
        "change: UNKNOWN_SERVER_ERROR (-1): The server experienced an unexpected error when "
        "processing the request. (too large)"
    ]
    refuse[0] = False
    Client(cluster, "m2").join()
    rebuilt = records.rebuild(log.latest(), cluster.coordinator.config, 0)
    assert snapshots(rebuilt) == snapshots(cluster.coordinator.groups)
