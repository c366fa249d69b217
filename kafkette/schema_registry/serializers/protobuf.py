"""Protobuf messages framed for a schema registry (extra ``protobuf``).

The value is a generated message class's instance, encoded by Google's
protobuf runtime (the library ``protoc``'s Python output needs anyway).
The schema registered for it is its ``.proto`` file as Confluent's serializer
sends it (the serialized ``FileDescriptorProto``, base64), and each file it
imports is registered first under the file's name and referenced, except
Google's and Confluent's well-known types. Between the schema id and the
message come the message indexes (:func:`.framing.encode_indexes`): the path
to the message's type in its file.
"""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

from kafkette.errors import SerializationError
from kafkette.schema_registry.client.types import Schema, SchemaReference
from kafkette.schema_registry.serializers.framing import decode_indexes, encode_indexes
from kafkette.schema_registry.serializers.serde import (
    AsyncRegistry,
    Deserializer,
    Registry,
    Serializer,
)

WELL_KNOWN = ("google/protobuf/", "google/type/", "confluent/")
"""Imports that are not registered as references (every registry knows them)."""


def _protobuf() -> Any:
    """Google's protobuf runtime: the modules used here, by name."""
    try:
        import google.protobuf.message  # type: ignore[import-untyped]
        from google.protobuf import (
            descriptor_pb2,
            descriptor_pool,
            json_format,
            message_factory,
        )
    except ImportError:
        raise ImportError(
            "Protobuf serializers need protobuf: pip install kafkette[protobuf]"
        ) from None
    return SimpleNamespace(
        Message=google.protobuf.message.Message,
        descriptor_pb2=descriptor_pb2,
        descriptor_pool=descriptor_pool,
        json_format=json_format,
        message_factory=message_factory,
    )


def message_indexes(descriptor: Any) -> list[int]:
    """The path of a message type in its file: top-level index, then nested ones."""
    path: list[int] = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name).index(descriptor.name))
    return path[::-1]


def file_schema(file_descriptor: Any, references: tuple[SchemaReference, ...] = ()) -> Schema:
    """A ``.proto`` file's schema as registered: its descriptor, base64."""
    text = base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii")
    return Schema(text, "PROTOBUF", references)


class ProtobufSerializer(Serializer[None]):
    """Instances of ``message_type`` (a generated class) to framed bytes."""

    schema_type = "PROTOBUF"

    def __init__(
        self, registry: Registry | AsyncRegistry, message_type: type[Any], **options: Any
    ) -> None:
        protobuf = _protobuf()
        if not (isinstance(message_type, type) and issubclass(message_type, protobuf.Message)):
            raise TypeError(f"message_type must be a generated message class, not {message_type!r}")
        self.message_type = message_type
        descriptor = message_type.DESCRIPTOR
        self._index_bytes = encode_indexes(message_indexes(descriptor))
        self._name: str = descriptor.full_name
        super().__init__(registry, file_schema(descriptor.file), **options)

    def _parse(self, schema: Schema) -> None:
        return None

    def _record_name(self, value: Any) -> str | None:
        return self._name

    def _with_references(self, schema: Schema) -> Schema:
        return file_schema(
            self.message_type.DESCRIPTOR.file, self._references(self.message_type.DESCRIPTOR.file)
        )

    def _references(self, file_descriptor: Any) -> tuple[SchemaReference, ...]:
        references = []
        for dependency in file_descriptor.dependencies:
            if dependency.name.startswith(WELL_KNOWN):
                continue
            schema = file_schema(dependency, self._references(dependency))
            subject = dependency.name
            if self.auto_register_schemas:
                self._calls.register_schema(subject, schema, self.normalize_schemas)
            version = self._calls.lookup_schema(subject, schema, self.normalize_schemas).version
            references.append(SchemaReference(dependency.name, subject, version))
        return tuple(references)

    def _encode(self, parsed: None, value: Any) -> bytes:
        if not isinstance(value, self.message_type):
            raise SerializationError(
                f"the value must be a {self.message_type.__name__}, not {type(value).__name__}"
            )
        data: bytes = value.SerializeToString()
        return data

    def _indexes(self, value: Any) -> bytes:
        return self._index_bytes


class ProtobufDeserializer(Deserializer[None]):
    """Framed bytes to instances of ``message_type`` (a generated class).

    The registry is optional: the message class is the reader's schema.
    """

    schema_type = "PROTOBUF"
    _needs_writer = False

    def __init__(
        self, message_type: type[Any], registry: Registry | AsyncRegistry | None = None
    ) -> None:
        protobuf = _protobuf()
        if not (isinstance(message_type, type) and issubclass(message_type, protobuf.Message)):
            raise TypeError(f"message_type must be a generated message class, not {message_type!r}")
        super().__init__(registry)
        self.message_type = message_type

    def _decode(self, writer: None, data: memoryview) -> Any:
        _indexes, payload = decode_indexes(data)
        return self.message_type.FromString(bytes(payload))


class ProtobufDictDeserializer(Deserializer[Any]):
    """Framed bytes to dicts, with no generated class: the writer's schema from the
    registry (a serialized file descriptor, as confluent-kafka registers it, with
    its references) picked by the message indexes, as
    ``google.protobuf.json_format.MessageToDict`` gives it (field names as in
    the ``.proto``). For tools that print what they cannot know in advance
    (``kafkette consume --value-format protobuf``)."""

    schema_type = "PROTOBUF"

    def __init__(self, registry: Registry | AsyncRegistry) -> None:
        _protobuf()
        super().__init__(registry)

    def _parse(self, schema: Schema) -> Any:
        protobuf = _protobuf()
        pool = protobuf.descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(schema: Schema) -> Any:
            for reference in schema.references:
                if reference.name not in added:
                    assert self._calls is not None
                    add(self._calls.get_version(reference.subject, reference.version).schema)
            try:
                data = base64.b64decode(schema.schema_str, validate=True)
                proto = protobuf.descriptor_pb2.FileDescriptorProto.FromString(data)
            except Exception:
                raise SerializationError(
                    "the schema is .proto text: decoding it needs its generated class "
                    "(ProtobufDeserializer)"
                ) from None
            added.add(proto.name)
            _add_dependencies(protobuf, pool, proto)
            return pool.Add(proto)

        return add(schema)

    def _decode(self, writer: Any, data: memoryview) -> Any:
        protobuf = _protobuf()
        indexes, payload = decode_indexes(data)
        descriptor = writer.message_types_by_name[list(writer.message_types_by_name)[indexes[0]]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
        message_class = protobuf.message_factory.GetMessageClass(descriptor)
        message = message_class.FromString(bytes(payload))
        return protobuf.json_format.MessageToDict(message, preserving_proto_field_name=True)


def _add_dependencies(protobuf: Any, pool: Any, proto: Any) -> None:
    """Google's well-known types a file imports (never registered as references)."""
    default = protobuf.descriptor_pool.Default()
    for name in proto.dependency:
        try:
            pool.FindFileByName(name)
        except KeyError:
            try:
                known = default.FindFileByName(name)
            except KeyError:
                continue
            file = protobuf.descriptor_pb2.FileDescriptorProto()
            known.CopyToProto(file)
            _add_dependencies(protobuf, pool, file)
            pool.Add(file)
