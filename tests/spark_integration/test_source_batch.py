"""Batch reads through ``format("kafkette")`` against ``kafkette serve``: exact records."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from kafkette import AdminClient, NewTopic, Producer
from tests.brokers import BrokerProcess

BASE_TS = 1_700_000_000_000
PER_PARTITION = 10

Row = tuple[bytes | None, bytes, str, int, int, int, int]


def expected_row(topic: str, partition: int, i: int) -> Row:
    return (
        f"k{partition}-{i}".encode(),
        f"v{partition}-{i}".encode(),
        topic,
        partition,
        i,
        BASE_TS + i * 1000,
        0,
    )


def fill(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)]).all()
    producer = Producer(bootstrap_servers=bootstrap)
    try:
        for p in range(partitions):
            for i in range(PER_PARTITION):
                headers = [("h", str(i).encode()), ("p", None)] if i % 2 == 0 else None
                producer.send(
                    topic,
                    value=f"v{p}-{i}".encode(),
                    key=f"k{p}-{i}".encode(),
                    headers=headers,
                    partition=p,
                    timestamp=BASE_TS + i * 1000,
                )
        producer.flush()
    finally:
        producer.close()


@pytest.fixture(scope="module")
def topics(spark_broker: BrokerProcess) -> Iterator[tuple[str, str]]:
    """``batch-read-main`` (3 partitions) and ``batch-read-side`` (1), 10 records each."""
    fill(spark_broker.bootstrap, "batch-read-main", 3)
    fill(spark_broker.bootstrap, "batch-read-side", 1)
    yield "batch-read-main", "batch-read-side"


def read(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    reader = spark.read.format("kafkette").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: DataFrame) -> list[Row]:
    selected = df.select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("ts"),
        "timestampType",
    )
    return sorted(
        (bytes(r[0]) if r[0] is not None else None, bytes(r[1]), *r[2:]) for r in selected.collect()
    )


def test_the_schema_is_sparks(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    df = read(spark, spark_broker, subscribe="batch-read-main")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    with_headers = read(spark, spark_broker, subscribe="x", includeHeaders="true")
    assert with_headers.schema.simpleString().endswith(
        ",headers:array<struct<key:string,value:binary>>>"
    )


def test_subscribe_reads_every_record_from_earliest_to_latest(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, _ = topics
    assert rows(read(spark, spark_broker, subscribe=main)) == sorted(
        expected_row(main, p, i) for p in range(3) for i in range(PER_PARTITION)
    )


def test_offset_json_bounds_each_partition(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, _ = topics
    df = read(
        spark,
        spark_broker,
        subscribe=main,
        startingOffsets=json.dumps({main: {"0": 2, "1": -2, "2": 9}}),
        endingOffsets=json.dumps({main: {"0": 5, "1": 3, "2": -1}}),
    )
    wanted = [(0, range(2, 5)), (1, range(3)), (2, range(9, 10))]
    assert rows(df) == sorted(expected_row(main, p, i) for p, span in wanted for i in span)


def test_timestamps_bound_the_read(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, _ = topics
    df = read(
        spark,
        spark_broker,
        subscribe=main,
        startingTimestamp=str(BASE_TS + 6500),
        endingOffsetsByTimestamp=json.dumps(
            {main: {"0": BASE_TS + 8000, "1": BASE_TS + 99_000, "2": BASE_TS + 7000}}
        ),
    )
    wanted = [(0, range(7, 8)), (1, range(7, 10)), (2, range(7, 7))]
    assert rows(df) == sorted(expected_row(main, p, i) for p, span in wanted for i in span)


def test_headers_are_read_when_asked_for(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    _, side = topics
    df = read(spark, spark_broker, subscribe=side, includeHeaders="true")
    got = sorted(
        (r.offset, [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers or []])
        for r in df.select("offset", "headers").collect()
    )
    assert got == [
        (i, [("h", str(i).encode()), ("p", None)] if i % 2 == 0 else []) for i in range(10)
    ]


def test_assign_reads_only_the_assigned_partitions(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, side = topics
    df = read(spark, spark_broker, assign=json.dumps({main: [1], side: [0]}))
    assert rows(df) == sorted(
        [expected_row(main, 1, i) for i in range(10)]
        + [expected_row(side, 0, i) for i in range(10)]
    )


def test_subscribe_pattern_matches_whole_topic_names(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, side = topics
    both = rows(read(spark, spark_broker, subscribePattern="batch-read-.*"))
    assert {(r[2], r[3]) for r in both} == {(main, 0), (main, 1), (main, 2), (side, 0)}
    assert len(both) == 40
    assert rows(read(spark, spark_broker, subscribePattern="batch-read-si")) == []


def test_min_partitions_and_max_records_split_the_tasks(
    spark: SparkSession, spark_broker: BrokerProcess, topics: tuple[str, str]
) -> None:
    main, _ = topics
    every = sorted(expected_row(main, p, i) for p in range(3) for i in range(PER_PARTITION))
    split = read(spark, spark_broker, subscribe=main, minPartitions="6")
    assert split.select(F.spark_partition_id()).distinct().count() == 6
    assert rows(split) == every
    capped = read(spark, spark_broker, subscribe=main, maxRecordsPerPartition="4")
    assert capped.select(F.spark_partition_id()).distinct().count() == 9
    assert rows(capped) == every


def test_read_committed_skips_aborted_transactions(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str
) -> None:
    with AdminClient(bootstrap_servers=spark_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)]).all()
    producer = Producer(bootstrap_servers=spark_broker.bootstrap, transactional_id=unique_topic)
    try:
        producer.init_transactions()
        for value, commit in ((b"a", True), (b"aborted", False), (b"c", True)):
            producer.begin_transaction()
            producer.send(unique_topic, value=value, partition=0)
            producer.send(unique_topic, value=value + b"2", partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    finally:
        producer.close()
    committed = read(
        spark, spark_broker, subscribe=unique_topic, **{"kafka.isolation.level": "read_committed"}
    )
    assert sorted(bytes(r.value) for r in committed.select("value").collect()) == [
        b"a", b"a2", b"c", b"c2",
    ]  # fmt: skip
    everything = read(spark, spark_broker, subscribe=unique_topic)
    assert len(everything.collect()) == 6


def test_wrong_options_fail_with_sparks_messages(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        read(spark, spark_broker, subscribe="t", startingOffsets="latest").collect()
    with pytest.raises(Exception, match=r"Kafka option 'enable\.auto\.commit' is not supported"):
        read(spark, spark_broker, subscribe="t", **{"kafka.enable.auto.commit": "true"}).collect()
    custom = StructType([StructField("value", StringType())])
    with pytest.raises(Exception, match="Kafka source has a fixed schema"):
        (
            spark.read.format("kafkette")
            .schema(custom)
            .option("kafka.bootstrap.servers", spark_broker.bootstrap)
            .option("subscribe", "t")
            .load()
            .collect()
        )
