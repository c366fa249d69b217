"""The sink's columns: Spark's Kafka sink schema checked, and Arrow batches turned into records.

A DataFrame written to Kafka has a ``value`` column (string or binary, the only
required one) and optionally ``key`` (string or binary), ``headers``
(``array<struct<key:string,value:binary>>``), ``partition`` (int),
``timestamp`` (timestamp, or double seconds) and ``topic`` (string; the
``topic`` option, when set, takes its place). Other columns are ignored. The
checks and messages are those of Spark's connector (``KafkaWriter``), whose
errors are ``IllegalStateException``s: :class:`SinkSchemaError` here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from kafkette.spark_integration.arrow_records import HEADERS_TYPE


class SinkSchemaError(ValueError):
    """The DataFrame cannot be written to Kafka: a column is missing or of another type."""


class NullTopicError(ValueError):
    """A row has no topic and the ``topic`` option is not set."""


NULL_TOPIC_MESSAGE = (
    "null topic present in the data. Use the topic option for setting a default topic."
)


def _same_type(a: DataType, b: DataType) -> bool:
    """Spark's ``sameType``: equal types, nullability ignored."""
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_type(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields, strict=True)
        )
    return type(a) is type(b)


def _column(
    schema: StructType,
    name: str,
    desired: Sequence[DataType],
    *,
    required: str | None,
    any_type: bool = False,
) -> str | None:
    """The column ``name`` if present (checked against ``desired`` unless ``any_type``);
    None if absent.

    ``required``: the message when it must be present.
    """
    field = next((f for f in schema.fields if f.name == name), None)
    if field is None:
        if required is not None:
            raise SinkSchemaError(required)
        return None
    if not any_type and not any(_same_type(d, field.dataType) for d in desired):
        wanted = " or ".join(d.simpleString() for d in desired)
        raise SinkSchemaError(
            f"{name} attribute unsupported type {field.dataType.simpleString()}. "
            f"{name} must be a(n) {wanted}"
        )
    return name


@attrs.frozen
class SinkColumns:
    """Which of the sink's columns a DataFrame has; built by :meth:`check`."""

    value: str
    topic_option: str | None
    topic: str | None
    key: str | None
    headers: str | None
    partition: str | None
    timestamp: str | None

    @classmethod
    def check(
        cls, schema: StructType, topic_option: str | None, *, any_value: bool = False
    ) -> SinkColumns:
        """Check ``schema`` as Spark's Kafka sink does; raises :class:`SinkSchemaError`.

        ``any_value``: the ``value`` column may be of any type (it is encoded before it
        is sent: ``valueFormat=avro``)."""
        topic = None
        if topic_option is None:
            topic = _column(
                schema,
                "topic",
                [StringType()],
                required=(
                    "topic option required when no 'topic' attribute is present. "
                    "Use the topic option for setting a topic."
                ),
            )
        key = _column(schema, "key", [StringType(), BinaryType()], required=None)
        value = _column(
            schema,
            "value",
            [StringType(), BinaryType()],
            required="Required attribute 'value' not found",
            any_type=any_value,
        )
        assert value is not None
        headers = _column(schema, "headers", [HEADERS_TYPE], required=None)
        partition = _column(schema, "partition", [IntegerType()], required=None)
        timestamp = _column(schema, "timestamp", [DoubleType(), TimestampType()], required=None)
        return cls(value, topic_option, topic, key, headers, partition, timestamp)

    def records(
        self, batch: Any, values: list[bytes | None] | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """The records of an Arrow ``batch``: ``(topic, value, key, headers, partition,
        timestamp_ms)`` tuples, values and keys as bytes, headers as (str, bytes) pairs
        (None for absent columns and null cells); ``values``: the values already encoded."""
        n = batch.num_rows
        if n == 0:
            return iter(())
        nones: list[Any] = [None] * n
        if self.topic_option is not None:
            topics: list[Any] = [self.topic_option] * n
        else:
            assert self.topic is not None
            topics = _pylist(batch, self.topic)
            if None in topics:
                raise NullTopicError(NULL_TOPIC_MESSAGE)
        if values is None:
            values = _bytes_list(batch, self.value)
        keys = nones if self.key is None else _bytes_list(batch, self.key)
        headers = nones if self.headers is None else _headers_list(batch, self.headers)
        partitions = nones if self.partition is None else _pylist(batch, self.partition)
        timestamps = nones if self.timestamp is None else _timestamps_ms(batch, self.timestamp)
        return zip(topics, values, keys, headers, partitions, timestamps, strict=True)


def _pylist(batch: Any, name: str) -> list[Any]:
    return batch.column(batch.schema.get_field_index(name)).to_pylist()  # type: ignore[no-any-return]


def _bytes_list(batch: Any, name: str) -> list[bytes | None]:
    """A string or binary column as bytes (strings cast in Arrow, without a copy)."""
    import pyarrow as pa

    column = batch.column(batch.schema.get_field_index(name))
    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    elif pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary())
    elif pa.types.is_string_view(column.type):
        column = column.cast(pa.binary_view())
    return column.to_pylist()  # type: ignore[no-any-return]


def _headers_list(batch: Any, name: str) -> list[list[tuple[str, bytes | None]] | None]:
    return [
        None if cell is None else [(h["key"], h["value"]) for h in cell]
        for cell in _pylist(batch, name)
    ]


def _timestamps_ms(batch: Any, name: str) -> list[int | None]:
    """Milliseconds since the epoch from a timestamp column (micros) or a double one (seconds)."""
    import pyarrow as pa

    column = batch.column(batch.schema.get_field_index(name))
    if pa.types.is_timestamp(column.type):
        micros_per_unit = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}[column.type.unit]
        return [
            None if t is None else int(t * micros_per_unit) // 1000
            for t in column.cast(pa.int64()).to_pylist()
        ]
    return [None if t is None else int(t * 1_000_000) // 1000 for t in column.to_pylist()]
