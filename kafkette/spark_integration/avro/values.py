"""Registry-framed Avro values to Spark columns and back, on the executors.

:class:`ValueDecoder` turns the binary ``value`` column of a batch the reader
built into the column of the reader's schema: each value's writer schema is
fetched by its id once per task (:class:`~kafkette.schema_registry.AvroDeserializer`)
and the value resolved to the reader's schema. :class:`ValueEncoder` turns a
struct (or other) ``value`` column into Confluent's framing with the id the
driver found: no registry call on the executors. Both use fastavro, as
confluent-kafka's serializers do, so the bytes are theirs.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from kafkette.errors import SerializationError
from kafkette.schema_registry.serializers.framing import frame
from kafkette.spark_integration.arrow_records import kafka_schema
from kafkette.spark_integration.avro.options import AvroValues
from kafkette.spark_integration.avro.types import uses_uuid


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError:
        raise ImportError("valueFormat=avro needs fastavro: pip install kafkette[avro]") from None
    return fastavro


def _strings(value: Any) -> Any:
    """``value`` with fastavro's ``uuid.UUID`` objects as the strings Spark holds."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v) for v in value]
    return value


class ValueDecoder:
    """Decodes the ``value`` column of the reader's batches (one per task; close it)."""

    def __init__(self, values: AvroValues, include_headers: bool) -> None:
        from kafkette.schema_registry.client.sync_client import SchemaRegistryClient
        from kafkette.schema_registry.serializers.avro import AvroDeserializer

        self.permissive = values.request.permissive
        value_type, _ = values.schema.spark_type()
        self.arrow_schema = to_arrow_schema(
            kafka_schema(include_headers, value_type), timezone="UTC"
        )
        self._value_type = self.arrow_schema.field("value").type
        self._client = SchemaRegistryClient(values.request.registry)
        self._deserializer = AvroDeserializer(self._client, values.schema.schema)
        named = [json.loads(text) for text in values.schema.named]
        self._uuids = uses_uuid(json.loads(values.schema.schema.schema_str), named)

    def decode(self, batch: Any) -> Any:
        """``batch`` (Spark's Kafka schema) with its values decoded."""
        data = batch.column(1).to_pylist()
        decoded: list[Any] = []
        deserialize = self._deserializer
        for i, value in enumerate(data):
            try:
                decoded.append(deserialize(value))
            except SerializationError as exc:
                if self.permissive:
                    decoded.append(None)
                    continue
                topic, partition = batch.column(2)[i].as_py(), batch.column(3)[i].as_py()
                offset = batch.column(4)[i].as_py()
                raise SerializationError(
                    f"the value at offset {offset} of {topic}-{partition}: {exc} (option "
                    "mode=PERMISSIVE reads such values as null)"
                ) from exc
        if self._uuids:
            decoded = [_strings(v) for v in decoded]
        try:
            column = pa.array(decoded, type=self._value_type)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise SerializationError(
                f"a decoded value does not fit the column type {self._value_type}: {exc}"
            ) from exc
        arrays = batch.columns
        arrays[1] = column
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def close(self) -> None:
        self._client.close()


def _plain(arrow_type: Any) -> Callable[[Any], Any] | None:
    """A function making Arrow's Python values fastavro's (maps as dicts), or None
    when they already are."""
    if pa.types.is_map(arrow_type):
        item = _plain(arrow_type.item_type)
        if item is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: item(x) for k, x in v}
    if pa.types.is_struct(arrow_type):
        fields = [(f.name, _plain(f.type)) for f in arrow_type]
        if all(f is None for _, f in fields):
            return None
        return lambda v: (
            None
            if v is None
            else {name: (v[name] if f is None else f(v[name])) for name, f in fields}
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = _plain(arrow_type.value_type)
        if element is None:
            return None
        return lambda v: None if v is None else [element(x) for x in v]
    return None


class ValueEncoder:
    """Encodes a ``value`` column with the writer's schema, framed with its id."""

    def __init__(self, values: AvroValues) -> None:
        fastavro = _fastavro()
        named: dict[str, Any] = {}
        for text in values.schema.named:
            fastavro.parse_schema(json.loads(text), named_schemas=named)
        self._parsed = fastavro.parse_schema(
            json.loads(values.schema.schema.schema_str), named_schemas=named
        )
        assert values.schema.schema_id is not None
        self.schema_id = values.schema.schema_id
        self._write = fastavro.schemaless_writer

    def encode(self, column: Any) -> list[bytes | None]:
        """Each value of the Arrow ``column`` framed (null stays null)."""
        plain = _plain(column.type)
        encoded: list[bytes | None] = []
        for value in column.to_pylist():
            if value is None:
                encoded.append(None)
                continue
            if plain is not None:
                value = plain(value)
            out = io.BytesIO()
            try:
                self._write(out, self._parsed, value)
            except Exception as exc:
                raise SerializationError(
                    f"cannot encode the value {str(value)[:200]} with schema id "
                    f"{self.schema_id}: {exc}"
                ) from exc
            encoded.append(frame(self.schema_id, out.getvalue()))
        return encoded
