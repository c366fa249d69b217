"""A Spark driver for the exactly-once tests, run in a subprocess by them.

It needs a session of its own: ``local[2,3]`` (tasks retried up to 3 times),
which the shared test session is not. Each job streams the text files of
``WORK/TOPIC/in`` (one file per micro-batch, ``Trigger.AvailableNow``) to
``TOPIC``, through :class:`KafkaSink` (mode ``sink``) or
``writeStream.format(...)`` (mode ``stream``), with a data source whose
writer fails the first attempt of every task: partition 0 right after its
write (its transaction committed), partition 1 by killing its Python worker
in the middle of its transaction (left open). Spark retries both.

Run as ``python -m tests.spark_integration.exactly_once_driver``: this module
is ``__main__`` then, so Spark pickles its classes by value to the workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StructType

from kafkette.spark_integration.sink import KafkaSink
from kafkette.spark_integration.writer import (
    KafkaWriteMessage,
    KafketteBatchWriter,
    KafketteStreamWriter,
)

FAILING_FORMAT = "kafkette_fails_once"


def fail_first_attempts(
    write: Any, iterator: Iterator[Any], options: Mapping[str, str]
) -> KafkaWriteMessage:
    """Run ``write(iterator)``, failing the first attempt of partitions 0 and 1.

    Each failure leaves a file ``TOPIC-bBATCH-pPARTITION`` in the ``failures``
    option's directory, for the test to see that it happened.
    """
    context = TaskContext.get()
    assert context is not None
    if context.attemptNumber() > 0 or context.partitionId() > 1:
        return write(iterator)  # type: ignore[no-any-return]
    batch = context.getLocalProperty("streaming.sql.batchId")
    failures = Path(options["failures"])
    (failures / f"{options['topic']}-b{batch}-p{context.partitionId()}").touch()
    if context.partitionId() == 0:
        write(iterator)
        raise RuntimeError("injected failure after the partition was written")

    def dies_midway() -> Iterator[Any]:
        for batch in iterator:
            yield batch
            time.sleep(0.5)  # let the producer send what it has: a transaction left open
            os._exit(3)

    return write(dies_midway())  # type: ignore[no-any-return]


class FailingBatchWriter(KafketteBatchWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.options = dict(options)

    def write(self, iterator: Iterator[Any]) -> KafkaWriteMessage:
        return fail_first_attempts(super().write, iterator, self.options)


class FailingStreamWriter(KafketteStreamWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.options = dict(options)

    def write(self, iterator: Iterator[Any]) -> KafkaWriteMessage:
        return fail_first_attempts(super().write, iterator, self.options)


class FailingDataSource(DataSource):
    """The ``kafkette`` writers, failing their first attempts."""

    @classmethod
    def name(cls) -> str:
        return FAILING_FORMAT

    def schema(self) -> str:
        return "value binary"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return FailingBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return FailingStreamWriter(self.options, schema)


class FailingSink(KafkaSink):
    format_name = FAILING_FORMAT

    def __init__(self, bootstrap: str, topic: str, exactly_once: bool, failures: str) -> None:
        # two transactions for a file's 6 lines, sized from the batch in every attempt
        super().__init__(bootstrap, topic, exactly_once=exactly_once, rows_per_transaction=3)
        self.failures = failures

    def options(self, batch_id: int) -> dict[str, str]:
        return {**super().options(batch_id), "failures": self.failures}


def start(spark: SparkSession, bootstrap: str, job: str, work: str) -> Any:
    """Start the query ``job`` (``mode:topic:exactly|at-least``): input ``work/topic/in``."""
    mode, topic, guarantee = job.split(":")
    exactly_once = guarantee == "exactly"
    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(f"{work}/{topic}/in")
    if mode == "sink":
        writer = lines.writeStream.foreachBatch(
            FailingSink(bootstrap, topic, exactly_once, failures=work)
        )
    else:
        writer = (
            lines.repartition(2, "value")
            .writeStream.format(FAILING_FORMAT)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", str(exactly_once).lower())
            .option("failures", work)
        )
    return (
        writer.option("checkpointLocation", f"{work}/{topic}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--work", required=True, help="a directory with TOPIC/in/*.txt")
    parser.add_argument("jobs", nargs="+", help="mode:topic:guarantee, mode sink or stream")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2,3]")
        .appName("kafkette-exactly-once")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    spark.dataSource.register(FailingDataSource)
    for job in args.jobs:  # one after the other: each has failures of its own to retry
        query = start(spark, args.bootstrap, job, args.work)
        query.awaitTermination()
        print(f"{job} batches {query.lastProgress['batchId'] + 1}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
