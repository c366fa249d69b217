"""``valueFormat=avro`` without a Spark session: Avro schemas as Spark types, the options'
errors, and the executors' decoding and encoding of Arrow columns over a ``memory://``
cluster's registry (the Spark session's tests are in test_avro_values.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from kafkette.consumer import ConsumerRecord
from kafkette.errors import SerializationError
from kafkette.schema_registry import AvroSerializer, Schema, SchemaRegistryClient
from kafkette.spark_integration.arrow_records import records_to_batch
from kafkette.spark_integration.avro.options import (
    AvroValues,
    avro_request,
    reader_schema,
    writer_schema,
)
from kafkette.spark_integration.avro.types import AvroTypeError, check_writable, spark_type
from kafkette.spark_integration.avro.values import ValueDecoder, ValueEncoder
from kafkette.spark_integration.sink import KafkaSink
from kafkette.spark_integration.source import KafketteDataSource
from kafkette.spark_integration.writer import KafketteBatchWriter
from kafkette.testing import MemoryCluster

POINT = {
    "type": "record",
    "name": "Point",
    "namespace": "geo",
    "fields": [
        {"name": "x", "type": "int"},
        {"name": "label", "type": ["null", "string"], "default": None},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}, "default": ""},
    ],
}


@pytest.mark.parametrize(
    ("avro", "spark"),
    [
        ("long", "bigint"),
        ({"type": "int", "logicalType": "date"}, "date"),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, "timestamp_ntz"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, "decimal(9,2)"),
        ({"type": "fixed", "name": "F", "size": 4}, "binary"),
        (["null", "int", "long"], "bigint"),
        (["float", "double"], "double"),
        ({"type": "map", "values": ["null", "string"]}, "map<string,string>"),
        (POINT, "struct<x:int,label:string,id:string>"),
        (
            {
                "type": "record",
                "name": "Line",
                "fields": [{"name": "a", "type": POINT}, {"name": "b", "type": "geo.Point"}],
            },
            "struct<a:struct<x:int,label:string,id:string>,b:struct<x:int,label:string,id:string>>",
        ),
    ],
)
def test_avro_types_as_spark_types(avro: Any, spark: str) -> None:
    """Spark's from_avro mapping, named types reused by their full names."""
    assert spark_type(avro)[0].simpleString() == spark


def test_avro_types_spark_has_not() -> None:
    """A recursive record and a union of two records are refused at once, saying why."""
    recursive = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}],
    }
    with pytest.raises(AvroTypeError, match=r"recursive reference .* Node"):
        spark_type(recursive)
    with pytest.raises(AvroTypeError, match="union of 2 non-null types"):
        spark_type(["null", POINT, "string"])


def test_writable_columns() -> None:
    """A column with a field the schema lacks, or of another type, is refused; a
    missing nullable field is not."""
    expected = spark_type(POINT)[0]
    check_writable(StructType([StructField("x", IntegerType())]), expected)
    with pytest.raises(AvroTypeError, match=r"Cannot find field 'value\.colour'"):
        check_writable(StructType([StructField("colour", StringType())]), expected)
    with pytest.raises(AvroTypeError, match=r"value\.x is string: the Avro schema has int"):
        check_writable(StructType([StructField("x", StringType())]), expected)


def test_option_errors() -> None:
    """valueFormat=avro without a registry or subject, or a bad mode, fails at once."""
    with pytest.raises(ValueError, match=r"needs the option schema\.registry\.url"):
        avro_request({"valueFormat": "avro"}, "t")
    with pytest.raises(ValueError, match="'mode' must be FAILFAST or PERMISSIVE"):
        avro_request({"valueFormat": "avro", "schema.registry.url": "x", "mode": "drop"}, "t")
    with pytest.raises(ValueError, match="applies to valueFormat=avro only"):
        avro_request({"valueSubject": "s"}, "t")
    request = avro_request({"valueformat": "AVRO", "schema.registry.url": "memory://none"}, None)
    with pytest.raises(ValueError, match="needs the option valueSubject"):
        reader_schema(request)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="value_format='avro' needs schema_registry"):
        KafkaSink("b:9092", "t", value_format="avro")


@pytest.fixture
def registry() -> Iterator[tuple[str, SchemaRegistryClient]]:
    with MemoryCluster() as cluster, SchemaRegistryClient(cluster.schema_registry_url) as client:
        yield cluster.schema_registry_url, client


def batch_of(values: list[bytes | None]) -> Any:
    records = [
        ConsumerRecord("points", 0, offset, 0, None, value, [], 0, None)
        for offset, value in enumerate(values)
    ]
    return records_to_batch(records, False)


