"""Kafka records -> Arrow record batches with the exact schema Spark declares.

Spark checks the first batch a Python reader yields against the Arrow form of
the declared schema (nullability included, timestamps ``timestamp[us,
tz=UTC]``), so the Arrow schema is derived from the Spark one with pyspark's
own converter rather than written by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkette.consumer import ConsumerRecord

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema; with ``include_headers``, the ``headers`` column too."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
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
