"""The sink's columns and options, checked and converted without a Spark session."""

from __future__ import annotations

import datetime
import pickle
import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkette.spark_integration.sink_columns import (
    HEADERS_TYPE,
    NullTopicError,
    SinkColumns,
    SinkSchemaError,
)
from kafkette.spark_integration.writer import KafketteBatchWriter, WriteOptions


def schema(**columns: object) -> StructType:
    return StructType([StructField(name, t) for name, t in columns.items()])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("columns", "topic", "message"),
    [
        (
            {"value": StringType()},
            None,
            "topic option required when no 'topic' attribute is present. "
            "Use the topic option for setting a topic.",
        ),
        ({"key": StringType()}, "t", "Required attribute 'value' not found"),
        (
            {"value": IntegerType()},
            "t",
            "value attribute unsupported type int. value must be a(n) string or binary",
        ),
        (
            {"value": StringType(), "key": LongType()},
            "t",
            "key attribute unsupported type bigint. key must be a(n) string or binary",
        ),
        (
            {"value": StringType(), "topic": BinaryType()},
            None,
            "topic attribute unsupported type binary. topic must be a(n) string",
        ),
        (
            {"value": StringType(), "partition": LongType()},
            "t",
            "partition attribute unsupported type bigint. partition must be a(n) int",
        ),
        (
            {"value": StringType(), "headers": ArrayType(StringType())},
            "t",
            "headers attribute unsupported type array<string>. "
            "headers must be a(n) array<struct<key:string,value:binary>>",
        ),
        (
            {"value": StringType(), "timestamp": StringType()},
            "t",
            "timestamp attribute unsupported type string. "
            "timestamp must be a(n) double or timestamp",
        ),
    ],
)
def test_wrong_columns_get_sparks_messages(
    columns: dict[str, object], topic: str | None, message: str
) -> None:
    with pytest.raises(SinkSchemaError) as info:
        SinkColumns.check(schema(**columns), topic)
    assert str(info.value) == message


def test_the_topic_option_makes_a_topic_column_of_any_type_irrelevant() -> None:
    columns = SinkColumns.check(schema(value=BinaryType(), topic=IntegerType()), "t")
    batch = pa.record_batch({"value": [b"v"], "topic": [7]})
    assert list(columns.records(batch)) == [("t", b"v", None, None, None, None)]


def test_headers_nullability_does_not_matter() -> None:
    nullable = ArrayType(
        StructType(
            [StructField("key", StringType(), False), StructField("value", BinaryType(), True)]
        ),
        containsNull=False,
    )
    assert SinkColumns.check(schema(value=StringType(), headers=nullable), "t").headers == (
        "headers"
    )
    assert HEADERS_TYPE.simpleString() == "array<struct<key:string,value:binary>>"


def test_every_column_converts_to_records() -> None:
    columns = SinkColumns.check(
        schema(
            topic=StringType(),
            key=StringType(),
            value=BinaryType(),
            headers=HEADERS_TYPE,
            partition=IntegerType(),
            timestamp=TimestampType(),
            other=LongType(),
        ),
        None,
    )
    utc = datetime.UTC
    batch = pa.record_batch(
        {
            "topic": ["a", "b", "a"],
            "key": ["k1", None, "k3"],
            "value": [b"v1", b"v2", None],
            "headers": pa.array(
                [[{"key": "h", "value": b"1"}, {"key": "h", "value": None}], None, []],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
            "partition": pa.array([0, None, 2], pa.int32()),
            "timestamp": pa.array(
                [datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=utc), None, None],
                pa.timestamp("us", tz="UTC"),
            ),
            "other": [1, 2, 3],
        }
    )
    assert list(columns.records(batch)) == [
        ("a", b"v1", b"k1", [("h", b"1"), ("h", None)], 0, 1704164645678),
        ("b", b"v2", None, None, None, None),
        ("a", None, b"k3", [], 2, None),
    ]


def test_large_strings_and_double_timestamps_convert() -> None:
    columns = SinkColumns.check(schema(value=StringType(), timestamp=DoubleType()), "t")
    batch = pa.record_batch(
        {"value": pa.array(["é"], pa.large_string()), "timestamp": [1.5]},
    )
    assert list(columns.records(batch)) == [("t", "é".encode(), None, None, None, 1500)]


def test_a_null_topic_without_the_topic_option_fails() -> None:
    columns = SinkColumns.check(schema(topic=StringType(), value=StringType()), None)
    with pytest.raises(NullTopicError, match=r"^null topic present in the data\. Use the topic"):
        list(columns.records(pa.record_batch({"topic": ["a", None], "value": ["x", "y"]})))


def test_options_parse() -> None:
    options = WriteOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.linger.ms": "0",
            "topic": "t",
            "exactlyonce": "TRUE",
            "transactionalidprefix": "p",
            "batchid": "7",
        }
    )
    assert options == WriteOptions(
        producer_settings={"bootstrap.servers": "h:1", "linger.ms": "0"},
        topic="t",
        exactly_once=True,
        transactional_id_prefix="p",
        marker_topic="t",
        batch_id=7,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"topic": "t"},
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"},
            "Kafka option 'key.serializer' is not supported as keys are serialized with "
            "ByteArraySerializer.",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "exactlyonce": "yes"},
            "option 'exactlyonce' must be true or false, got 'yes'",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "exactlyonce": "true"},
            "exactlyOnce=true needs the topic option, or the markerTopic option",
        ),
    ],
)
def test_wrong_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        WriteOptions.parse(options)


def test_a_writer_is_built_without_opening_a_client() -> None:
    # an unreachable broker: a client opened by the constructor would fail or hang
    writer = KafketteBatchWriter(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, schema(value=StringType())
    )

    assert isinstance(pickle.loads(pickle.dumps(writer)), KafketteBatchWriter)


headers_st = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3)))),
)
row_st = st.tuples(
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.text(max_size=4)),
    st.one_of(st.none(), st.binary(max_size=4)),
    headers_st,
    st.one_of(st.none(), st.integers(0, 2**31 - 1)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(row_st, max_size=20))
def test_records_are_the_rows_of_any_batch(rows: list[tuple[Any, ...]]) -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.record_batch(
        {
            "topic": pa.array([r[0] for r in rows], pa.string()),
            "key": pa.array([r[1] for r in rows], pa.string()),
            "value": pa.array([r[2] for r in rows], pa.binary()),
            "headers": pa.array(
                [None if r[3] is None else [{"key": k, "value": v} for k, v in r[3]] for r in rows],
                pa.list_(header),
            ),
            "partition": pa.array([r[4] for r in rows], pa.int32()),
        }
    )
    columns = SinkColumns.check(
        schema(
            topic=StringType(),
            key=StringType(),
            value=BinaryType(),
            headers=HEADERS_TYPE,
            partition=IntegerType(),
        ),
        None,
    )
    assert list(columns.records(batch)) == [
        (topic, value, None if key is None else key.encode(), headers, partition, None)
        for topic, key, value, headers, partition in rows
    ]