def test_decoding_a_value_column(registry: tuple[str, SchemaRegistryClient]) -> None:
    """Values written with an older schema are resolved to the subject's latest; uuids are
    strings; FAILFAST names the offset of a value that does not decode, PERMISSIVE
    reads it as null."""
    url, client = registry
    old = {**POINT, "fields": POINT["fields"][:1]}  # type: ignore[index]
    write_old = AvroSerializer(client, json.dumps(old), topic="points")
    write_new = AvroSerializer(client, json.dumps(POINT), topic="points")
    point = {"x": 2, "label": "b", "id": "5f0c9e8e-63a4-4c41-9c59-3bbd0c5c1a52"}
    values = [write_old({"x": 1}), write_new(point), None, b"\x00\x00\x00\x00\x09"]
    options = {"valueFormat": "avro", "schema.registry.url": url}
    request = avro_request(options, "points")
    assert request is not None
    decoder = ValueDecoder(AvroValues(request, reader_schema(request)), include_headers=False)
    try:
        with pytest.raises(SerializationError, match=r"offset 3 of points-0: schema id 9"):
            decoder.decode(batch_of(values))
        decoded = decoder.decode(batch_of(values[:3]))
    finally:
        decoder.close()
    assert decoded.column(1).to_pylist() == [{"x": 1, "label": None, "id": ""}, point, None]
    assert decoded.schema.field("value").type == pa.struct(
        [
            pa.field("x", pa.int32(), nullable=False),
            pa.field("label", pa.string()),
            pa.field("id", pa.string(), nullable=False),
        ]
    )
    permissive = avro_request({**options, "mode": "permissive"}, "points")
    assert permissive is not None
    decoder = ValueDecoder(AvroValues(permissive, reader_schema(permissive)), False)
    try:
        assert decoder.decode(batch_of(values)).column(1).to_pylist()[3] is None
    finally:
        decoder.close()


def test_encoding_a_value_column(registry: tuple[str, SchemaRegistryClient]) -> None:
    """avroSchema is registered under TOPIC-value; each struct is framed with its id in
    the bytes our serializer (confluent-kafka's, tests/schema_registry) writes."""
    url, client = registry
    options = {"valueFormat": "avro", "schema.registry.url": url, "avroSchema": json.dumps(POINT)}
    request = avro_request(options, "points")
    assert request is not None
    found = writer_schema(request)
    assert (found.schema_id, client.get_latest_version("points-value").schema_id) == (1, 1)
    column = pa.array(
        [{"x": 7, "label": None, "id": "u"}, None],
        pa.struct([("x", pa.int32()), ("label", pa.string()), ("id", pa.string())]),
    )
    serializer = AvroSerializer(client, json.dumps(POINT), topic="points")
    assert ValueEncoder(AvroValues(request, found)).encode(column) == [
        serializer({"x": 7, "label": None, "id": "u"}),
        None,
    ]
    assert found.schema == Schema(json.dumps(POINT), "AVRO")


def test_a_writer_refuses_a_column_the_schema_lacks(
    registry: tuple[str, SchemaRegistryClient],
) -> None:
    """The writer (built on the driver) registers avroSchema and refuses a value struct
    with a field the schema has not, before any task runs."""
    url, client = registry
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "topic": "points",
        "valueFormat": "avro",
        "schema.registry.url": url,
        "avroSchema": json.dumps(POINT),
    }
    extra = StructType([StructField("value", StructType([StructField("colour", StringType())]))])
    with pytest.raises(AvroTypeError, match=r"Cannot find field 'value\.colour'"):
        KafketteBatchWriter(options, extra)
    registered = client.get_latest_version("points-value").schema
    assert json.loads(registered.schema_str) == POINT


def test_the_source_schema_follows_the_subject(registry: tuple[str, SchemaRegistryClient]) -> None:
    """The data source's schema has the subject's latest schema as its value column; its
    batch and stream readers carry that schema to the executors, and refuse a plan made
    before the subject moved on (naming it) rather than decode to another type."""
    url, client = registry
    AvroSerializer(client, json.dumps(POINT), topic="points")({"x": 1})
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "points",
        "valueFormat": "avro",
        "schema.registry.url": url,
    }
    source = KafketteDataSource(options)
    schema = source.schema()
    assert schema["value"].dataType.simpleString() == "struct<x:int,label:string,id:string>"
    batch = source.reader(schema)
    stream = source.streamReader(schema)
    for reader in (batch, stream):
        avro = reader.options.value_avro  # type: ignore[attr-defined]
        assert avro is not None and json.loads(avro.schema.schema.schema_str) == POINT
    wider = {**POINT, "fields": [*POINT["fields"], {"name": "y", "type": "int", "default": 0}]}  # type: ignore[list-item]
    AvroSerializer(client, json.dumps(wider), topic="points")({"x": 1})
    with pytest.raises(ValueError, match="Avro schema changed while the query was planned"):
        source.reader(schema)
