"""Our serializers and confluent-kafka's write the same bytes and read each other's.

Both sides share one registry (confluent-kafka's ``MockSchemaRegistryClient``,
through :class:`~tests.schema_registry.serializers.peers.ConfluentRegistry`),
so the same schema gets the same id; then the framed bytes must be equal, and
each side's deserializer must give back the value from the other's bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.common import json_schema as confluent_json
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
)
from tests.schema_registry.serializers.peers import ConfluentRegistry, make_messages

TOPIC = "orders"
VALUE = SerializationContext(TOPIC, MessageField.VALUE)
KEY = SerializationContext(TOPIC, MessageField.KEY)

ORDER_AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "customer", "type": "string"},
            {"name": "quantity", "type": "int"},
            {"name": "price", "type": "double"},
            {"name": "paid", "type": "boolean"},
            {"name": "blob", "type": "bytes"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attributes", "type": {"type": "map", "values": "long"}},
            {
                "name": "status",
                "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]},
            },
        ],
    }
)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
finite = st.floats(allow_nan=False)

avro_orders = st.fixed_dictionaries(
    {
        "id": int64,
        "customer": st.text(),
        "quantity": int32,
        "price": finite,
        "paid": st.booleans(),
        "blob": st.binary(),
        "note": st.none() | st.text(),
        "tags": st.lists(st.text(), max_size=5),
        "attributes": st.dictionaries(st.text(), int64, max_size=5),
        "status": st.sampled_from(["NEW", "PAID", "SHIPPED"]),
    }
)


@pytest.fixture
def registry() -> ConfluentRegistry:
    return ConfluentRegistry()


# -- Avro --------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(order=avro_orders)
def test_avro_bytes_equal_confluents(order: dict[str, Any]) -> None:
    """The same Avro record gives the same framed bytes, and each side reads the other's."""
    registry = ConfluentRegistry()
    theirs = CAvroSerializer(registry.client, ORDER_AVRO)(order, VALUE)
    ours = AvroSerializer(registry, ORDER_AVRO, topic=TOPIC)(order)
    assert ours == theirs
    assert ours is not None and ours[:5] == b"\x00\x00\x00\x00\x01"
    assert AvroDeserializer(registry)(theirs) == order
    assert CAvroDeserializer(registry.client)(ours, VALUE) == order


@pytest.mark.parametrize(
    ("strategy", "confluent_strategy", "subject"),
    [
        ("topic", "topic_subject_name_strategy", "orders-key"),
        ("record", "record_subject_name_strategy", "com.acme.Order"),
        ("topic_record", "topic_record_subject_name_strategy", "orders-com.acme.Order"),
    ],
)
def test_avro_subject_name_strategies_match_confluents(
    registry: ConfluentRegistry, strategy: str, confluent_strategy: str, subject: str
) -> None:
    """Each strategy registers under the subject confluent-kafka's does, keys included."""
    from confluent_kafka import schema_registry as serde

    order = {
        "id": 1,
        "customer": "ann",
        "quantity": 2,
        "price": 9.5,
        "paid": True,
        "blob": b"\x00",
        "note": None,
        "tags": [],
        "attributes": {},
        "status": "NEW",
    }
    conf = {"subject.name.strategy": getattr(serde, confluent_strategy)}
    theirs = CAvroSerializer(registry.client, ORDER_AVRO, conf=conf)(order, KEY)
    assert registry.client.get_subjects() == [subject]
    ours = AvroSerializer(
        registry, ORDER_AVRO, topic=TOPIC, is_key=True, subject_name_strategy=strategy
    )(order)
    assert ours == theirs
    assert registry.calls == [f"register {subject}"]


def test_avro_latest_version_and_lookup_match_confluents(registry: ConfluentRegistry) -> None:
    """use_latest_version frames with the latest id; lookup without registering finds it."""
    v1 = json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "int"}]})
    v2 = json.dumps(
        {
            "type": "record",
            "name": "P",
            "fields": [
                {"name": "a", "type": "int"},
                {"name": "b", "type": "string", "default": "x"},
            ],
        }
    )
    value1 = {"a": 7}
    value2 = {"a": 7, "b": "y"}
    CAvroSerializer(registry.client, v1)(value1, VALUE)
    CAvroSerializer(registry.client, v2)(value2, VALUE)
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    theirs = CAvroSerializer(registry.client, None, conf=conf)(value2, VALUE)
    ours = AvroSerializer(
        registry, None, topic=TOPIC, auto_register_schemas=False, use_latest_version=True
    )(value2)
    assert ours == theirs
    assert ours is not None and ours[1:5] == (2).to_bytes(4, "big")
    looked_up = AvroSerializer(registry, v1, topic=TOPIC, auto_register_schemas=False)
    assert looked_up(value1) == CAvroSerializer(
        registry.client, v1, conf={"auto.register.schemas": False}
    )(value1, VALUE)
    # schema resolution: a v1 reader reads v2's bytes, dropping b
    assert AvroDeserializer(registry, v1)(ours) == value1


