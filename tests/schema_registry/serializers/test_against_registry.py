"""Our serializers with our client and confluent-kafka's with its client, on one served registry.

The registry is kafkette's (its HTTP shell on a free loopback port): each side
registers through its own client, gets the same ids, writes the same bytes and
reads the other's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as CSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkette.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufDictDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
)
from tests.schema_registry.serializers.peers import make_messages
from tests.schema_registry.server.servers import registry_server

VALUE = SerializationContext("orders", MessageField.VALUE)
V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)


@pytest.fixture
def clients() -> Iterator[tuple[SchemaRegistryClient, CSchemaRegistryClient]]:
    with (
        registry_server() as url,
        SchemaRegistryClient(url) as ours,
        CSchemaRegistryClient({"url": url}) as theirs,
    ):
        yield ours, theirs


def test_avro_evolution(clients: tuple[SchemaRegistryClient, CSchemaRegistryClient]) -> None:
    """v1 by confluent-kafka, v2 by us: each side's bytes equal, v1 readers read v2 records."""
    ours, theirs = clients
    c1 = CAvroSerializer(theirs, V1)({"id": 1}, VALUE)
    o1 = AvroSerializer(ours, V1, topic="orders")({"id": 1})
    assert o1 == c1 == b"\x00\x00\x00\x00\x01\x02"
    o2 = AvroSerializer(ours, V2, topic="orders")({"id": 2, "note": "hi"})
    c2 = CAvroSerializer(theirs, V2)({"id": 2, "note": "hi"}, VALUE)
    assert o2 == c2 and o2 is not None and o2[:5] == b"\x00\x00\x00\x00\x02"
    assert CAvroDeserializer(theirs)(o2, VALUE) == {"id": 2, "note": "hi"}
    assert AvroDeserializer(ours, V1)(c2) == {"id": 2}
    assert CAvroDeserializer(theirs, V1)(o2, VALUE) == {"id": 2}


def test_json_and_protobuf(clients: tuple[SchemaRegistryClient, CSchemaRegistryClient]) -> None:
    """JSON Schema and Protobuf (with an imported file) frame alike through both clients."""
    ours, theirs = clients
    schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    value = {"id": 5, "tags": ["é"]}
    c = CJSONSerializer(schema, theirs)(value, VALUE)
    o = JSONSerializer(ours, schema, topic="orders")(value)
    assert o == c
    assert JSONDeserializer(ours)(c) == CJSONDeserializer(schema)(o, VALUE) == value

    order_class = make_messages()["Order"]
    order = order_class(id=3, customer="ann", tags=["x"])
    proto_topic = SerializationContext("proto", MessageField.VALUE)
    c = CProtobufSerializer(order_class, theirs)(order, proto_topic)
    o = ProtobufSerializer(ours, order_class, topic="proto")(order)
    assert o == c
    assert ProtobufDeserializer(order_class)(c) == order
    assert sorted(ours.get_subjects()) == ["kt/common.proto", "orders-value", "proto-value"]


def test_protobuf_without_the_class(
    clients: tuple[SchemaRegistryClient, CSchemaRegistryClient],
) -> None:
    """ProtobufDictDeserializer reads confluent-kafka's messages, nested and imported types
    included, from the registry's schema alone."""
    ours, theirs = clients
    messages = make_messages()
    Order, Line, Money, Note = (messages[n] for n in ("Order", "Line", "Money", "Note"))
    order = Order(
        id=3,
        customer="ann",
        lines=[Line(sku="a", quantity=2, price=Money(currency="EUR", cents=5))],
    )
    context = SerializationContext("proto", MessageField.VALUE)
    reader = ProtobufDictDeserializer(ours)
    assert reader(CProtobufSerializer(Order, theirs)(order, context)) == {
        "id": "3",
        "customer": "ann",
        "lines": [{"sku": "a", "quantity": 2, "price": {"currency": "EUR", "cents": "5"}}],
    }
    note = SerializationContext("notes", MessageField.VALUE)
    assert reader(CProtobufSerializer(Note, theirs)(Note(text="x"), note)) == {"text": "x"}
