"""KafkaSink: write each micro-batch of a streaming query to Kafka from ``foreachBatch``.

::

    query = (
        events.writeStream.foreachBatch(KafkaSink("broker:9092", "results"))
        .option("checkpointLocation", "/checkpoints/results")
        .start()
    )

Exactly once by default (see :mod:`kafkette.spark_integration.exactly_once`):
readers of the output topic must read with ``isolation.level=read_committed``,
and each Spark partition of a batch must be written within
``transaction.timeout.ms``. The batch is repartitioned by a hash of its sink
columns into ``num_partitions`` partitions (default
``spark.sql.shuffle.partitions``, which the checkpoint fixes), so that a batch
run again (a task retry, a restart after a crash) has the same rows in each
partition. It writes through the ``kafkette`` data source: no RDD API and no
pandas, so it also runs under Spark Connect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SINK_COLUMNS = ("topic", "key", "value", "headers", "partition", "timestamp")


class KafkaSink:
    """A picklable ``foreachBatch`` function writing each micro-batch to Kafka.

    ``topic``: the output topic (else each row's ``topic`` column);
    ``transactional_id_prefix``: default ``kafkette-spark-`` + the query id;
    ``producer_config``: more producer settings (Kafka names, without the
    ``kafka.`` prefix); ``marker_topic``: where the exactly-once markers go
    (partition 0), needed only when ``topic`` is not given.
    """

    format_name = "kafkette"
    """The data source written through (tests substitute one that injects failures)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str | None = None,
        *,
        exactly_once: bool = True,
        transactional_id_prefix: str | None = None,
        num_partitions: int | None = None,
        producer_config: Mapping[str, Any] | None = None,
        marker_topic: str | None = None,
    ) -> None:
        if not isinstance(bootstrap_servers, str):
            bootstrap_servers = ",".join(bootstrap_servers)
        if num_partitions is not None and num_partitions < 1:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        if exactly_once and topic is None and marker_topic is None:
            raise ValueError(
                "an exactly-once KafkaSink without a topic (rows carry their own in a 'topic' "
                "column) needs marker_topic: partition 0 of that topic holds the markers"
            )
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.exactly_once = exactly_once
        self.transactional_id_prefix = transactional_id_prefix
        self.num_partitions = num_partitions
        self.producer_config = {k: str(v) for k, v in (producer_config or {}).items()}
        self.marker_topic = marker_topic

    def options(self, batch_id: int) -> dict[str, str]:
        """The data source options the batch ``batch_id`` is written with."""
        options = {f"kafka.{k}": v for k, v in self.producer_config.items()}
        options["kafka.bootstrap.servers"] = self.bootstrap_servers
        if self.topic is not None:
            options["topic"] = self.topic
        if self.exactly_once:
            options["exactlyOnce"] = "true"
            options["batchId"] = str(batch_id)
            if self.transactional_id_prefix is not None:
                options["transactionalIdPrefix"] = self.transactional_id_prefix
            if self.marker_topic is not None:
                options["markerTopic"] = self.marker_topic
        return options

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Write ``batch_df``, the micro-batch ``batch_id`` (called by Spark)."""
        partitions = self.num_partitions or int(
            batch_df.sparkSession.conf.get("spark.sql.shuffle.partitions")
        )
        hashed = [batch_df[c] for c in batch_df.columns if c in SINK_COLUMNS]
        (
            batch_df.repartition(partitions, *hashed)
            .write.format(self.format_name)
            .mode("append")
            .options(**self.options(batch_id))
            .save()
        )
