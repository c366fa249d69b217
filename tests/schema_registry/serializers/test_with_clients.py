"""Registry serializers as the producer's and consumer's serializers, and their errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkette import Consumer, Producer
from kafkette.errors import SerializationError
from kafkette.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
)
from kafkette.testing import MemoryCluster
from tests.schema_registry.serializers.peers import ConfluentRegistry, make_messages

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)


def consume_all(cluster: MemoryCluster, count: int, **deserializers: Any) -> list[Any]:
    with Consumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="g",
        auto_offset_reset="earliest",
        **deserializers,
    ) as consumer:
        consumer.subscribe(["users"])
        records: list[Any] = []
        for _ in range(50):
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
            if len(records) >= count:
                break
        return records


def test_avro_key_and_value_through_producer_and_consumer() -> None:
    """Avro keys and values go through memory:// and come back as the dicts sent."""
    registry = ConfluentRegistry()
    users = [{"name": "ann", "age": 31}, {"name": "bob", "age": 47}]
    with MemoryCluster() as cluster:
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            key_serializer=AvroSerializer(registry, '"string"', topic="users", is_key=True),
            value_serializer=AvroSerializer(registry, USER, topic="users"),
        ) as producer:
            for user in users:
                producer.send("users", user, key=user["name"])
        records = consume_all(
            cluster,
            2,
            key_deserializer=AvroDeserializer(registry),
            value_deserializer=AvroDeserializer(registry),
        )
    assert [(r.key, r.value) for r in records] == [(u["name"], u) for u in users]
    assert sorted(registry.client.get_subjects()) == ["users-key", "users-value"]
    # one registration per subject, one schema fetch per id: the rest is cached
    assert sorted(registry.calls) == [
        "register users-key",
        "register users-value",
        "schema 1",
        "schema 2",
    ]


def test_json_and_protobuf_values_through_producer_and_consumer() -> None:
    """JSON and Protobuf values round-trip through the clients too."""
    registry = ConfluentRegistry()
    order_class = make_messages()["Order"]
    order = order_class(id=5, customer="ann", tags=["a"])
    with MemoryCluster() as cluster:
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            key_serializer=JSONSerializer(
                registry, '{"type": "object"}', topic="users", is_key=True
            ),
            value_serializer=ProtobufSerializer(registry, order_class, topic="users"),
        ) as producer:
            producer.send("users", order, key={"id": 5})
        [record] = consume_all(
            cluster,
            1,
            key_deserializer=JSONDeserializer(registry),
            value_deserializer=ProtobufDeserializer(order_class),
        )
    assert record.key == {"id": 5}
    assert record.value == order


def test_a_value_that_does_not_fit_is_a_serialization_error() -> None:
    """A value that its schema refuses fails send with SerializationError, nothing framed."""
    registry = ConfluentRegistry()
    with pytest.raises(SerializationError, match="cannot encode the value as AVRO"):
        AvroSerializer(registry, USER, topic="users")({"name": "ann"})
    with pytest.raises(SerializationError, match=r"does not match its schema.*'age'"):
        JSONSerializer(registry, '{"type": "object", "required": ["age"]}', topic="users")(
            {"name": "ann"}
        )
    with pytest.raises(SerializationError, match="must be a Order, not dict"):
        ProtobufSerializer(registry, make_messages()["Order"], topic="users")({"id": 1})


def test_an_unknown_schema_id_is_a_serialization_error() -> None:
    """Bytes naming an id the registry lacks fail with the registry's error inside."""
    registry = ConfluentRegistry()
    with pytest.raises(SerializationError, match="schema id 42"):
        AvroDeserializer(registry)(b"\x00\x00\x00\x00\x2a\x02")


def test_a_topic_strategy_without_a_topic_says_so() -> None:
    """The default (topic) strategy needs topic=...: the error says so."""
    serializer = AvroSerializer(ConfluentRegistry(), USER)
    with pytest.raises(SerializationError, match="needs a topic"):
        serializer({"name": "ann", "age": 1})
    assert serializer.serialize({"name": "ann", "age": 1}, "users") is not None


def test_conflicting_options_are_refused() -> None:
    """use_latest_version with auto registration, or no schema at all, are refused."""
    with pytest.raises(ValueError, match="auto_register_schemas=False"):
        AvroSerializer(ConfluentRegistry(), USER, use_latest_version=True)
    with pytest.raises(ValueError, match="needs a schema"):
        AvroSerializer(ConfluentRegistry(), None)
    with pytest.raises(ValueError, match="unknown subject name strategy"):
        AvroSerializer(ConfluentRegistry(), USER, subject_name_strategy="nope")
