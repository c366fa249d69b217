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

    .venv/bin/python bench/spark.py [--records 1000000] [--repeat 2]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
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


if __name__ == "__main__":
    main()