def test_avro_primitive_schema(registry: ConfluentRegistry) -> None:
    """A primitive schema (a string key) frames like confluent-kafka's."""
    theirs = CAvroSerializer(registry.client, '"string"')("k-1", KEY)
    ours = AvroSerializer(registry, '"string"', topic=TOPIC, is_key=True)("k-1")
    assert ours == theirs == b"\x00\x00\x00\x00\x01\x06k-1"


# -- JSON Schema -------------------------------------------------------------

ORDER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "customer": {"type": "string"},
            "extra": {},
        },
        "required": ["id", "customer"],
    }
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)
json_orders = st.fixed_dictionaries(
    {"id": st.integers(), "customer": st.text()}, optional={"extra": json_values}
)


def test_confluent_writes_json_with_the_standard_library() -> None:
    """The comparison below is with confluent-kafka's stdlib encoder (orjson not installed)."""
    assert not confluent_json._HAS_ORJSON


@settings(max_examples=150, deadline=None)
@given(order=json_orders)
def test_json_bytes_equal_confluents(order: dict[str, Any]) -> None:
    """The same JSON value gives the same framed bytes, and each side reads the other's."""
    registry = ConfluentRegistry()
    theirs = CJSONSerializer(ORDER_JSON, registry.client)(order, VALUE)
    ours = JSONSerializer(registry, ORDER_JSON, topic=TOPIC)(order)
    assert ours == theirs
    assert JSONDeserializer(registry)(theirs) == order
    assert (
        CJSONDeserializer(ORDER_JSON, schema_registry_client=registry.client)(ours, VALUE) == order
    )


def test_json_non_ascii_and_record_strategy(registry: ConfluentRegistry) -> None:
    """Non-ASCII text is written as UTF-8; the record strategy uses the title."""
    from confluent_kafka import schema_registry as serde

    order = {"id": 1, "customer": "Zoë 北京", "extra": [1.5, None, {"k": "é"}]}
    conf = {"subject.name.strategy": serde.record_subject_name_strategy}
    theirs = CJSONSerializer(ORDER_JSON, registry.client, conf=conf)(order, VALUE)
    ours = JSONSerializer(registry, ORDER_JSON, subject_name_strategy="record")(order)
    assert ours == theirs
    assert ours is not None and "Zoë 北京".encode() in ours
    assert registry.client.get_subjects() == ["Order"]


# -- Protobuf ----------------------------------------------------------------

MESSAGES = make_messages()
Order, Line, Note, Money, Refund = (
    MESSAGES[name] for name in ("Order", "Line", "Note", "Money", "Refund")
)

protobuf_orders = st.builds(
    lambda id, customer, tags, paid, weight, signed, lines: Order(
        id=id,
        customer=customer,
        tags=tags,
        paid=paid,
        weight=weight,
        signed=signed,
        lines=[
            Line(sku=sku, quantity=quantity, price=Money(currency="EUR", cents=cents))
            for sku, quantity, cents in lines
        ],
    ),
    int64,
    st.text(),
    st.lists(st.text(), max_size=4),
    st.booleans(),
    finite,
    int64,
    st.lists(st.tuples(st.text(), int32, int64), max_size=3),
)


@settings(max_examples=100, deadline=None)
@given(order=protobuf_orders)
def test_protobuf_bytes_equal_confluents(order: Any) -> None:
    """The same message gives the same framed bytes (references registered alike)."""
    registry = ConfluentRegistry()
    theirs = CProtobufSerializer(Order, registry.client)(order, VALUE)
    ours = ProtobufSerializer(registry, Order, topic=TOPIC)(order)
    assert ours == theirs
    assert sorted(registry.client.get_subjects()) == ["kt/common.proto", "orders-value"]
    assert ProtobufDeserializer(Order, registry)(theirs) == order
    assert CProtobufDeserializer(Order, {"use.deprecated.format": False})(ours, VALUE) == order


