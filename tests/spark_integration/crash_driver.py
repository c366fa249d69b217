"""A Spark driver killed with ``kill -9`` mid-batch by the exactly-once crash test.

It runs three streaming queries at once, each streaming the text files of
``WORK/TOPIC/in`` (one file per micro-batch) to ``TOPIC`` through
:class:`KafkaSink`:

- ``after``: exactly once; in batch 1, once its write has returned (every
  transaction committed) and before Spark records the batch as done;
- ``before``: exactly once; in batch 1, in the task of Spark partition 0,
  after its rows were sent and before its transaction commits;
- ``control``: at least once; at the same point as ``after``.

With ``--crash``, each query stops at its point, writes ``WORK/ready-NAME`` and
waits; the test kills the driver's process group when all three are ready,
then runs this driver again without ``--crash`` from the same checkpoints.

Run as ``python -m tests.spark_integration.crash_driver`` (this module is
``__main__``, so Spark pickles its classes by value).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceWriter
from pyspark.sql.types import StructType

from kafkette.spark_integration.sink import KafkaSink
from kafkette.spark_integration.writer import KafkaWriteMessage, KafketteBatchWriter

PAUSING_FORMAT = "kafkette_pauses"
CRASH_BATCH = 1
WAIT_LIMIT_S = 300.0


def wait_to_be_killed(ready: Path) -> None:
    """Say we are at the crash point, then wait for the kill (or for our parent to go)."""
    ready.write_text(str(os.getpid()))
    parent = os.getppid()
    deadline = time.monotonic() + WAIT_LIMIT_S
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.1)
    os._exit(9)


class PausingWriter(KafketteBatchWriter):
    """Pauses partition 0 of batch ``CRASH_BATCH`` after its sends, before its commit."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.ready = options.get("pauseready")
        self.batch = int(options["batchid"])

    def write(self, iterator: Iterator[Any]) -> KafkaWriteMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        pause = (
            self.ready is not None
            and self.batch == CRASH_BATCH
            and context is not None
            and context.partitionId() == 0
        )
        if not pause:
            return super().write(iterator)
        ready = Path(str(self.ready))

        def pause_after_the_rows() -> Iterator[Any]:
            yield from iterator
            time.sleep(0.5)  # the producer sends what it has: a transaction left open
            wait_to_be_killed(ready)

        return super().write(pause_after_the_rows())


class PausingDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return PAUSING_FORMAT

    def schema(self) -> str:
        return "value binary"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PausingWriter(self.options, schema)


class CrashingSink(KafkaSink):
    """``KafkaSink`` stopping at this query's crash point (with ``ready`` set)."""

    format_name = PAUSING_FORMAT

    def __init__(
        self, bootstrap: str, topic: str, point: str, ready: str | None, exactly_once: bool
    ) -> None:
        # two transactions for a file's 6 lines, sized from the batch again when the
        # restart replays it: partition 1's commits while partition 0's stays open
        super().__init__(bootstrap, topic, exactly_once=exactly_once, rows_per_transaction=3)
        self.point = point
        self.ready = ready

    def options(self, batch_id: int) -> dict[str, str]:
        options = super().options(batch_id)
        options["batchId"] = str(batch_id)
        if self.ready is not None and self.point == "before":
            options["pauseReady"] = self.ready
        return options

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        super().__call__(batch_df, batch_id)
        if self.ready is not None and self.point == "after" and batch_id == CRASH_BATCH:
            wait_to_be_killed(Path(self.ready))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--crash", action="store_true")
    parser.add_argument("queries", nargs="+", help="NAME:TOPIC, NAME after, before or control")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[4]")
        .appName("kafkette-crash")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    spark.dataSource.register(PausingDataSource)
    queries = []
    for spec in args.queries:
        name, topic = spec.split(":")
        ready = f"{args.work}/ready-{name}" if args.crash else None
        sink = CrashingSink(
            args.bootstrap,
            topic,
            "after" if name == "control" else name,
            ready,
            exactly_once=name != "control",
        )
        lines = spark.readStream.option("maxFilesPerTrigger", 1).text(f"{args.work}/{topic}/in")
        query = (
            lines.writeStream.foreachBatch(sink)
            .option("checkpointLocation", f"{args.work}/{topic}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        queries.append((name, query))
    for name, query in queries:
        query.awaitTermination()
        print(f"{name} batches {query.lastProgress['batchId'] + 1}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
