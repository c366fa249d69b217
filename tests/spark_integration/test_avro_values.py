"""``valueFormat=avro`` against ``kafkette serve --schema-registry``: registry-framed Avro
values written by confluent-kafka read as Spark columns, and Spark rows written (by
``format("kafkette")`` and :class:`KafkaSink`) in bytes equal to confluent-kafka's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from kafkette.spark_integration import KafkaSink
from tests.brokers import BrokerProcess
from tests.schema_registry.server.test_serve import registry_url
from tests.spark_integration.sink_helpers import create_topics, read_all

KIND = {"type": "enum", "name": "Kind", "symbols": ["NEW", "PAID"]}
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "kind", "type": KIND},
    ],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [
        *ORDER_V1["fields"],  # type: ignore[list-item]
        {
            "name": "placed",
            "type": {"type": "long", "logicalType": "timestamp-millis"},
            "default": 0,
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "attrs", "type": {"type": "map", "values": "int"}, "default": {}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture(scope="module")
def registry_broker() -> Iterator[tuple[BrokerProcess, str]]:
    """``kafkette serve --memory --schema-registry`` and the registry's URL."""
    broker = BrokerProcess(None, args=("--schema-registry", "127.0.0.1:0"))
    try:
        broker.start()
        yield broker, registry_url(broker)
    finally:
        broker.close()


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(10) == 0


def local(epoch_ms: int) -> datetime:
    """A timestamp as PySpark collects it: naive, in the local time zone."""
    return datetime.fromtimestamp(epoch_ms / 1000)


def test_confluent_avro_values_read_as_columns(
    spark: SparkSession, registry_broker: tuple[BrokerProcess, str], unique_topic: str
) -> None:
    """Values of two schema versions, a tombstone and bytes without the frame: the value
    column has the latest schema's Spark type, each record resolved to it (v1's missing
    fields take their defaults); PERMISSIVE reads the unframed value as null (FAILFAST,
    the default, is in test_avro_columns.py)."""
    broker, url = registry_broker
    create_topics(broker.bootstrap, 1, unique_topic)
    context = SerializationContext(unique_topic, MessageField.VALUE)
    placed = datetime(2026, 11, 28, 12, 30, 1, 250_000, tzinfo=UTC)
    second = {
        "id": 2,
        "amount": 1.25,
        "kind": "PAID",
        "placed": placed,
        "tags": ["a", "b"],
        "attrs": {"x": 1},
        "note": "gift",
    }
    with SchemaRegistryClient({"url": url}) as registry:
        v1 = AvroSerializer(registry, json.dumps(ORDER_V1))
        v2 = AvroSerializer(registry, json.dumps(ORDER_V2))
        records = [
            (b"1", v1({"id": 1, "amount": 9.5, "kind": "NEW"}, context)),
            (b"2", v2(second, context)),
            (b"3", None),
            (b"4", b"not framed"),
        ]
    produce(broker.bootstrap, unique_topic, records)

    df = (
        spark.read.format("kafkette")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", url)
        .option("mode", "PERMISSIVE")
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,amount:double,kind:string,placed:timestamp,tags:array<string>,"
        "attrs:map<string,int>,note:string>"
    )
    assert [(f.name, f.nullable) for f in df.schema["value"].dataType.fields] == [
        ("id", False), ("amount", False), ("kind", False), ("placed", False),
        ("tags", False), ("attrs", False), ("note", True),
    ]  # fmt: skip
    rows = [
        (r.key, r.offset, None if r.value is None else r.value.asDict(recursive=True))
        for r in df.orderBy("offset").collect()
    ]
    assert rows == [
        (
            b"1",
            0,
            {
                "id": 1,
                "amount": 9.5,
                "kind": "NEW",
                "placed": local(0),
                "tags": [],
                "attrs": {},
                "note": None,
            },
        ),
        (b"2", 1, {**second, "placed": local(int(placed.timestamp() * 1000))}),
        (b"3", 2, None),
        (b"4", 3, None),
    ]


WRITTEN = StructType(
    [
        StructField("key", StringType()),
        StructField(
            "value",
            StructType(
                [
                    StructField("id", LongType(), False),
                    StructField("amount", DoubleType(), False),
                    StructField("kind", StringType(), False),
                    StructField("attrs", MapType(StringType(), IntegerType()), False),
                    StructField("note", StringType()),
                ]
            ),
        ),
    ]
)
WRITER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "kind", "type": KIND},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def test_rows_written_as_confluents_avro(
    spark: SparkSession, registry_broker: tuple[BrokerProcess, str], unique_topic: str
) -> None:
    """``format("kafkette")`` with ``avroSchema`` registers it and frames each struct with
    its id; ``KafkaSink`` then writes with the subject's latest schema: every value's bytes
    are those of confluent-kafka's AvroSerializer for the same value, a null stays null."""
    broker, url = registry_broker
    create_topics(broker.bootstrap, 1, unique_topic)
    first = [
        ("1", (1, 9.5, "NEW", {"a": 1}, None)),
        ("2", (2, 0.5, "PAID", {}, "gift")),
        ("3", None),
    ]
    (
        spark.createDataFrame(first, WRITTEN)
        .coalesce(1)
        .write.format("kafkette")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique_topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", url)
        .option("avroSchema", json.dumps(WRITER_SCHEMA))
        .save()
    )
    second = [("4", (4, -1.0, "NEW", {"b": 2, "c": 3}, "x"))]
    sink = KafkaSink(
        broker.bootstrap,
        unique_topic,
        exactly_once=False,
        value_format="avro",
        schema_registry={"url": url},
    )
    sink(spark.createDataFrame(second, WRITTEN).coalesce(1), 0)

    context = SerializationContext(unique_topic, MessageField.VALUE)
    names = ["id", "amount", "kind", "attrs", "note"]
    with SchemaRegistryClient({"url": url}) as registry:
        serializer = AvroSerializer(registry, json.dumps(WRITER_SCHEMA))
        expected = [
            (
                key.encode(),
                None
                if value is None
                else serializer(dict(zip(names, value, strict=True)), context),
            )
            for key, value in first + second
        ]
        latest = registry.get_latest_version(f"{unique_topic}-value")
    written = read_all(broker.bootstrap, 1, unique_topic)
    assert [(key, value) for _, _, key, value, _ in written] == expected
    assert (latest.version, expected[0][1][1:5]) == (1, latest.schema_id.to_bytes(4, "big"))  # type: ignore[index]