@pytest.mark.parametrize(
    ("name", "indexes"),
    [
        ("Order", b"\x00"),
        ("Refund", b"\x02\x02"),
        ("Line", b"\x04\x00\x00"),
        ("Note", b"\x06\x00\x00\x00"),
    ],
)
def test_protobuf_message_indexes_equal_confluents(
    registry: ConfluentRegistry, name: str, indexes: bytes
) -> None:
    """Top-level and nested messages carry the indexes confluent-kafka writes."""
    cls = MESSAGES[name]
    value = cls()
    theirs = CProtobufSerializer(cls, registry.client)(value, VALUE)
    ours = ProtobufSerializer(registry, cls, topic=TOPIC)(value)
    assert ours == theirs
    assert ours is not None and ours[5 : 5 + len(indexes)] == indexes
    assert ProtobufDeserializer(cls)(theirs) == value


def test_avro_with_a_reference_equals_confluents(registry: ConfluentRegistry) -> None:
    """A schema naming a type registered under another subject: same bytes, read back."""
    from confluent_kafka.schema_registry import Schema as CSchema
    from confluent_kafka.schema_registry import SchemaReference as CSchemaReference

    from kafkette.schema_registry import Schema, SchemaReference

    money = json.dumps(
        {
            "type": "record",
            "name": "Money",
            "namespace": "com.acme",
            "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}],
        }
    )
    invoice = json.dumps(
        {
            "type": "record",
            "name": "Invoice",
            "namespace": "com.acme",
            "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "com.acme.Money"}],
        }
    )
    registry.client.register_schema("money", CSchema(money, "AVRO"))
    theirs_schema = CSchema(invoice, "AVRO", [CSchemaReference("com.acme.Money", "money", 1)])
    ours_schema = Schema(invoice, "AVRO", [SchemaReference("com.acme.Money", "money", 1)])
    value = {"id": 7, "total": {"cents": 1250, "currency": "EUR"}}
    theirs = CAvroSerializer(registry.client, theirs_schema)(value, VALUE)
    ours = AvroSerializer(registry, ours_schema, topic=TOPIC)(value)
    assert ours == theirs
    assert AvroDeserializer(registry)(theirs) == value
    assert CAvroDeserializer(registry.client)(ours, VALUE) == value


def test_confluents_settings_and_strategies(registry: ConfluentRegistry) -> None:
    """conf= takes confluent-kafka's names and its strategy functions, unchanged."""
    from confluent_kafka import schema_registry as confluent

    from kafkette.errors import ConfigError

    conf = {
        "subject.name.strategy": confluent.topic_record_subject_name_strategy,
        "auto.register.schemas": False,
    }
    value = {"name": "ann"}
    schema = json.dumps(
        {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    )
    CAvroSerializer(registry.client, schema, conf={**conf, "auto.register.schemas": True})(
        value, KEY
    )
    theirs = CAvroSerializer(registry.client, schema, conf=conf)(value, KEY)
    ours = AvroSerializer(registry, schema, topic=TOPIC, is_key=True, conf=conf)(value)
    assert ours == theirs
    assert registry.calls == ["lookup orders-User"]
    with pytest.raises(ConfigError) as info:
        AvroSerializer(registry, schema, conf={"auto.register": False})
    assert info.value.args[0] == "auto.register"
    with pytest.raises(ConfigError):
        AvroSerializer(registry, schema, conf={"use.latest.version": "yes"})


def test_json_with_a_reference_as_confluent(registry: ConfluentRegistry) -> None:
    """A JSON schema whose $ref names a schema registered under another subject: the same
    registration and bytes as confluent-kafka's, and values that break the referenced
    schema are refused."""
    from confluent_kafka.schema_registry import Schema as CSchema
    from confluent_kafka.schema_registry import SchemaReference as CSchemaReference

    from kafkette.errors import SerializationError
    from kafkette.schema_registry import Schema, SchemaReference

    address = json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    person = json.dumps(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}},
        }
    )
    registry.client.register_schema("address", CSchema(address, "JSON"))
    theirs_schema = CSchema(person, "JSON", [CSchemaReference("address.json", "address", 1)])
    ours_schema = Schema(person, "JSON", [SchemaReference("address.json", "address", 1)])
    value = {"name": "ann", "home": {"city": "Lyon"}}
    theirs = CJSONSerializer(theirs_schema, registry.client)(value, VALUE)
    serializer = JSONSerializer(registry, ours_schema, topic=TOPIC)
    assert serializer(value) == theirs
    assert registry.client.get_subjects() == ["address", "orders-value"]
    assert JSONDeserializer(registry)(theirs) == value
    with pytest.raises(SerializationError, match=r"\['home'\].*'city' is a required property"):
        serializer({"name": "bob", "home": {}})
