"""Avro values framed for a schema registry, encoded by fastavro (extra ``avro``).

fastavro is the Avro library confluent-kafka's own serializers use: the same
binary encoding of the same value (its schemaless writer and reader), and
Avro's schema resolution when the reader's schema differs from the writer's.
It is imported when a serializer is made, never when kafkette loads.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

from kafkette.schema_registry.client.types import Schema
from kafkette.schema_registry.serializers.serde import (
    AsyncRegistry,
    Deserializer,
    Registry,
    Serializer,
)

if TYPE_CHECKING:
    from types import ModuleType

# A parsed schema as fastavro returns it (a dict, a list for a union, a str)
Parsed = Any


def _fastavro() -> ModuleType:
    try:
        import fastavro
    except ImportError:
        raise ImportError("Avro serializers need fastavro: pip install kafkette[avro]") from None
    return fastavro


def parse_schema(schema: Schema, registry: Registry | None = None) -> Parsed:
    """``schema`` parsed by fastavro, with the named types it references from ``registry``."""
    fastavro = _fastavro()
    named: dict[str, Any] = {}
    _add_references(schema, registry, named, fastavro)
    return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)


def _add_references(
    schema: Schema, registry: Registry | None, named: dict[str, Any], fastavro: ModuleType
) -> None:
    for reference in schema.references:
        if registry is None:
            raise ValueError(f"the schema references {reference.name!r}: it needs a registry")
        referenced = registry.get_version(reference.subject, reference.version).schema
        _add_references(referenced, registry, named, fastavro)
        fastavro.parse_schema(json.loads(referenced.schema_str), named_schemas=named)


def declaration(schema_str: str) -> str:
    """The text registered for ``schema_str``: a bare primitive (``"string"``) is
    declared as ``{"type":"string"}``, as confluent-kafka registers it (the same
    text gets the same id from registries that compare texts)."""
    schema_str = schema_str.strip()
    if schema_str[:1] not in ("{", "["):
        schema_str = '{"type":' + schema_str + "}"
    return schema_str


def record_name(parsed: Parsed, schema_str: str) -> str | None:
    """The full name of a named schema; a primitive's type; None for a union."""
    if isinstance(parsed, dict):
        name = parsed.get("name")
        if name is None:
            name = json.loads(schema_str).get("type")
        return None if name is None else str(name)
    if isinstance(parsed, str):
        return parsed
    return None


class AvroSerializer(Serializer[Parsed]):
    """Avro values (dicts for records) to framed bytes.

    ``schema`` is the writer's schema, as JSON text or a :class:`Schema`.
    """

    schema_type = "AVRO"

    def __init__(
        self, registry: Registry | AsyncRegistry, schema: str | Schema | None, **options: Any
    ) -> None:
        if isinstance(schema, str):
            schema = Schema(declaration(schema), "AVRO")
        super().__init__(registry, schema, **options)
        self._name = (
            record_name(self._parsed, schema.schema_str)
            if schema is not None and self._parsed is not None
            else None
        )

    def _parse(self, schema: Schema) -> Parsed:
        return parse_schema(schema, self._calls)

    def _record_name(self, value: Any) -> str | None:
        return self._name

    def _encode(self, parsed: Parsed, value: Any) -> bytes:
        out = io.BytesIO()
        _fastavro().schemaless_writer(out, parsed, value)
        return out.getvalue()


class AvroDeserializer(Deserializer[Parsed]):
    """Framed bytes to Avro values, read with the writer's schema from the registry.

    ``reader_schema`` (JSON text or a :class:`Schema`) resolves each value to
    the reader's schema by Avro's rules; ``return_record_name`` gives union
    branches that are records as ``(name, value)`` as fastavro does.
    """

    schema_type = "AVRO"

    def __init__(
        self,
        registry: Registry | AsyncRegistry,
        reader_schema: str | Schema | None = None,
        *,
        return_record_name: bool = False,
    ) -> None:
        super().__init__(registry)
        if isinstance(reader_schema, str):
            reader_schema = Schema(reader_schema, "AVRO")
        self._reader = parse_schema(reader_schema, self._calls) if reader_schema else None
        self.return_record_name = return_record_name

    def _parse(self, schema: Schema) -> Parsed:
        return parse_schema(schema, self._calls)

    def _decode(self, writer: Parsed | None, data: memoryview) -> Any:
        return _fastavro().schemaless_reader(
            io.BytesIO(data), writer, self._reader, self.return_record_name
        )
