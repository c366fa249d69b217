"""Share groups' group configs (Kafka 4.2's ``share.*`` names on the GROUP resource):
described with their sources and types, refused with Kafka's messages outside the
broker's ``group.share.min/max.*`` bounds, acted on by the share coordinator (heartbeat
interval, session timeout, lock duration, where a new share partition starts, and
read_committed), and kept across a disk broker's restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.protocol.messages import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords
from kafkette.server import Broker
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.config.catalog import ALL_BROKER_CONFIGS
from kafkette.server.config.group_configs import parse_iso_duration_ms
from tests.server.dataplane import NOW, FakeClock, batch, call, make_broker, produce
from tests.server.share.test_share_handlers import Member, acquired, produce_values, values
from tests.server.test_group_configs import (
    DEFAULT,
    GROUP_CONFIG,
    INVALID_CONFIG,
    SET,
    describe,
    entries,
    incremental_alter,
)
from tests.server.txn import helpers as txn

pytestmark = pytest.mark.anyio

RESET, ISOLATION = "share.auto.offset.reset", "share.isolation.level"
LOCK, SESSION, HEARTBEAT = (
    "share.record.lock.duration.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
)
MIN, MAX = (
    "must be greater than or equal to group.share.min",
    "must be less than or equal to group.share.max",
)
BAD_RESET = (
    "Invalid value {0} for configuration share.auto.offset.reset: Invalid value `{0}` for "
    "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
    "of the format 'by_duration:<PnDTnHnMn.nS.>'."
)


def share_entries(result: object) -> dict[str, tuple[str | None, int]]:
    return {k: v[:2] for k, v in entries(result).items() if k.startswith("share.")}


async def test_describe_shows_share_names_with_the_brokers_values() -> None:
    broker = Broker(BrokerConfig.from_properties({"group.share.record.lock.duration.ms": "20000"}))
    assert share_entries(await describe(broker, "g")) == {
        RESET: ("latest", DEFAULT),
        HEARTBEAT: ("5000", DEFAULT),
        ISOLATION: ("read_uncommitted", DEFAULT),
        LOCK: ("20000", DEFAULT),
        SESSION: ("45000", DEFAULT),
    }
    changes = [(RESET, SET, " by_duration:PT1H "), (ISOLATION, SET, "read_committed")]
    assert await incremental_alter(broker, "g", changes) == (0, None)
    result = await describe(broker, "g")
    assert share_entries(result)[RESET] == ("by_duration:PT1H", GROUP_CONFIG)
    assert share_entries(result)[ISOLATION] == ("read_committed", GROUP_CONFIG)
    types = {c.name: c.config_type for c in result.configs}
    assert (types[RESET], types[ISOLATION], types[LOCK]) == (2, 2, 3)
    assert broker.cluster.group_configs == {
        "g": {RESET: "by_duration:PT1H", ISOLATION: "read_committed"}
    }


REFUSALS = [
    (LOCK, "999", f"Invalid value 999 for configuration {LOCK}: Value must be at least 1000"),
    (LOCK, "14999", f"{LOCK} {MIN}.record.lock.duration.ms"),
    (LOCK, "60001", f"{LOCK} {MAX}.record.lock.duration.ms"),
    (SESSION, "44999", f"{SESSION} {MIN}.session.timeout.ms"),
    (SESSION, "60001", f"{SESSION} {MAX}.session.timeout.ms"),
    (HEARTBEAT, "4999", f"{HEARTBEAT} {MIN}.heartbeat.interval.ms"),
    (HEARTBEAT, "15001", f"{HEARTBEAT} {MAX}.heartbeat.interval.ms"),
    (HEARTBEAT, "soon", f"Invalid value soon for configuration {HEARTBEAT}: Not a number of type INT"),  # noqa: E501
    (ISOLATION, "hello", f"Invalid value hello for configuration {ISOLATION}: String must be one of: read_committed, read_uncommitted"),  # noqa: E501
    (RESET, "sometimes", BAD_RESET.format("sometimes")),
    (RESET, "by_duration", BAD_RESET.format("by_duration")),
    (RESET, "by_duration:-PT1H", BAD_RESET.format("by_duration:-PT1H")),
    (RESET, "by_duration:1H", BAD_RESET.format("by_duration:1H")),
    (RESET, "by_duration:PT", BAD_RESET.format("by_duration:PT")),
    (RESET, "EARLIEST", BAD_RESET.format("EARLIEST")),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value", "message"), REFUSALS)
async def test_invalid_share_configs_are_refused_with_kafkas_messages(
    name: str, value: str, message: str
) -> None:
    broker = Broker()
    assert await incremental_alter(broker, "g", [(name, SET, value)]) == (INVALID_CONFIG, message)
    assert broker.cluster.group_configs == {}


async def test_the_share_session_timeout_must_exceed_the_heartbeat_interval() -> None:
    broker = Broker(
        BrokerConfig.from_properties(
            {
                "group.share.min.session.timeout.ms": "1000",
                "group.share.min.heartbeat.interval.ms": "100",
            }
        )
    )
    assert await incremental_alter(broker, "g", [(SESSION, SET, "4000")]) == (
        INVALID_CONFIG,
        f"{SESSION} must be greater than {HEARTBEAT}",  # against GroupConfig's default 5000
    )
    both = [(SESSION, SET, "2000"), (HEARTBEAT, SET, "500")]
    assert await incremental_alter(broker, "g", both) == (0, None)


def test_iso_durations_parse_as_javas_duration() -> None:
    assert parse_iso_duration_ms("PT1H") == 3_600_000
    assert parse_iso_duration_ms("P1DT2H3M4.5S") == 93_784_500
    assert parse_iso_duration_ms("pt0.001s") == 1
    assert parse_iso_duration_ms("-PT1M") == -60_000
    assert [parse_iso_duration_ms(t) for t in ("P", "PT", "1H", "P1H", "PT1D", "")] == [None] * 6


async def test_the_coordinator_acts_on_a_share_groups_overrides() -> None:
    """A member is told its group's heartbeat interval and leaves after its group's
    session timeout; a group's fetches announce and apply its lock duration."""
    clock = FakeClock()
    broker = make_broker(
        clock,
        group_share_min_session_timeout_ms=1000,
        group_share_min_heartbeat_interval_ms=100,
    )
    topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    assert await incremental_alter(
        broker, "fast", [(SESSION, SET, "2000"), (HEARTBEAT, SET, "300")]
    ) == (0, None)
    assert await incremental_alter(broker, "locks", [(LOCK, SET, "15000")]) == (0, None)
    fast, slow = Member(broker, topic.topic_id, group="fast"), Member(broker, topic.topic_id)
    heartbeat = await call(
        broker,
        ShareGroupHeartbeatRequest(
            group_id="fast", member_id=fast.member_id, member_epoch=0, subscribed_topic_names=["t"]
        ),
        1,
    )
    assert (heartbeat.error_code, heartbeat.heartbeat_interval_ms) == (0, 300)
    await slow.join()
    clock.advance(2_000)
    broker.share_groups.tick()
    assert broker.share_groups.groups["fast"].members == {}
    assert set(broker.share_groups.groups["g"].members) == {slow.member_id}

    member = Member(broker, topic.topic_id, group="locks")
    await member.join()
    await member.fetch()
    await slow.fetch()
    await produce_values(broker, b"x")
    first = await member.fetch()
    assert (first.acquisition_lock_timeout_ms, acquired(first)) == (
        15_000,
        [AcquiredRecords(0, 0, 1)],
    )
    assert (await slow.fetch()).acquisition_lock_timeout_ms == 30_000
    clock.advance(14_999)
    broker.share_groups.tick()
    assert acquired(await member.fetch()) == []
    clock.advance(1)
    broker.share_groups.tick()
    assert acquired(await member.fetch()) == [AcquiredRecords(0, 0, 2)]


