"""The checks made on a ConsumerGroupHeartbeat before any group is touched, and the
settings: each bad field gets Kafka's error class, and nothing is created."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette.errors import (
    ApiError,
    ConfigError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    UnsupportedAssignorError,
)
from kafkette.server.groups.consumer_protocol import ConsumerGroupConfig, HeartbeatRequest
from tests.server.groups.consumer_protocol.harness import Cluster

JOIN: dict[str, Any] = {
    "group_id": "g",
    "member_id": "m1",
    "member_epoch": 0,
    "rebalance_timeout_ms": 30_000,
    "subscribed_topic_names": ("a",),
    "owned": {},
}


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"group_id": ""}, InvalidRequestError, "GroupId can't be empty."),
        ({"instance_id": ""}, InvalidRequestError, "InstanceId can't be empty."),
        ({"rack_id": ""}, InvalidRequestError, "RackId can't be empty."),
        ({"member_id": ""}, InvalidRequestError, "MemberId can't be empty."),
        ({"member_epoch": -3}, InvalidRequestError, "MemberEpoch -3 is invalid."),
        (
            {"rebalance_timeout_ms": -1},
            InvalidRequestError,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            {"rebalance_timeout_ms": -7},
            InvalidRequestError,
            "RebalanceTimeoutMs must be -1 or a time in ms, got -7.",
        ),
        ({"owned": None}, InvalidRequestError, "TopicPartitions must be empty when (re-)joining."),
        (
            {"owned": {Cluster({"a": 1}).topics["a"].topic_id: frozenset({0})}},
            InvalidRequestError,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"subscribed_topic_names": None},
            InvalidRequestError,
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
            "(re-)joining.",
        ),
        (
            {"server_assignor": "sticky"},
            UnsupportedAssignorError,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
        (
            {"subscribed_topic_regex": "orders-("},
            InvalidRegularExpressionError,
            "SubscribedTopicRegex `orders-(` is not a valid regular expression: missing closing ).",
        ),
        ({"member_epoch": -2}, InvalidRequestError, "InstanceId can't be null."),
    ],
)
def test_bad_join_is_refused_with_kafkas_error(
    changes: dict[str, Any], error: type[ApiError], message: str
) -> None:
    """Each bad field: its error class and message, and no group created."""
    cluster = Cluster({"a": 1})
    with pytest.raises(error) as info:
        cluster.coordinator.heartbeat(0, HeartbeatRequest(**{**JOIN, **changes}))
    assert type(info.value) is error
    assert info.value.detail == message
    assert cluster.coordinator.groups == {}


def test_v0_leave_without_member_id_is_refused() -> None:
    """Version 0 lets the coordinator name members, but a leave must say who leaves."""
    cluster = Cluster({"a": 1})
    request = HeartbeatRequest(group_id="g", member_epoch=-1, api_version=0)
    with pytest.raises(InvalidRequestError, match="MemberId can't be empty"):
        cluster.coordinator.heartbeat(0, request)


def test_full_request_rule() -> None:
    """Kafka's full request: epoch 0, or rebalance timeout, a subscription and owned partitions."""
    partial = HeartbeatRequest(group_id="g", member_id="m", member_epoch=3, owned={})
    assert not partial.is_full
    assert HeartbeatRequest(**JOIN).is_full
    full = HeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=3,
        rebalance_timeout_ms=1,
        subscribed_topic_regex="x",
        owned={},
    )
    assert full.is_full
    assert not HeartbeatRequest(**{**JOIN, "member_epoch": 3, "owned": None}).is_full


def test_config_defaults_are_kafkas() -> None:
    """group.consumer.* defaults."""
    config = ConsumerGroupConfig()
    assert config.session_timeout_ms == 45_000
    assert config.heartbeat_interval_ms == 5_000
    assert config.max_size == 2**31 - 1
    assert config.assignors == ("uniform", "range")


def test_config_from_properties_takes_names_and_java_class_names() -> None:
    config = ConsumerGroupConfig.from_properties(
        {
            "group.consumer.session.timeout.ms": "30000",
            "group.consumer.heartbeat.interval.ms": "3000",
            "group.consumer.max.size": "10",
            "group.consumer.assignors": "range, "
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
            "log.dirs": "/ignored",
        }
    )
    assert config == ConsumerGroupConfig(
        session_timeout_ms=30_000,
        heartbeat_interval_ms=3_000,
        max_size=10,
        assignors=("range", "uniform"),
    )


def test_config_from_properties_without_group_consumer_settings_is_the_default() -> None:
    assert ConsumerGroupConfig.from_properties({"log.dirs": "/ignored"}) == ConsumerGroupConfig()


@pytest.mark.parametrize(
    ("properties", "setting"),
    [
        ({"group.consumer.session.timeout.ms": "soon"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.session.timeout.ms": "0"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "45000"}, "group.consumer.heartbeat.interval.ms"),
        ({"group.consumer.max.size": "0"}, "group.consumer.max.size"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
        ({"group.consumer.assignors": ""}, "group.consumer.assignors"),
        ({"group.consumer.assignors": "range,range"}, "group.consumer.assignors"),
    ],
)
def test_bad_settings_are_named(properties: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerGroupConfig.from_properties(properties)
    assert info.value.setting == setting
