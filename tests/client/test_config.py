"""Client configuration: names, defaults, validation, conflicts."""

from __future__ import annotations

import pytest

from kafkette.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from kafkette.errors import ConfigError


def test_producer_defaults_are_the_java_client_4x_ones() -> None:
    config = ProducerConfig.from_user()
    assert config.acks == -1
    assert config.enable_idempotence and config.idempotent
    assert (config.linger_ms, config.batch_size) == (5, 16_384)
    assert config.delivery_timeout_ms == 120_000
    assert config.request_timeout_ms == 30_000
    assert config.max_in_flight_requests_per_connection == 5
    assert config.buffer_memory == 33_554_432 and config.max_block_ms == 60_000
    assert config.compression_type == "none" and config.retries == 2**31 - 1
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (100, 1_000)


def test_consumer_defaults() -> None:
    config = ConsumerConfig.from_user()
    assert config.auto_offset_reset == "latest" and config.enable_auto_commit
    assert (config.session_timeout_ms, config.heartbeat_interval_ms) == (45_000, 3_000)
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms, config.fetch_max_bytes) == (
        1,
        500,
        52_428_800,
    )
    assert config.max_partition_fetch_bytes == 1_048_576 and config.max_poll_records == 500
    assert config.isolation_level == "read_uncommitted" and config.check_crcs
    assert config.partition_assignment_strategy == ("range", "cooperative-sticky")


def test_both_spellings_and_kafka_strings() -> None:
    config = ProducerConfig.from_user(
        {
            "bootstrap.servers": "a:1, b:2",
            "linger.ms": "20",
            "acks": "1",
            "enable.idempotence": "false",
        },
        compression_type="LZ4",
        batch_size=1000,
    )
    assert config.bootstrap_servers == ("a:1", "b:2")
    assert (config.linger_ms, config.acks, config.batch_size) == (20, 1, 1000)
    assert config.compression_type == "lz4"
    assert not config.idempotent


def test_underscored_kafka_name_is_accepted() -> None:
    assert ConsumerConfig.from_user(group_id="g", auto_offset_reset="earliest").group_id == "g"


def test_unknown_setting_names_it_and_suggests() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user(linger_msec=5)
    assert info.value.setting == "linger_msec"
    assert "did you mean 'linger_ms'" in str(info.value)


def test_consumer_setting_is_unknown_to_the_producer() -> None:
    with pytest.raises(ConfigError, match="unknown producer setting"):
        ProducerConfig.from_user({"group.id": "g"})


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"acks": "2"}, "acks"),
        ({"linger.ms": -1}, "linger.ms"),
        ({"batch.size": "big"}, "batch.size"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"enable.idempotence": "yes"}, "enable.idempotence"),
        ({"partitioner": 5}, "partitioner"),
        ({"bootstrap.servers": ""}, "bootstrap.servers"),
        ({"linger.ms": True}, "linger.ms"),
    ],
)
def test_invalid_value_names_the_setting(settings: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user(settings)
    assert info.value.setting == name


def test_same_setting_in_both_spellings_is_an_error() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        ProducerConfig.from_user({"linger.ms": 1}, linger_ms=2)


def test_transactional_id_needs_idempotence() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user(transactional_id="tx", enable_idempotence=False)
    assert info.value.setting == "enable.idempotence"
    assert ProducerConfig.from_user(transactional_id="tx").idempotent


def test_explicit_idempotence_conflicts_with_acks_1() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user(enable_idempotence=True, acks=1)
    assert info.value.setting == "acks"


def test_default_idempotence_yields_quietly_to_acks_1() -> None:
    """As in the Java client: acks=1 alone turns the default idempotence off."""
    config = ProducerConfig.from_user(acks=1)
    assert config.enable_idempotence and not config.idempotent


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user(delivery_timeout_ms=1000)
    assert info.value.setting == "delivery.timeout.ms"


def test_heartbeat_must_be_below_session_timeout() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_user(session_timeout_ms=3000, heartbeat_interval_ms=3000)
    assert info.value.setting == "heartbeat.interval.ms"


def test_sasl_needs_a_username() -> None:
    with pytest.raises(ConfigError) as info:
        AdminConfig.from_user(security_protocol="SASL_PLAINTEXT")
    assert info.value.setting == "sasl.username"
    config = AdminConfig.from_user(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="p",
    )
    assert config.sasl_mechanism == "SCRAM-SHA-512"


def test_every_setting_has_a_kafka_name() -> None:
    for cls in (ProducerConfig, ConsumerConfig, AdminConfig):
        names = cls.kafka_names()
        assert len(names) == len(set(names.values()))
        assert all(
            "." in kafka or kafka == "acks" or kafka in ("retries", "partitioner")
            for kafka in names
        )
