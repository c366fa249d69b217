"""``kafkette serve`` flags: --config, --set, bad settings, restarts, the open files limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tests.brokers import BrokerProcess


def _run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--set", "no.such.property=1"), "no.such.property"),
        (("--set", "num.partitions=zero"), "num.partitions"),
        (("--set", "log.retention.hours=soon"), "log.retention.hours"),
        (("--set", "log.segment.bytes=3"), "log.segment.bytes"),
        (("--set", "justakey"), "--set"),
        (("--listen", "nowhere"), "--listen"),
    ],
)
def test_bad_setting_is_a_clear_error_exit(args: tuple[str, ...], named: str) -> None:
    """A bad --set or --listen exits with status 2 naming it, before listening."""
    result = _run_serve("--memory", *args)
    assert result.returncode == 2
    assert f"'{named}'" in result.stderr
    assert "listening" not in result.stderr


def test_bad_property_in_config_file(tmp_path: Path) -> None:
    """An unknown property in --config, or a missing file, is a clear error exit."""
    properties = tmp_path / "server.properties"
    properties.write_text("# a comment\nnum.partitions=2\nprocess.roles=broker\n")
    result = _run_serve("--memory", "--config", str(properties))
    assert result.returncode == 2
    assert "'process.roles': unknown broker configuration" in result.stderr
    missing = _run_serve("--memory", "--config", str(tmp_path / "absent.properties"))
    assert missing.returncode == 2
    assert "absent.properties" in missing.stderr


def test_config_file_and_set_reach_the_broker(tmp_path: Path) -> None:
    """Properties from --config and --set shape the broker clients see."""
    properties = tmp_path / "server.properties"
    properties.write_text(
        "num.partitions=3\nlog.retention.hours=24\nauto.create.topics.enable = true\n"
    )
    args = ("--config", str(properties), "--set", "num.partitions=5", "--set", "node.id=7")
    with BrokerProcess(None, args=args) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics("auto", timeout=10)
        assert sorted(metadata.topics["auto"].partitions) == [0, 1, 2, 3, 4]
        assert list(metadata.brokers) == [7]
        resource = ConfigResource(ResourceType.BROKER, "7")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert (configs["num.partitions"].value, configs["num.partitions"].source) == (
            "5",
            ConfigSource.STATIC_BROKER_CONFIG.value,
        )
        assert configs["log.retention.hours"].value == "24"
        topic = ConfigResource(ResourceType.TOPIC, "auto")
        retention = admin.describe_configs([topic])[topic].result(10)["retention.ms"]
        assert retention.value == str(24 * 3_600_000)


def test_restart_reopens_topics_configs_and_data(tmp_path: Path) -> None:
    """After a restart on disk, topics, configs and records are back."""
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("kept", 2, 1, config={"cleanup.policy": "compact"})])[
            "kept"
        ].result(10)
        resource = ConfigResource(
            ResourceType.BROKER,
            "1",
            incremental_configs=[
                ConfigEntry(
                    "log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(5):
            producer.produce("kept", key=b"k%d" % i, value=b"v%d" % i, partition=1)
        assert producer.flush(10) == 0
        broker.stop()
        broker.start()

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics(timeout=10)
        assert sorted(metadata.topics["kept"].partitions) == [0, 1]
        topic = ConfigResource(ResourceType.TOPIC, "kept")
        configs = admin.describe_configs([topic])[topic].result(10)
        assert (configs["cleanup.policy"].value, configs["cleanup.policy"].source) == (
            "compact",
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        )
        assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
            "3600000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "restart-check",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition("kept", 1, 0)])
            values: list[tuple[int, bytes | None, bytes | None]] = []
            while len(values) < 5:
                message = consumer.poll(10)
                assert message is not None and message.error() is None
                values.append((message.offset(), message.key(), message.value()))
        finally:
            consumer.close()
        assert values == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]


def test_log_dirs_property_is_the_data_dir(tmp_path: Path) -> None:
    """log.dirs picks the data dir unless --memory or --data-dir is given."""
    properties = tmp_path / "server.properties"
    properties.write_text(f"log.dirs={tmp_path / 'from-properties'}\n")
    with BrokerProcess(None, args=("--config", str(properties))) as broker:
        # BrokerProcess passes --memory when it has no data dir: --memory wins
        assert "storing topics in memory" in broker.log()
    command = [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0"]
    with subprocess.Popen(
        [*command, "--config", str(properties)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = ""
            for line in process.stdout:
                if "listening on" in line:
                    break
            assert f"storing topics in {tmp_path / 'from-properties'}," in line
            assert (tmp_path / "from-properties" / "meta.properties").exists()
        finally:
            process.terminate()
            process.wait(10)


def test_open_files_limit_is_raised(memory_broker: BrokerProcess) -> None:
    """serve raises its soft open files limit to the hard limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    assert f"up to {expected} open files" in memory_broker.log()


def test_second_broker_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    """The data dir is locked: a second kafkette serve names the first one's pid and exits."""
    with BrokerProcess(tmp_path / "data") as first:
        assert first.process is not None
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafkette",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                str(tmp_path / "data"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert second.returncode == 1
        assert f"is in use by another process (pid {first.process.pid}" in second.stderr
