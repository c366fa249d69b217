"""A Spark pipeline on kafkette, end to end: ``python -m kafkette.spark_integration.demo``.

Starts ``kafkette serve`` on a free loopback port and produces orders to a
topic; a local Spark streaming query reads them with the ``kafkette`` source
(three micro-batches, ``maxOffsetsPerTrigger``), turns each order into an
invoice, and writes the invoices with :class:`KafkaSink`, exactly once. Then
it reads the invoices back with ``read_committed`` and checks that each order
became exactly one invoice, with its key, on the partition its key maps to.
Exits non-zero if anything differs. Needs Java 17+ and ``kafkette[spark]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from kafkette import AdminClient, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition
from kafkette.demo import start_broker
from kafkette.spark_integration.sink import KafkaSink

ORDERS = 3_000
PARTITIONS = 3
PER_TRIGGER = 1_000


def produce_orders(bootstrap: str) -> dict[bytes, bytes]:
    """Create the two topics and produce ORDERS orders; return value by key."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics(
            [NewTopic("orders", PARTITIONS), NewTopic("invoices", PARTITIONS)]
        ).all()
    sent = {}
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(ORDERS):
            key, value = f"order-{i}".encode(), f"{i % 7 + 1} x widget".encode()
            producer.send("orders", value, key=key)
            sent[key] = value
        producer.flush()
    print(f"  produced {ORDERS} orders to 'orders' ({PARTITIONS} partitions)")
    return sent


def run_pipeline(bootstrap: str, checkpoint: Path) -> list[int]:
    """The streaming query: orders in, invoices out exactly once; returns its batch sizes."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kafkette.spark_integration import register

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkette-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"  Spark {spark.version} local[2] session up in {time.perf_counter() - started:.1f} s")
    try:
        register(spark)
        orders = (
            spark.readStream.format("kafkette")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "orders")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
            .load()
        )
        invoices = orders.select(
            F.col("key"),
            F.concat(F.lit("invoice for "), F.col("value").cast("string")).alias("value"),
        )
        started = time.perf_counter()
        query = (
            invoices.writeStream.foreachBatch(KafkaSink(bootstrap, "invoices"))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        sizes = [p["numInputRows"] for p in batches]
        print(
            f"  streaming query: {len(batches)} micro-batches of {sizes} orders "
            f"in {time.perf_counter() - started:.1f} s (kafkette source -> KafkaSink, exactly once)"
        )
        return sizes
    finally:
        spark.stop()


def read_invoices(bootstrap: str) -> list[ConsumerRecord]:
    """Every committed invoice, read with read_committed."""
    partitions = [TopicPartition("invoices", p) for p in range(PARTITIONS)]
    received: list[ConsumerRecord] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            consumer.position(tp) < end for tp, end in ends.items()
        ):
            for records in consumer.poll(timeout_ms=500).values():
                received.extend(records)
    return received


def check(sent: dict[bytes, bytes], received: list[ConsumerRecord], sizes: list[int]) -> None:
    """Exit non-zero unless each order became exactly one invoice, in batches of the limit."""
    keys = [r.key for r in received]
    expected = {key: b"invoice for " + value for key, value in sent.items()}
    got = {r.key: r.value for r in received if r.key is not None}
    if len(keys) != len(set(keys)) or got != expected:
        raise SystemExit(
            f"  MISMATCH: {len(received)} invoices ({len(set(keys))} distinct keys) for "
            f"{len(sent)} orders"
        )
    if sum(sizes) != ORDERS or max(sizes) > PER_TRIGGER:
        raise SystemExit(f"  MISMATCH: micro-batches of {sizes} orders, limit {PER_TRIGGER}")
    print(f"  read back {len(received)} invoices with read_committed")
    print("  every order became exactly one invoice with its key")


def main() -> None:
    """Run the pipeline; exit non-zero on any difference."""
    with tempfile.TemporaryDirectory() as tmp:
        process, port = start_broker(Path(tmp) / "serve.log")
        bootstrap = f"127.0.0.1:{port}"
        try:
            print(f"kafkette serve is listening on {bootstrap}; a Spark pipeline on it:")
            sent = produce_orders(bootstrap)
            sizes = run_pipeline(bootstrap, Path(tmp) / "checkpoint")
            check(sent, read_invoices(bootstrap), sizes)
        finally:
            process.terminate()
            process.wait(30)
    print("spark pipeline: all good")


if __name__ == "__main__":
    main()
