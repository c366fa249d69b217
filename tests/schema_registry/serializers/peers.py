"""confluent-kafka's registry client as the one our serializers use, and test messages.

:class:`ConfluentRegistry` gives our serializers confluent-kafka's
``MockSchemaRegistryClient`` (converting its values to ours), so that both
sides' serializers register in one registry and frame with the same ids.
"""

from __future__ import annotations

import itertools
from typing import Any

from confluent_kafka.schema_registry import RegisteredSchema as CRegisteredSchema
from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaReference as CSchemaReference
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError as CSchemaRegistryError
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafkette.schema_registry import RegisteredSchema, Schema, SchemaReference, SchemaRegistryError


def to_confluent(schema: Schema) -> CSchema:
    references = [CSchemaReference(r.name, r.subject, r.version) for r in schema.references]
    return CSchema(schema.schema_str, schema.schema_type, references)


def from_confluent(schema: CSchema) -> Schema:
    references = [SchemaReference(r.name, r.subject, r.version) for r in schema.references or ()]
    return Schema(schema.schema_str, schema.schema_type or "AVRO", references)


def registered(value: CRegisteredSchema) -> RegisteredSchema:
    return RegisteredSchema(
        value.schema_id, from_confluent(value.schema), value.subject, value.version
    )


_registries = itertools.count()


class ConfluentRegistry:
    """Our serializers' registry calls answered by confluent-kafka's mock client."""

    def __init__(self, client: MockSchemaRegistryClient | None = None) -> None:
        # the mock keeps one registry per URL for the process: a new one each time
        url = f"mock://kafkette-tests-{next(_registries)}"
        self.client = client or MockSchemaRegistryClient({"url": url})
        self.calls: list[str] = []

    def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        self.calls.append(f"register {subject_name}")
        schema_id: int = self.client.register_schema(
            subject_name, to_confluent(schema), normalize_schemas
        )
        return schema_id

    def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        self.calls.append(f"lookup {subject_name}")
        return registered(
            self.client.lookup_schema(subject_name, to_confluent(schema), normalize_schemas)
        )

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        self.calls.append(f"latest {subject_name}")
        return registered(self.client.get_latest_version(subject_name))

    def get_version(self, subject_name: str, version: int) -> RegisteredSchema:
        self.calls.append(f"version {subject_name} {version}")
        return registered(self.client.get_version(subject_name, version))

    def get_schema(self, schema_id: int) -> Schema:
        self.calls.append(f"schema {schema_id}")
        try:
            return from_confluent(self.client.get_schema(schema_id))
        except CSchemaRegistryError as exc:
            raise SchemaRegistryError(
                exc.http_status_code, exc.error_code, exc.error_message
            ) from None


def _field(
    name: str, number: int, kind: int, label: int = 1, type_name: str | None = None
) -> descriptor_pb2.FieldDescriptorProto:
    field = descriptor_pb2.FieldDescriptorProto(name=name, number=number, type=kind, label=label)
    if type_name:
        field.type_name = type_name
    return field


F = descriptor_pb2.FieldDescriptorProto


def make_messages() -> dict[str, Any]:
    """Message classes built at run time (no protoc): a file importing another.

    ``common.proto`` (package ``kt.common``) has ``Money``; ``orders.proto``
    (package ``kt``) imports it and has ``Order`` (with a nested ``Line``, and
    a nested ``Line.Note``) and ``Refund``, so indexes [0], [1], [0, 0] and
    [0, 0, 0] all occur.
    """
    pool = descriptor_pool.DescriptorPool()
    common = descriptor_pb2.FileDescriptorProto(
        name="kt/common.proto", package="kt.common", syntax="proto3"
    )
    money = common.message_type.add(name="Money")
    money.field.extend([_field("currency", 1, F.TYPE_STRING), _field("cents", 2, F.TYPE_INT64)])
    pool.Add(common)

    orders = descriptor_pb2.FileDescriptorProto(
        name="kt/orders.proto", package="kt", syntax="proto3", dependency=["kt/common.proto"]
    )
    order = orders.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    note = line.nested_type.add(name="Note")
    note.field.append(_field("text", 1, F.TYPE_STRING))
    line.field.extend(
        [
            _field("sku", 1, F.TYPE_STRING),
            _field("quantity", 2, F.TYPE_INT32),
            _field("price", 3, F.TYPE_MESSAGE, type_name=".kt.common.Money"),
        ]
    )
    order.field.extend(
        [
            _field("id", 1, F.TYPE_INT64),
            _field("customer", 2, F.TYPE_STRING),
            _field("lines", 3, F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".kt.Order.Line"),
            _field("tags", 4, F.TYPE_STRING, label=F.LABEL_REPEATED),
            _field("paid", 5, F.TYPE_BOOL),
            _field("weight", 6, F.TYPE_DOUBLE),
            _field("signed", 7, F.TYPE_SINT64),
        ]
    )
    refund = orders.message_type.add(name="Refund")
    refund.field.extend([_field("order_id", 1, F.TYPE_INT64), _field("reason", 2, F.TYPE_STRING)])
    pool.Add(orders)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

    return {
        name.rpartition(".")[2]: cls(name)
        for name in (
            "kt.common.Money",
            "kt.Order",
            "kt.Order.Line",
            "kt.Order.Line.Note",
            "kt.Refund",
        )
    }
