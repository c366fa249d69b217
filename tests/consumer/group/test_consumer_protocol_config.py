"""group.protocol=consumer and group.remote.assignor in the consumer's settings."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette.client.config import ConsumerConfig
from kafkette.errors import ConfigError


def config(**settings: Any) -> ConsumerConfig:
    return ConsumerConfig.from_user({"bootstrap.servers": "memory://unused", **settings})


def test_classic_stays_the_default() -> None:
    made = config(**{"group.id": "g"})
    assert (made.group_protocol, made.group_remote_assignor) == ("classic", None)


def test_consumer_protocol_with_a_remote_assignor() -> None:
    made = config(
        **{"group.id": "g", "group.protocol": "CONSUMER", "group.remote.assignor": "range"}
    )
    assert (made.group_protocol, made.group_remote_assignor) == ("consumer", "range")


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        (
            "session.timeout.ms",
            10_000,
            "is not supported for group.protocol=consumer: it is defined broker side "
            "(group.consumer.session.timeout.ms)",
        ),
        (
            "heartbeat.interval.ms",
            1_000,
            "is not supported for group.protocol=consumer: it is defined broker side "
            "(group.consumer.heartbeat.interval.ms)",
        ),
        (
            "partition.assignment.strategy",
            "range",
            "is not supported for group.protocol=consumer: use group.remote.assignor instead",
        ),
    ],
)
def test_classic_settings_refused_under_consumer_protocol(
    setting: str, value: Any, message: str
) -> None:
    """As librdkafka: the settings the broker owns under KIP-848 are refused, named."""
    with pytest.raises(ConfigError) as info:
        config(**{"group.id": "g", "group.protocol": "consumer", setting: value})
    assert (info.value.setting, info.value.reason) == (setting, message)


def test_remote_assignor_refused_under_classic() -> None:
    """As Java's ConsumerConfig: group.remote.assignor is for the consumer protocol only."""
    with pytest.raises(ConfigError) as info:
        config(**{"group.id": "g", "group.remote.assignor": "uniform"})
    assert info.value.setting == "group.remote.assignor"


def test_unknown_group_protocol_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        config(**{"group.protocol": "share"})
    assert info.value.setting == "group.protocol"
