"""Writes through ``format("kafkette")`` and ``KafkaSink`` against ``kafkette serve``: the
exact records read back, by kafkette's consumer and by confluent-kafka's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from kafkette import AdminClient, NewTopic, TopicPartition
from kafkette.admin.types import OffsetSpec
from kafkette.spark_integration import KafkaSink
from tests.brokers import BrokerProcess
from tests.spark_integration.sink_helpers import (
    Written,
    create_topics,
    read_all,
    read_with_confluent,
)

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
EVERY_COLUMN = StructType(
    [
        StructField("topic", StringType()),
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("headers", HEADERS),
        StructField("partition", IntegerType()),
    ]
)


def every_column_rows(topics: tuple[str, str], count: int) -> list[tuple[object, ...]]:
    """Rows using every sink column; a null key, a null value and null headers among them."""
    return [
        (
            topics[i % 2],
            None if i == 3 else f"k{i}",
            None if i == 5 else f"v{i}".encode(),
            None if i == 1 else [("n", str(i).encode()), ("empty", None)],
            (i // 2) % 2,
        )
        for i in range(count)
    ]


def as_written(rows: list[tuple[object, ...]]) -> list[Written]:
    written: list[Written] = []
    for topic, key, value, headers, partition in rows:
        assert isinstance(topic, str) and isinstance(partition, int)
        written.append(
            (
                topic,
                partition,
                None if key is None else str(key).encode(),
                value,  # type: ignore[arg-type]
                list(headers or []),  # type: ignore[call-overload]
            )
        )
    return sorted(written, key=repr)


def write(df: DataFrame, broker: BrokerProcess, **options: str) -> None:
    (
        df.write.format("kafkette")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .options(**options)
        .save()
    )


def test_batch_write_of_every_column(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str
) -> None:
    topics = (f"{unique_topic}-a", f"{unique_topic}-b")
    create_topics(spark_broker.bootstrap, 2, *topics)
    rows = every_column_rows(topics, 12)
    write(spark.createDataFrame(rows, EVERY_COLUMN).repartition(3), spark_broker)

    assert sorted(read_all(spark_broker.bootstrap, 2, *topics), key=repr) == as_written(rows)
    # confluent-kafka reads the same records, keys, headers and partitions
    on_a = [r for r in as_written(rows) if r[0] == topics[0]]
    assert sorted(read_with_confluent(spark_broker.bootstrap, topics[0], 6), key=repr) == on_a


def test_the_topic_option_overrides_the_topic_column(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str
) -> None:
    create_topics(spark_broker.bootstrap, 1, unique_topic)
    df = spark.sql(
        "SELECT 'elsewhere' AS topic, CAST(concat('k', id) AS BINARY) AS key, "
        "concat('v', id) AS value FROM range(5)"
    )
    write(df, spark_broker, topic=unique_topic)
    assert sorted(read_all(spark_broker.bootstrap, 1, unique_topic)) == [
        (unique_topic, 0, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(5)
    ]


@pytest.mark.parametrize(
    ("sql", "options", "message"),
    [
        ("SELECT 'k' AS key", {"topic": "t"}, "Required attribute 'value' not found"),
        (
            "SELECT 'v' AS value",
            {},
            "topic option required when no 'topic' attribute is present",
        ),
        (
            "SELECT 1 AS value",
            {"topic": "t"},
            "value attribute unsupported type int. value must be a(n) string or binary",
        ),
    ],
)
def test_wrong_columns_fail_the_write_with_sparks_messages(
    spark: SparkSession,
    spark_broker: BrokerProcess,
    sql: str,
    options: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(Exception, match=r"SinkSchemaError") as info:
        write(spark.sql(sql), spark_broker, **options)
    assert message in str(info.value)


def test_a_record_the_broker_refuses_fails_the_write(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str
) -> None:
    with AdminClient(bootstrap_servers=spark_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1, {"max.message.bytes": "1000"})]).all()
    df = spark.sql("SELECT repeat('x', id * 5000) AS value FROM range(2)")
    # the producer accepts the record; the broker's refusal comes with its delivery
    with pytest.raises(Exception, match="MessageTooLargeError") as info:
        write(df, spark_broker, topic=unique_topic)
    assert "exceeds max.message.bytes (1000)" in str(info.value)


def test_exactly_once_outside_a_streaming_query_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str
) -> None:
    create_topics(spark_broker.bootstrap, 1, unique_topic)
    with pytest.raises(Exception, match="this task has no streaming query id or batch id"):
        write(
            spark.sql("SELECT 'v' AS value"), spark_broker, topic=unique_topic, exactlyOnce="true"
        )
    assert read_all(spark_broker.bootstrap, 1, unique_topic, read_committed=False) == []


def lines_stream(spark: SparkSession, directory: Path, files: list[list[str]]) -> DataFrame:
    """A stream of the lines of ``files``, one file per micro-batch."""
    directory.mkdir()
    for n, lines in enumerate(files):
        path = directory / f"{n:03}.txt"
        path.write_text("".join(f"{line}\n" for line in lines))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order
    return spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))


def test_streaming_write_of_every_column(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    topics = (f"{unique_topic}-a", f"{unique_topic}-b")
    create_topics(spark_broker.bootstrap, 2, *topics)
    rows = every_column_rows(topics, 8)
    lines = lines_stream(spark, tmp_path / "in", [["0", "1", "2", "3"], ["4", "5", "6", "7"]])
    # the same rows as every_column_rows, computed from i
    i = "CAST(value AS INT)"
    df = lines.selectExpr(
        f"IF({i} % 2 = 0, '{topics[0]}', '{topics[1]}') AS topic",
        f"IF({i} = 3, NULL, concat('k', {i})) AS key",
        f"IF({i} = 5, NULL, CAST(concat('v', {i}) AS BINARY)) AS value",
        f"IF({i} = 1, NULL, array(named_struct('key', 'n', 'value', CAST(value AS BINARY)),"
        " named_struct('key', 'empty', 'value', CAST(NULL AS BINARY)))) AS headers",
        f"CAST(({i} DIV 2) % 2 AS INT) AS partition",
    )
    query = (
        df.writeStream.format("kafkette")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.lastProgress["batchId"] == 1
    assert sorted(read_all(spark_broker.bootstrap, 2, *topics), key=repr) == as_written(rows)


def markers(bootstrap: str, prefix: str, topic: str, partitions: int) -> list[dict[str, object]]:
    """The exactly-once markers of Spark partitions 0..partitions-1."""
    return markers_of(bootstrap, [f"{prefix}-{p}" for p in range(partitions)], topic)


def markers_of(bootstrap: str, groups: list[str], topic: str) -> list[dict[str, object]]:
    """The exactly-once markers committed by ``groups`` (each must have one)."""
    found = []
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        for group in groups:
            offsets = admin.list_consumer_group_offsets(
                group, [TopicPartition(topic, 0)], require_stable=True
            )
            committed = offsets.all()[TopicPartition(topic, 0)]
            assert committed is not None
            found.append(json.loads(committed.metadata))
    return found


def end_offset(bootstrap: str, topic: str) -> int:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        ends = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.LATEST}).all()
    return ends[TopicPartition(topic, 0)].offset


def marker_groups(bootstrap: str, prefix: str, topic: str) -> dict[str, dict[str, object]]:
    """Every marker group of transactional ids ``prefix-N``: its marker, by group."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        names = sorted(
            g.group_id
            for g in admin.list_consumer_groups().all()
            if g.group_id.startswith(f"{prefix}-")
        )
    return dict(zip(names, markers_of(bootstrap, names, topic), strict=True))


