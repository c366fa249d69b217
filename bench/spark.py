"""Spark batch read through the ``kafkette`` data source vs a plain kafkette Consumer.

One ``kafkette serve --memory`` child process, filled once by confluent-kafka
with one one-partition topic of ``--records`` 100-byte values (10-byte keys).
The same run then reads the whole topic (a) with a plain kafkette Consumer
(assign, poll, touch every value) and (b) with
``spark.read.format("kafkette")`` in a ``local[2]`` session, summing the
value lengths (every record crosses into Spark as Arrow). (b) is measured
twice: one task (one Kafka partition, as the plain consumer) and
``minPartitions=2`` (both cores). To tell the reader's own cost from Spark's,
(c) runs the data source's ``read_range`` (what one Spark task runs) in this
process, without Spark, summing the value lengths of its Arrow batches. The
best of ``--repeat`` rounds is kept;
the session's start-up is not counted, the first Spark read is a warm-up.
Target: the data source at >= 0.5x the plain consumer's records/s.

Then the streaming end-to-end latency per micro-batch: a query reading a
topic with the ``kafkette`` source (``maxOffsetsPerTrigger``,
``Trigger.AvailableNow``) into ``foreachBatch``, once with a sink that only
counts (Spark's own cost), once with ``KafkaSink`` at least once and once
exactly once; Spark's ``triggerExecution`` time of each micro-batch, the
first (which starts the Python workers) apart.

    .venv/bin/python bench/spark.py [--records 1000000] [--repeat 2] [--stream-batches 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumer import fill, kafkette_sync
from tests.brokers import BrokerProcess

TOPIC = "bench-spark-100b"
VALUE_SIZE = 100


def spark_session() -> object:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkette-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")  # KafkaSink's partitions: one per core
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from kafkette.spark_integration import register

    register(session)
    return session


def spark_read(spark: object, bootstrap: str, records: int, **options: str) -> float:
    from pyspark.sql import functions as F

    reader = (
        spark.read.format("kafkette")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    start = time.perf_counter()
    row = reader.load().agg(F.count("*"), F.sum(F.length("value"))).collect()[0]
    elapsed = time.perf_counter() - start
    if (row[0], row[1]) != (records, records * VALUE_SIZE):
        raise AssertionError(f"Spark read {row[0]} records / {row[1]} bytes, expected {records}")
    return elapsed


def read_range_alone(bootstrap: str, records: int) -> float:
    import pyarrow.compute as pc

    from kafkette.spark_integration.partition_reader import read_range
    from kafkette.spark_integration.planning import OffsetRange
    from kafkette.structs import TopicPartition

    start = time.perf_counter()
    count = size = 0
    batches = read_range(
        {"bootstrap.servers": bootstrap},
        OffsetRange(TopicPartition(TOPIC, 0), 0, records),
        include_headers=False,
        fail_on_data_loss=True,
        poll_timeout_ms=120_000,
    )
    for batch in batches:
        count += batch.num_rows
        size += pc.sum(pc.binary_length(batch.column(1))).as_py()
    elapsed = time.perf_counter() - start
    if (count, size) != (records, records * VALUE_SIZE):
        raise AssertionError(f"read_range read {count} records / {size} bytes")
    return elapsed


STREAM_TOPIC = "bench-spark-stream"
STREAM_BATCH = 10_000


def stream_latencies(spark: object, bootstrap: str, batches: int) -> list[tuple[str, list[int]]]:
    """Milliseconds per micro-batch of one streaming query per sink, in batch order."""
    import tempfile

    from kafkette import AdminClient, NewTopic
    from kafkette.spark_integration import KafkaSink

    outputs = ["bench-spark-alo", "bench-spark-eos"]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        topics = [NewTopic(STREAM_TOPIC, 1)] + [NewTopic(name, 3) for name in outputs]
        admin.create_topics(topics).all()
    fill(bootstrap, STREAM_TOPIC, batches * STREAM_BATCH, VALUE_SIZE)
    sinks = [
        ("count only", lambda frame, batch_id: frame.count()),
        ("KafkaSink, at least once", KafkaSink(bootstrap, outputs[0], exactly_once=False)),
        ("KafkaSink, exactly once", KafkaSink(bootstrap, outputs[1])),
    ]
    results = []
    with tempfile.TemporaryDirectory() as checkpoints:
        for number, (name, sink) in enumerate(sinks):
            query = (
                spark.readStream.format("kafkette")  # type: ignore[attr-defined]
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", STREAM_TOPIC)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(STREAM_BATCH))
                .load()
                .select("key", "value")
                .writeStream.foreachBatch(sink)
                .option("checkpointLocation", f"{checkpoints}/{number}")
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
            results.append((name, [p["durationMs"]["triggerExecution"] for p in progress]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--stream-batches", type=int, default=6)
    args = parser.parse_args()
    records = args.records
    with BrokerProcess() as broker:
        print(f"filling {TOPIC} with {records:,} records of {VALUE_SIZE} B ...", flush=True)
        fill(broker.bootstrap, TOPIC, records, VALUE_SIZE)
        plain = min(
            kafkette_sync(broker.bootstrap, TOPIC, records, VALUE_SIZE)[0]
            for _ in range(args.repeat)
        )
        alone = min(read_range_alone(broker.bootstrap, records) for _ in range(args.repeat))
        spark = spark_session()
        try:
            spark_read(spark, broker.bootstrap, records)  # warm-up: Python workers, imports
            one_task = min(spark_read(spark, broker.bootstrap, records) for _ in range(args.repeat))
            two_tasks = min(
                spark_read(spark, broker.bootstrap, records, minPartitions="2")
                for _ in range(args.repeat)
            )
            latencies = stream_latencies(spark, broker.bootstrap, args.stream_batches)
        finally:
            spark.stop()  # type: ignore[attr-defined]
    rows = [
        ("kafkette Consumer", plain),
        ("data source, 1 task", one_task),
        ("data source, minPartitions=2", two_tasks),
        ("read_range alone, no Spark", alone),
    ]
    print(f"\nbatch read of {records:,} records of {VALUE_SIZE} B (best of {args.repeat})")
    print(f"{'reader':32} {'seconds':>8} {'records/s':>12} {'vs Consumer':>12}")
    for name, seconds in rows:
        rate = records / seconds
        print(f"{name:32} {seconds:8.2f} {rate:12,.0f} {plain / seconds:11.2f}x")
    print(
        f"\nstreaming, micro-batches of {STREAM_BATCH:,} records of {VALUE_SIZE} B, "
        "2 Spark partitions per write: ms per micro-batch\n(the first one apart: "
        "it starts the Python workers)"
    )
    print(f"{'sink':28} {'first':>7} {'median':>7} {'max':>7}")
    for name, times in latencies:
        rest = sorted(times[1:]) or times
        print(f"{name:28} {times[0]:7} {rest[len(rest) // 2]:7} {max(rest):7}")


if __name__ == "__main__":
    main()
