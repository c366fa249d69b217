"""Serializers and deserializers of registry-framed Avro, JSON Schema and Protobuf.

Each format's library is an extra (``avro``: fastavro, ``json``: jsonschema,
``protobuf``: protobuf), imported when a serializer of that format is made.
"""

from kafkette.schema_registry.serializers.avro import AvroDeserializer, AvroSerializer
from kafkette.schema_registry.serializers.json_schema import JSONDeserializer, JSONSerializer
from kafkette.schema_registry.serializers.protobuf import (
    ProtobufDeserializer,
    ProtobufDictDeserializer,
    ProtobufSerializer,
)
from kafkette.schema_registry.serializers.serde import (
    Deserializer,
    Registry,
    Serializer,
    SubjectNameStrategy,
    record_subject_name,
    topic_record_subject_name,
    topic_subject_name,
)

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "Deserializer",
    "JSONDeserializer",
    "JSONSerializer",
    "ProtobufDeserializer",
    "ProtobufDictDeserializer",
    "ProtobufSerializer",
    "Registry",
    "Serializer",
    "SubjectNameStrategy",
    "record_subject_name",
    "topic_record_subject_name",
    "topic_subject_name",
]