def test_streaming_write_exactly_once_commits_rows_with_their_markers(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    create_topics(spark_broker.bootstrap, 2, unique_topic)
    lines = lines_stream(spark, tmp_path / "in", [["a", "b", "c"], ["d", "e", "f", "g"]])
    query = (
        lines.repartition(2, "value")
        .writeStream.format("kafkette")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("topic", unique_topic)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    written = read_all(spark_broker.bootstrap, 2, unique_topic)
    assert sorted(value for _, _, _, value, _ in written) == [c.encode() for c in "abcdefg"]
    found = markers(spark_broker.bootstrap, f"kafkette-spark-{query.id}", unique_topic, 2)
    assert {m["query"] for m in found} == {query.id}
    assert {m["batch"] for m in found} == {1}  # both partitions had rows in batch 1 ...
    assert sum(m["rows"] for m in found) == 4  # ... its four


def test_kafka_sink_in_foreach_batch_from_the_kafkette_source(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    """A pipeline: a topic written by confluent-kafka, read by the ``kafkette`` source,
    transformed, written exactly once by ``KafkaSink``, read back by confluent-kafka."""
    import confluent_kafka

    source, sink = f"{unique_topic}-in", f"{unique_topic}-out"
    create_topics(spark_broker.bootstrap, 2, source, sink)
    producer = confluent_kafka.Producer({"bootstrap.servers": spark_broker.bootstrap})
    for n in range(10):
        producer.produce(source, f"r{n}".encode(), f"k{n}".encode(), partition=n % 2)
    assert producer.flush(10) == 0
    stream = (
        spark.readStream.format("kafkette")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "4")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
    )
    query = (
        stream.writeStream.foreachBatch(
            KafkaSink(spark_broker.bootstrap, sink, producer_config={"linger.ms": 0})
        )
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.lastProgress["batchId"] == 2  # 4 + 4 + 2 records
    # the sink counts a batch before writing it; the source is read once all the same
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [4, 4, 2]
    got = read_with_confluent(spark_broker.bootstrap, sink, 10)
    assert sorted((key, value) for _, _, key, value, _ in got) == sorted(
        (f"k{n}".encode(), f"R{n}".encode()) for n in range(10)
    )
    # each batch was written in one transaction: one marker group, at the last batch
    prefix = f"kafkette-spark-{query.id}"
    assert marker_groups(spark_broker.bootstrap, prefix, sink) == {
        f"{prefix}-0": {"query": query.id, "batch": 2, "rows": 2}
    }


def test_kafka_sink_writes_each_batch_in_as_many_transactions_as_it_needs(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    """Spark's default 200 shuffle partitions, 500 rows in two micro-batches of 250, to
    a topic of one partition, where each transaction leaves one commit marker: one
    transaction a batch by default (500 + 2 offsets, one marker group), three with
    rows_per_transaction=100 (500 + 6, three groups). The records are exact."""
    bootstrap = spark_broker.bootstrap
    files = [[f"line-{b}-{n:03}" for n in range(250)] for b in range(2)]
    runs: dict[str, tuple[dict[str, Any], int]] = {
        "default": ({}, 1),
        "small": ({"rows_per_transaction": 100}, 3),
    }
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        for name, (settings, per_batch) in runs.items():
            topic = f"{unique_topic}-{name}"
            create_topics(bootstrap, 1, topic)
            query = (
                lines_stream(spark, tmp_path / f"in-{name}", files)
                .writeStream.foreachBatch(KafkaSink(bootstrap, topic, **settings))
                .option("checkpointLocation", str(tmp_path / f"checkpoint-{name}"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            assert query.lastProgress["batchId"] == 1
            written = read_all(bootstrap, 1, topic)
            assert sorted(v for *_, v, _ in written) == [x.encode() for f in files for x in f]
            assert end_offset(bootstrap, topic) == 500 + 2 * per_batch
            groups = marker_groups(bootstrap, f"kafkette-spark-{query.id}", topic)
            assert sorted(groups) == [f"kafkette-spark-{query.id}-{p}" for p in range(per_batch)]
            assert {(m["query"], m["batch"]) for m in groups.values()} == {(query.id, 1)}
            assert sum(int(str(m["rows"])) for m in groups.values()) == 250
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
