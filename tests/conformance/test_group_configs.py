"""Group configs (KIP-848; config resource type 32, librdkafka test 0081 at Kafka 4.0)
against ``kafkette serve``, memory and disk: confluent-kafka's AdminClient
(``ResourceType.GROUP``, which librdkafka sends as type 32) and ours alter and describe
``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, with sources and
Kafka's refusals; a disk broker keeps them across a restart; and the coordinator acts on
them: librdkafka's member of a group whose session timeout is 3 s, killed without leaving,
is gone from the group within seconds, not the broker's 45 s."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from kafkette import AdminClient
from kafkette.admin import AlterConfigOp
from kafkette.admin import ConfigResource as OurResource
from kafkette.admin import ConfigSource as OurSource
from kafkette.admin import ResourceType as OurType
from kafkette.errors import InvalidConfigError
from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, wait_until

SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
LOW_BOUNDS = (
    "--set", "group.consumer.min.session.timeout.ms=1000",
    "--set", "group.consumer.min.heartbeat.interval.ms=100",
)  # fmt: skip
TIMEOUT_S = 30.0


@pytest.fixture(params=["memory", "disk"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    data_dir = tmp_path / "data" if request.param == "disk" else None
    broker = BrokerProcess(data_dir, args=LOW_BOUNDS)
    try:
        yield broker.start()
    finally:
        broker.close()


def confluent_alter(admin: ConfluentAdmin, group: str, entries: list[ConfigEntry]) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def confluent_describe(admin: ConfluentAdmin, group: str) -> dict[str, tuple[str, int]]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return {name: (e.value, e.source) for name, e in future.result(TIMEOUT_S).items()}


SHARE_DEFAULTS = {
    name: (value, ConfigSource.DEFAULT_CONFIG.value)
    for name, value in {
        "share.auto.offset.reset": "latest",
        "share.heartbeat.interval.ms": "5000",
        "share.isolation.level": "read_uncommitted",
        "share.record.lock.duration.ms": "30000",
        "share.session.timeout.ms": "45000",
    }.items()
}
"""A group's share.* configs at the broker's defaults: Kafka describes every group config."""


def test_confluent_kafka_alters_and_describes_group_configs(server: BrokerProcess) -> None:
    admin = ConfluentAdmin({"bootstrap.servers": server.bootstrap})
    assert confluent_describe(admin, "g") == {
        SESSION: ("45000", ConfigSource.DEFAULT_CONFIG.value),
        HEARTBEAT: ("5000", ConfigSource.DEFAULT_CONFIG.value),
        **SHARE_DEFAULTS,
    }
    confluent_alter(
        admin,
        "g",
        [
            ConfigEntry(SESSION, "3000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(HEARTBEAT, "500", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert confluent_describe(admin, "g") == {
        SESSION: ("3000", 8),
        HEARTBEAT: ("500", 8),
        **SHARE_DEFAULTS,
    }
    with pytest.raises(KafkaException) as info:
        confluent_alter(
            admin,
            "g",
            [ConfigEntry(HEARTBEAT, "3000", incremental_operation=AlterConfigOpType.SET)],
        )
    error = info.value.args[0]
    assert error.code() == 40  # INVALID_CONFIG
    assert f"{SESSION} must be greater than {HEARTBEAT}" in error.str()
    confluent_alter(
        admin, "g", [ConfigEntry(SESSION, "", incremental_operation=AlterConfigOpType.DELETE)]
    )
    assert confluent_describe(admin, "g") == {
        SESSION: ("45000", ConfigSource.DEFAULT_CONFIG.value),
        HEARTBEAT: ("500", 8),
        **SHARE_DEFAULTS,
    }


def test_our_admin_alters_and_describes_group_configs(server: BrokerProcess) -> None:
    group = OurResource(OurType.GROUP, "ours")
    with AdminClient(bootstrap_servers=server.bootstrap) as admin:
        admin.incremental_alter_configs({group: [AlterConfigOp(SESSION, "50000")]}).all()
        entries = admin.describe_configs([group], include_synonyms=True).all()[group]
        assert (entries[SESSION].value, entries[SESSION].source) == (
            "50000",
            OurSource.GROUP_CONFIG,
        )
        assert [(s.name, s.value, s.source) for s in entries[SESSION].synonyms] == [
            (SESSION, "50000", OurSource.GROUP_CONFIG)
        ]
        assert (entries[HEARTBEAT].value, entries[HEARTBEAT].source) == (
            "5000",
            OurSource.DEFAULT_CONFIG,
        )
        refused = admin.incremental_alter_configs(
            {group: [AlterConfigOp("consumer.rebalance.timeout.ms", "1")]}
        )
        with pytest.raises(InvalidConfigError) as info:
            refused.all()
        assert info.value.detail == "Unknown group config name: consumer.rebalance.timeout.ms"


def test_group_configs_survive_a_disk_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", args=LOW_BOUNDS)
    try:
        broker.start()
        admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
        confluent_alter(
            admin,
            "kept",
            [ConfigEntry(SESSION, "55000", incremental_operation=AlterConfigOpType.SET)],
        )
        broker.stop()
        broker.start()
        admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
        assert confluent_describe(admin, "kept")[SESSION] == ("55000", 8)
    finally:
        broker.close()


def test_the_coordinator_applies_a_groups_session_timeout(server: BrokerProcess) -> None:
    """A librdkafka member of a group whose session timeout is 3 s is killed: the group
    is empty a few seconds later (the broker's default would keep it 45 s)."""
    admin = ConfluentAdmin({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("t", 1, 1)]).values():
        future.result(TIMEOUT_S)
    confluent_alter(
        admin,
        "short",
        [
            ConfigEntry(SESSION, "3000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(HEARTBEAT, "500", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    member = MemberProcess("confluent", server.bootstrap, "short", "t", group_protocol="consumer")
    try:
        wait_until(lambda: member.assigned == {0}, "the member is assigned partition 0", [member])
        member.kill()
        killed = time.monotonic()

        def members() -> int:
            (future,) = admin.describe_consumer_groups(["short"]).values()
            return len(future.result(TIMEOUT_S).members)

        assert members() == 1
        while members() and time.monotonic() - killed < 20:
            time.sleep(0.2)
        gone_after = time.monotonic() - killed
        assert members() == 0
        assert 2.5 < gone_after < 10, gone_after
    finally:
        member.close()
