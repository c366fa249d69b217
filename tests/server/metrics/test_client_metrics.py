"""KIP-714's subscriptions and client instances, as Kafka's ClientMetricsManager decides,
with the time passed in."""

from __future__ import annotations

import uuid

import pytest

from kafkette.errors import (
    InvalidConfigError,
    InvalidRequestError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from kafkette.server.metrics.client_metrics import (
    INTERVAL_MS_DEFAULT,
    TELEMETRY_MAX_BYTES,
    ClientMetricsManager,
    parse_subscription,
)

CLIENT = {"client_id": "billing-1", "client_source_address": "10.0.0.7", "client_source_port": "5"}
ZERO = uuid.UUID(int=0)
ZSTD = 4


@pytest.mark.parametrize(
    ("name", "configs", "error", "message"),
    [
        ("", {}, InvalidRequestError, "Subscription name can't be empty"),
        ("s", {"metric": "a"}, InvalidRequestError, "Unknown client metrics configuration: metric"),
        ("s", {"interval.ms": "99"}, InvalidRequestError, "interval must be between 100 and"),
        ("s", {"interval.ms": "3600001"}, InvalidRequestError, "interval must be between"),
        ("s", {"interval.ms": "soon"}, InvalidConfigError, "Not a number of type INT"),
        ("s", {"match": "client_name=x"}, InvalidConfigError, "Illegal client matching pattern"),
        ("s", {"match": "client_id"}, InvalidConfigError, "Illegal client matching pattern"),
        ("s", {"match": "client_id=("}, InvalidConfigError, "Illegal client matching pattern"),
    ],
)
def test_invalid_subscriptions_are_refused_as_kafka_does(
    name: str, configs: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        parse_subscription(name, configs)


def test_a_client_gets_the_union_of_what_it_matches_and_the_shortest_interval() -> None:
    manager = ClientMetricsManager()
    manager.update("producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"})
    manager.update(
        "billing",
        {
            "metrics": "org.apache.kafka.consumer.fetch",
            "interval.ms": "2000",
            "match": "client_id=bill.*",
        },
    )
    manager.update("others", {"metrics": "x.", "match": "client_id=other"})
    got = manager.get_subscriptions(ZERO, CLIENT, 1_000)
    assert got.instance_id != ZERO
    assert got.metrics == ("org.apache.kafka.consumer.fetch", "org.apache.kafka.producer.")
    assert got.interval_ms == 2000
    other = manager.get_subscriptions(ZERO, {**CLIENT, "client_id": "other"}, 1_000)
    assert (other.metrics, other.interval_ms) == (("org.apache.kafka.producer.", "x."), 5000)
    assert other.subscription_id != got.subscription_id
    manager.update("star", {"metrics": "*"})
    again = manager.get_subscriptions(got.instance_id, CLIENT, 1_000)  # changed: not throttled
    assert again.metrics == ("*",) and again.interval_ms == 2000
    assert again.subscription_id != got.subscription_id
    none = ClientMetricsManager().get_subscriptions(ZERO, CLIENT, 0)
    assert (none.metrics, none.interval_ms) == ((), INTERVAL_MS_DEFAULT)


def test_asking_and_pushing_follow_the_interval() -> None:
    manager = ClientMetricsManager()
    manager.update("all", {"metrics": "*", "interval.ms": "1000"})
    got = manager.get_subscriptions(ZERO, CLIENT, 0)
    instance, sub = got.instance_id, got.subscription_id
    with pytest.raises(ThrottlingQuotaExceededError):
        manager.get_subscriptions(instance, CLIENT, 999)
    manager.push(instance, CLIENT, sub, False, ZSTD, 10, 10)  # first push after asking
    with pytest.raises(ThrottlingQuotaExceededError):
        manager.push(instance, CLIENT, sub, False, ZSTD, 10, 1009)
    manager.push(instance, CLIENT, sub, False, ZSTD, 10, 1010)
    with pytest.raises(UnknownSubscriptionIdError):
        manager.push(instance, CLIENT, sub + 1, False, ZSTD, 10, 2010)
    # After UNKNOWN_SUBSCRIPTION_ID the client may ask again at once (its pushes still wait).
    assert manager.get_subscriptions(instance, CLIENT, 2011).subscription_id == sub
    with pytest.raises(ThrottlingQuotaExceededError):
        manager.push(instance, CLIENT, sub, False, ZSTD, 10, 2012)
    with pytest.raises(UnsupportedCompressionTypeError):
        manager.push(instance, CLIENT, sub, False, 5, 10, 3010)
    with pytest.raises(TelemetryTooLargeError):
        manager.push(instance, CLIENT, sub, False, ZSTD, TELEMETRY_MAX_BYTES + 1, 4010)
    manager.push(instance, CLIENT, sub, True, ZSTD, 10, 4011)  # terminating: within interval
    with pytest.raises(InvalidRequestError, match="terminating"):
        manager.push(instance, CLIENT, sub, False, ZSTD, 10, 9000)
    with pytest.raises(InvalidRequestError, match="invalid client instance id"):
        manager.push(ZERO, CLIENT, sub, False, ZSTD, 10, 9000)


def test_a_changed_subscription_is_an_unknown_id_for_the_old_one_then_asked_again() -> None:
    manager = ClientMetricsManager()
    manager.update("a", {"metrics": "a.", "interval.ms": "1000"})
    got = manager.get_subscriptions(ZERO, CLIENT, 0)
    manager.push(got.instance_id, CLIENT, got.subscription_id, False, ZSTD, 1, 1)
    manager.update("a", {"metrics": "b.", "interval.ms": "1000"})
    with pytest.raises(UnknownSubscriptionIdError):
        manager.push(got.instance_id, CLIENT, got.subscription_id, False, ZSTD, 1, 2)
    new = manager.get_subscriptions(got.instance_id, CLIENT, 3)
    assert new.metrics == ("b.",) and new.subscription_id != got.subscription_id
    with pytest.raises(ThrottlingQuotaExceededError):  # Kafka: not before the interval
        manager.push(got.instance_id, CLIENT, new.subscription_id, False, ZSTD, 1, 4)
    manager.push(got.instance_id, CLIENT, new.subscription_id, False, ZSTD, 1, 1002)
    manager.update("a", {})  # deleted: no metrics any more
    assert manager.configs("a") == {}
    assert manager.get_subscriptions(got.instance_id, CLIENT, 1003).metrics == ()


def test_an_instance_not_heard_from_is_forgotten() -> None:
    manager = ClientMetricsManager()
    manager.update("a", {"metrics": "*", "interval.ms": "30000"})
    got = manager.get_subscriptions(ZERO, CLIENT, 0)
    assert manager.expire(89_999) == []
    assert manager.expire(90_000) == [got.instance_id]  # three intervals (at least a minute)
    assert manager.instances == {}


def test_instances_are_bounded_as_kafka_caches_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the cache's size the instance heard from least recently is forgotten."""
    monkeypatch.setattr("kafkette.server.metrics.client_metrics.MAX_INSTANCES", 3)
    manager = ClientMetricsManager()
    ids = [manager.get_subscriptions(ZERO, CLIENT, t).instance_id for t in range(3)]
    manager.get_subscriptions(ids[0], CLIENT, 400_000)  # heard from again
    newest = manager.get_subscriptions(ZERO, CLIENT, 400_001).instance_id
    assert set(manager.instances) == {ids[0], ids[2], newest}
    assert manager.forgotten == [ids[1]]
