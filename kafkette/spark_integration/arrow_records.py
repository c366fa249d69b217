"""Kafka records -> Arrow record batches with the exact schema Spark declares.

The read path is :class:`ArrowBatchBuilder`: whole record batches decoded
into column buffers by :class:`~kafkette.protocol.records.columns.ColumnsBuilder`
(no Python object per record), wrapped by :func:`columns_to_batch` without
copying them. :func:`records_to_batch` builds the same batch from consumer
records, one record at a time: the reference the columnar path is tested
against.

Spark checks the first batch a Python reader yields against the Arrow form of
the declared schema (nullability included, timestamps ``timestamp[us,
tz=UTC]``), so the Arrow schema is derived from the Spark one with pyspark's
own converter rather than written by hand.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkette.consumer import ConsumerRecord
from kafkette.consumer.fetch_buffer import timestamp_type
from kafkette.protocol.records import LegacyBatch, RecordBatch
from kafkette.protocol.records.columns import BinaryColumn, Columns, ColumnsBuilder
from kafkette.structs import TopicPartition

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
"""Spark's type of the ``headers`` column, read and written (nullability aside)."""


def kafka_schema(include_headers: bool, value_type: DataType | None = None) -> StructType:
    """Spark's Kafka source schema; with ``include_headers``, the ``headers`` column too;
    ``value_type``: the ``value`` column's when it is decoded (``valueFormat=avro``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType() if value_type is None else value_type),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@cache
def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema Spark expects for :func:`kafka_schema` (a ``pyarrow.Schema``)."""
    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


_TIMESTAMP_US = pa.timestamp("us", tz="UTC")


def records_to_batch(records: Sequence[ConsumerRecord], include_headers: bool) -> Any:
    """One ``pyarrow.RecordBatch`` of ``records`` (keys and values as bytes, no deserializers)."""
    schema = arrow_schema(include_headers)
    if not records:
        return pa.RecordBatch.from_pylist([], schema=schema)
    # one list comprehension per column: cheaper than transposing with zip(*records)
    # (which builds an iterator per record); ConsumerRecord fields by position
    columns = [
        pa.array([r[4] for r in records], pa.binary()),
        pa.array([r[5] for r in records], pa.binary()),
        pa.array([r[0] for r in records], pa.string()),
        pa.array([r[1] for r in records], pa.int32()),
        pa.array([r[2] for r in records], pa.int64()),
        pc.multiply(pa.array([r[3] for r in records], pa.int64()), 1000).view(_TIMESTAMP_US),
        pa.array([r[7] for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([r[6] for r in records], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _binary(column: BinaryColumn, length: int, arrow_type: Any) -> Any:
    validity = None if column.null_count == 0 else pa.py_buffer(column.validity)
    buffers = [validity, pa.py_buffer(column.offsets), pa.py_buffer(column.data)]
    return pa.Array.from_buffers(arrow_type, length, buffers, null_count=column.null_count)


def columns_to_batch(
    columns: Columns, timestamp_types: Any, tp: TopicPartition, include_headers: bool
) -> Any:
    """One ``pyarrow.RecordBatch`` over ``columns`` (records of ``tp``) without copying
    the keys and values; ``timestamp_types`` is a buffer of one native int32 per record
    (the batches' timestamp types)."""
    schema = arrow_schema(include_headers)
    n = columns.rows
    offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)])
    millis = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.timestamps)])
    arrays = [
        _binary(columns.keys, n, pa.binary()),
        _binary(columns.values, n, pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), n),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
        offsets,
        pc.multiply(millis, 1000).view(_TIMESTAMP_US),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(timestamp_types)]),
    ]
    if include_headers:
        headers_type = schema.field("headers").type
        names, values = columns.header_names, columns.header_values
        if columns.header_offsets is None or names is None or values is None:
            raise ValueError("the columns were decoded without headers")
        entries = len(names.offsets) // 4 - 1
        struct = pa.StructArray.from_arrays(
            [_binary(names, entries, pa.string()), _binary(values, entries, pa.binary())],
            fields=list(headers_type.value_type),
        )
        list_offsets = pa.Array.from_buffers(
            pa.int32(), n + 1, [None, pa.py_buffer(columns.header_offsets)]
        )
        arrays.append(pa.ListArray.from_arrays(list_offsets, struct, type=headers_type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ArrowBatchBuilder:
    """Records of one partition's batches, decoded into columns until :meth:`finish`
    makes them an Arrow batch."""

    def __init__(self, tp: TopicPartition, include_headers: bool) -> None:
        self.tp = tp
        self.include_headers = include_headers
        self._columns = ColumnsBuilder(with_headers=include_headers)
        self._timestamp_types = array("i")

    def __len__(self) -> int:
        """Records appended since the last :meth:`finish`."""
        return len(self._columns)

    @property
    def data_size(self) -> int:
        """Key, value and header bytes appended since the last :meth:`finish`."""
        return self._columns.data_size

    def append(self, batch: RecordBatch | LegacyBatch, first: int, end: int) -> None:
        """Append the batch's records with offsets in ``[first, end)`` (raises the
        batch's parse errors, appending nothing)."""
        taken = self._columns.append(batch, first, end)
        if taken:
            self._timestamp_types += array("i", (timestamp_type(batch),)) * taken

    def finish(self) -> Any:
        """A ``pyarrow.RecordBatch`` of the records appended so far; then empty again."""
        types, self._timestamp_types = self._timestamp_types, array("i")
        return columns_to_batch(self._columns.finish(), types, self.tp, self.include_headers)
