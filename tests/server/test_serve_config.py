"""BrokerConfig.from_properties and ``kafkette serve`` argument handling, in process."""

from __future__ import annotations

import argparse
import resource
from pathlib import Path

import pytest

from kafkette.cli.serve import add_arguments, build_config, raise_open_files_limit
from kafkette.errors import ConfigError
from kafkette.server import BrokerConfig
from kafkette.server.config.catalog import BROKER_CONFIGS


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_are_kafkas_except_the_rebalance_delay() -> None:
    """Kafka's defaults, but group.initial.rebalance.delay.ms is 0."""
    config = BrokerConfig()
    assert (config.num_partitions, config.socket_request_max_bytes) == (1, 104_857_600)
    assert config.connections_max_idle_ms == 600_000
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.log.retention_ms == 168 * 3_600_000
    assert BROKER_CONFIGS["group.initial.rebalance.delay.ms"].default == "0"


def test_finer_spelling_wins_whatever_the_order() -> None:
    """*.ms beats *.minutes beats *.hours, as in Kafka."""
    hours_last = BrokerConfig.from_properties(
        {"log.retention.ms": "1000", "log.retention.hours": "2"}
    )
    assert hours_last.log.retention_ms == 1000
    minutes = BrokerConfig.from_properties(
        {"log.retention.hours": "2", "log.retention.minutes": "3"}
    )
    assert minutes.log.retention_ms == 180_000
    roll = BrokerConfig.from_properties({"log.roll.hours": "1"})
    assert roll.log.segment_ms == 3_600_000
    flush = BrokerConfig.from_properties({"log.flush.scheduler.interval.ms": "500"})
    assert flush.log.flush_ms == 500


def test_aliases_and_overrides() -> None:
    """broker.id is node.id, log.dirs the data dir; layers keep earlier overrides."""
    config = BrokerConfig.from_properties(
        {"broker.id": "3", "log.dirs": "/var/a,/var/b", "message.max.bytes": "2048"}
    )
    assert (config.node_id, config.data_dir, config.log.max_message_bytes) == (3, "/var/a", 2048)
    assert config.overrides == {
        "node.id": "3",
        "log.dirs": "/var/a,/var/b",
        "message.max.bytes": "2048",
    }
    layered = BrokerConfig.from_properties({"num.partitions": "4"}, base=config)
    assert (layered.num_partitions, layered.node_id, layered.log.max_message_bytes) == (4, 3, 2048)


@pytest.mark.parametrize(
    ("properties", "setting"),
    [
        ({"listeners": "PLAINTEXT://:9092"}, "listeners"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"delete.topic.enable": "maybe"}, "delete.topic.enable"),
        ({"log.retention.minutes": "1.5"}, "log.retention.minutes"),
        ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
        ({"compression.zstd.level": "99"}, "compression.zstd.level"),
        ({"log.dirs": " "}, "log.dirs"),
    ],
)
def test_bad_properties_name_the_setting(properties: dict[str, str], setting: str) -> None:
    """Unknown names and invalid values raise ConfigError naming the property."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties(properties)
    assert info.value.setting == setting


def test_build_config_layers_file_set_and_flags(tmp_path: Path) -> None:
    """--set beats the file; --data-dir/--memory beat log.dirs."""
    properties = tmp_path / "server.properties"
    properties.write_text("! comment\nnum.partitions: 2\nlog.dirs=/from/file\nnode.id=5\n")
    args = parse(
        "--config",
        str(properties),
        "--set",
        "num.partitions=6",
        "--listen",
        "0.0.0.0:19092",
        "--advertised-listener",
        "broker.example:29092",
    )
    config = build_config(args)
    assert (config.num_partitions, config.node_id, config.data_dir) == (6, 5, "/from/file")
    assert (config.host, config.port, config.advertised) == (
        "0.0.0.0",
        19092,
        ("broker.example", 29092),
    )
    assert build_config(parse("--config", str(properties), "--memory")).data_dir is None
    assert build_config(parse("--config", str(properties), "--data-dir", "/d")).data_dir == "/d"


def test_bad_properties_file_line(tmp_path: Path) -> None:
    """A line that is not key=value names the file and line."""
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\njust words\n")
    with pytest.raises(ConfigError) as info:
        build_config(parse("--config", str(properties)))
    assert info.value.setting == f"{properties}:2"


def test_open_files_limit_raised_to_hard() -> None:
    """The soft open files limit is raised to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lowered = min(soft, 256) if soft != resource.RLIM_INFINITY else 256
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        expected = hard if hard != resource.RLIM_INFINITY else max(lowered, 1 << 20)
        assert raise_open_files_limit() == expected
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == expected
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