async def test_auto_offset_reset_earliest_and_by_duration() -> None:
    """earliest starts a new share partition at the log's start; by_duration at the first
    record no older than the duration (the log's end when every record is older)."""
    clock = FakeClock()
    broker = make_broker(clock)
    topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    for age_ms, value in [(7_200_000, b"2h"), (1_800_000, b"30m"), (60_000, b"1m")]:
        answer = await produce(broker, "t", 0, batch([(None, value)], timestamp=NOW - age_ms))
        assert answer.error_code == 0
    starts = {"early": "earliest", "hour": "by_duration:PT1H", "second": "by_duration:PT1S"}
    got = {}
    for group, reset in starts.items():
        assert await incremental_alter(broker, group, [(RESET, SET, reset)]) == (0, None)
        member = Member(broker, topic.topic_id, group=group)
        await member.join()
        got[group] = values(await member.fetch())
    assert got == {"early": [b"2h", b"30m", b"1m"], "hour": [b"30m", b"1m"], "second": []}


async def test_read_committed_stops_at_the_lso_and_archives_aborted_records() -> None:
    """A read_committed share group gets nothing of an open transaction, the committed
    records once it commits, never an aborted transaction's; the start offset moves past
    the archived ones. A read_uncommitted group gets them all."""
    broker = make_broker(FakeClock())
    topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    await incremental_alter(broker, "rc", [(ISOLATION, SET, "read_committed")])
    committed, uncommitted = (
        Member(broker, topic.topic_id, group="rc"),
        Member(broker, topic.topic_id, group="ru"),
    )
    for member in (committed, uncommitted):
        await member.join()
        await member.fetch()
    init = await txn.init(broker, "tx")
    pid, epoch = init.producer_id, init.producer_epoch
    await txn.add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    assert (await txn.send(broker, "t", 0, pid, epoch, 0, [b"gone1", b"gone2"])).error_code == 0
    await produce_values(broker, b"plain")  # offset 2, behind the open transaction
    assert acquired(await committed.fetch()) == []
    assert await txn.end(broker, "tx", pid, epoch, False) == 0  # abort marker at 3
    await txn.add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    assert (await txn.send(broker, "t", 0, pid, epoch, 2, [b"kept"])).error_code == 0
    assert await txn.end(broker, "tx", pid, epoch, True) == 0  # commit marker at 5
    got = await committed.fetch()
    assert values(got) == [b"plain", b"kept"]
    assert acquired(got) == [AcquiredRecords(2, 2, 1), AcquiredRecords(4, 4, 1)]
    await committed.acknowledge([(2, 2, 1), (4, 4, 1)])
    (share,) = [p for k, p in broker.share_groups.partitions.items() if k.group_id == "rc"]
    assert share.start_offset == 6 and share.records() == {}
    assert values(await uncommitted.fetch()) == [b"gone1", b"gone2", b"plain", b"kept"]


