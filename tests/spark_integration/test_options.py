"""The data source's option parsing: Spark's option names, meanings and error messages."""

from __future__ import annotations

import pytest

from kafkette.spark_integration.options import kafka_client_settings


def test_kafka_client_settings_strips_the_prefix_and_leaves_source_options_out() -> None:
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.isolation.level": "read_committed",
        "subscribe": "t",
        "startingoffsets": "earliest",
    }
    assert kafka_client_settings(options) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "isolation.level": "read_committed",
    }


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported."),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys"),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as"),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
        ("kafka.key.serializer", "Kafka option 'key.serializer' is not supported as keys"),
        ("kafka.value.serializer", "Kafka option 'value.serializer' is not supported as value"),
    ],
)
def test_kafka_client_settings_refuses_what_spark_refuses(key: str, message: str) -> None:
    with pytest.raises(ValueError, match="^\n?" + message.replace(".", r"\.")):
        kafka_client_settings({"kafka.bootstrap.servers": "h:1", key: "x"})
