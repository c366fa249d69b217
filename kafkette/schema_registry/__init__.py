"""Schemas: a Confluent-compatible registry client and Avro, JSON Schema and Protobuf serializers.

The client (``kafkette.schema_registry.client``) speaks Confluent's REST API v1
to any registry (Confluent's, Karapace, Redpanda's, ``kafkette serve
--schema-registry``); the serializers (``kafkette.schema_registry.serializers``)
write and read Confluent's framing, so records are interchangeable with
confluent-kafka's. The registry server is ``kafkette.schema_registry.server``.
"""

from kafkette.schema_registry.client import (
    AsyncSchemaRegistryClient,
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkette.schema_registry.serializers import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufDictDeserializer,
    ProtobufSerializer,
    record_subject_name,
    topic_record_subject_name,
    topic_subject_name,
)

__all__ = [
    "AsyncSchemaRegistryClient",
    "AvroDeserializer",
    "AvroSerializer",
    "JSONDeserializer",
    "JSONSerializer",
    "ProtobufDeserializer",
    "ProtobufDictDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "record_subject_name",
    "topic_record_subject_name",
    "topic_subject_name",
]