async def test_share_configs_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    broker = Broker(config)
    changes = [(RESET, SET, "earliest"), (LOCK, SET, "45000")]
    assert await incremental_alter(broker, "g", changes) == (0, None)
    broker.close()
    reopened = Broker(config)
    try:
        assert share_entries(await describe(reopened, "g"))[RESET] == ("earliest", GROUP_CONFIG)
        assert reopened.share_groups.lock_duration_ms("g") == 45_000
    finally:
        reopened.close()


def test_the_brokers_share_settings_are_kafkas_and_reach_the_coordinator() -> None:
    names = [
        "group.share.partition.max.record.locks",
        "group.share.delivery.count.limit",
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
        "group.share.max.size",
    ]
    defaults = [ALL_BROKER_CONFIGS[n].default for n in names]
    assert defaults == ["2000", "5", "30000", "15000", "60000"] + ["45000"] * 2 + ["60000"] + [
        "5000",
        "5000",
        "15000",
        "200",
    ]
    assert all(ALL_BROKER_CONFIGS[n].implemented for n in names)
    broker = Broker(
        BrokerConfig.from_properties(
            {"group.share.partition.max.record.locks": "150", "group.share.max.size": "20"}
        )
    )
    config = broker.share_groups.config
    assert (config.partition_max_record_locks, config.max_size) == (150, 20)
