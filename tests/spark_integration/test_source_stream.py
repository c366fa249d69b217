"""Streaming reads through ``readStream.format("kafkette")`` against ``kafkette serve``."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from kafkette import AdminClient, NewTopic, Producer, TopicPartition
from tests.brokers import BrokerProcess


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)]).all()


def run_available_now(
    spark: SparkSession, broker: BrokerProcess, checkpoint: Path, **options: str
) -> list[list[tuple[int, int, bytes]]]:
    """Run the stream with Trigger.AvailableNow; each micro-batch's (partition, offset, value)."""
    batches: list[list[tuple[int, int, bytes]]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        rows = df.select("partition", "offset", "value").collect()
        batches.append(sorted((r.partition, r.offset, bytes(r.value)) for r in rows))

    reader = spark.readStream.format("kafkette").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return [b for b in batches if b]


def test_max_offsets_per_trigger_with_available_now(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    create(spark_broker.bootstrap, unique_topic, 2)
    with Producer(bootstrap_servers=spark_broker.bootstrap) as producer:
        for i in range(13):
            producer.send(unique_topic, value=b"a%d" % i, partition=0)
        for i in range(4):
            producer.send(unique_topic, value=b"b%d" % i, partition=1)
        producer.flush()
    batches = run_available_now(
        spark,
        spark_broker,
        tmp_path / "checkpoint",
        subscribe=unique_topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="7",
        groupIdPrefix=f"{unique_topic}-lag",
    )
    # 7 spread by lag (shares rounded down): 13:4 -> 5+1, 8:3 -> 5+1, then the last 3+2
    assert [len(b) for b in batches] == [6, 6, 5]
    assert [[(p, o) for p, o, _ in b] for b in batches] == [
        [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)],
        [(0, 5), (0, 6), (0, 7), (0, 8), (0, 9), (1, 1)],
        [(0, 10), (0, 11), (0, 12), (1, 2), (1, 3)],
    ]
    assert sorted(v for b in batches for _, _, v in b) == sorted(
        [b"a%d" % i for i in range(13)] + [b"b%d" % i for i in range(4)]
    )
    with AdminClient(bootstrap_servers=spark_broker.bootstrap) as admin:
        committed = admin.list_consumer_group_offsets(f"{unique_topic}-lag").all()
    # Spark commits a batch to its source when it plans the next one: the group trails
    # by the last batch
    assert {tp: o.offset for tp, o in committed.items() if o is not None} == {
        TopicPartition(unique_topic, 0): 10,
        TopicPartition(unique_topic, 1): 2,
    }


def test_read_committed_stream_skips_an_aborted_transaction(
    spark: SparkSession, spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    create(spark_broker.bootstrap, unique_topic, 1)
    producer = Producer(bootstrap_servers=spark_broker.bootstrap, transactional_id=unique_topic)
    try:
        producer.init_transactions()
        for value, commit in ((b"kept-1", True), (b"aborted", False), (b"kept-2", True)):
            producer.begin_transaction()
            producer.send(unique_topic, value=value, partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    finally:
        producer.close()
    batches = run_available_now(
        spark,
        spark_broker,
        tmp_path / "checkpoint",
        subscribe=unique_topic,
        startingOffsets="earliest",
        **{"kafka.isolation.level": "read_committed"},
    )
    assert [v for b in batches for _, _, v in b] == [b"kept-1", b"kept-2"]
