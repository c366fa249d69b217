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
``transaction.timeout.ms``. Each Spark partition with rows is one transaction
(and one marker group), so the batch is repartitioned by a hash of its sink
columns into as many partitions as its size needs (:func:`writers_needed`: one
per ``rows_per_transaction`` rows or ``bytes_per_transaction`` bytes of keys
and values, at most ``spark.sql.shuffle.partitions``, which the checkpoint
fixes), or into ``num_partitions`` when given. Sizing is one more Spark job
over the batch (its rows and bytes counted); a batch run again (a task retry,
a restart after a crash) has the same rows, so the same size and the same
rows in each partition. It writes through the ``kafkette`` data source: no
RDD API and no pandas, so it also runs under Spark Connect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SINK_COLUMNS = ("topic", "key", "value", "headers", "partition", "timestamp")
ROWS_PER_TRANSACTION = 100_000
"""Default ``rows_per_transaction``."""
BYTES_PER_TRANSACTION = 64 * 1024 * 1024
"""Default ``bytes_per_transaction`` (64 MiB of keys and values)."""


def writers_needed(
    rows: int,
    size: int,
    *,
    rows_per_transaction: int = ROWS_PER_TRANSACTION,
    bytes_per_transaction: int = BYTES_PER_TRANSACTION,
    most: int,
) -> int:
    """How many partitions (so transactions) a batch of ``rows`` rows with ``size``
    bytes of keys and values is written in: enough for about ``rows_per_transaction``
    rows and ``bytes_per_transaction`` bytes each at most (as evenly as a hash spreads
    them), at least 1, at most ``most``."""
    needed = max(-(-rows // rows_per_transaction), -(-size // bytes_per_transaction), 1)
    return min(needed, most)


class KafkaSink:
    """A picklable ``foreachBatch`` function writing each micro-batch to Kafka.

    ``topic``: the output topic (else each row's ``topic`` column);
    ``transactional_id_prefix``: default ``kafkette-spark-`` + the query id;
    ``num_partitions``: write each batch in this many Spark partitions (one
    transaction each), instead of as many as its size needs:
    ``rows_per_transaction`` rows or ``bytes_per_transaction`` bytes of keys and
    values each (about; at most ``spark.sql.shuffle.partitions``). Keep these
    three as they were when restarting a query that stopped in the middle of a
    batch: the batch's rows must go to the same partitions again.
    ``producer_config``: more producer settings (Kafka names, without the
    ``kafka.`` prefix); ``marker_topic``: where the exactly-once markers go
    (partition 0), needed only when ``topic`` is not given.

    ``value_format="avro"`` writes the ``value`` column (a struct, or any type the
    schema has) as registry-framed Avro: ``schema_registry`` is the registry's URL
    or confluent-kafka's configuration dict; ``value_schema`` (Avro JSON) is
    registered under ``value_subject`` (default ``TOPIC-value``), else the
    subject's latest schema is used.
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
        rows_per_transaction: int = ROWS_PER_TRANSACTION,
        bytes_per_transaction: int = BYTES_PER_TRANSACTION,
        producer_config: Mapping[str, Any] | None = None,
        marker_topic: str | None = None,
        value_format: str = "binary",
        schema_registry: str | Mapping[str, Any] | None = None,
        value_schema: str | None = None,
        value_subject: str | None = None,
    ) -> None:
        if not isinstance(bootstrap_servers, str):
            bootstrap_servers = ",".join(bootstrap_servers)
        for name, number in (
            ("num_partitions", num_partitions),
            ("rows_per_transaction", rows_per_transaction),
            ("bytes_per_transaction", bytes_per_transaction),
        ):
            if number is not None and number < 1:
                raise ValueError(f"{name} must be positive, got {number}")
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
        self.rows_per_transaction = rows_per_transaction
        self.bytes_per_transaction = bytes_per_transaction
        self.producer_config = {k: str(v) for k, v in (producer_config or {}).items()}
        self.marker_topic = marker_topic
        self.avro_options = _avro_options(
            value_format, schema_registry, value_schema, value_subject
        )

    def options(self, batch_id: int) -> dict[str, str]:
        """The data source options the batch ``batch_id`` is written with."""
        options = {f"kafka.{k}": v for k, v in self.producer_config.items()}
        options.update(self.avro_options)
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

    def partitions_for(self, batch_df: Any) -> int:
        """How many Spark partitions (transactions) ``batch_df`` is written in:
        ``num_partitions``, else :func:`writers_needed` for its rows and bytes (a
        Spark job counting them)."""
        if self.num_partitions is not None:
            return self.num_partitions
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StringType

        # a key or value of another type is left to the writer, which refuses it with
        # Spark's message
        sizes = [
            F.coalesce(F.octet_length(batch_df[f.name]), F.lit(0))
            for f in batch_df.schema.fields
            if f.name in ("key", "value") and isinstance(f.dataType, (StringType, BinaryType))
        ]
        size = sum(sizes[1:], sizes[0]) if sizes else F.lit(0)
        counted = batch_df.agg(F.count(F.lit(1)), F.sum(size)).first()
        rows, value_bytes = (0, 0) if counted is None else (counted[0], counted[1] or 0)
        return writers_needed(
            int(rows),
            int(value_bytes),
            rows_per_transaction=self.rows_per_transaction,
            bytes_per_transaction=self.bytes_per_transaction,
            most=int(batch_df.sparkSession.conf.get("spark.sql.shuffle.partitions")),
        )

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Write ``batch_df``, the micro-batch ``batch_id`` (called by Spark)."""
        counted = self.num_partitions is None
        if counted:
            # the count and the write are two jobs: cached, the micro-batch is read from
            # its source once (and counted once in the query's numInputRows)
            batch_df = batch_df.persist()
        try:
            partitions = self.partitions_for(batch_df)
            hashed = [batch_df[c] for c in batch_df.columns if c in SINK_COLUMNS]
            (
                batch_df.repartition(partitions, *hashed)
                .write.format(self.format_name)
                .mode("append")
                .options(**self.options(batch_id))
                .save()
            )
        finally:
            if counted:
                batch_df.unpersist()


def _avro_options(
    value_format: str,
    schema_registry: str | Mapping[str, Any] | None,
    value_schema: str | None,
    value_subject: str | None,
) -> dict[str, str]:
    """KafkaSink's Avro arguments as the data source's options (checked now)."""
    if value_format not in ("binary", "avro"):
        raise ValueError(f"value_format must be 'binary' or 'avro', got {value_format!r}")
    if value_format == "binary":
        if schema_registry is not None or value_schema is not None or value_subject is not None:
            raise ValueError(
                "schema_registry, value_schema and value_subject go with value_format='avro'"
            )
        return {}
    if schema_registry is None:
        raise ValueError("value_format='avro' needs schema_registry (the registry's URL)")
    conf = (
        {"url": schema_registry}
        if isinstance(schema_registry, str)
        else {k.replace("_", "."): v for k, v in schema_registry.items()}
    )
    options = {f"schema.registry.{k}": str(v) for k, v in conf.items()}
    options["valueFormat"] = "avro"
    if value_schema is not None:
        options["avroSchema"] = value_schema
    if value_subject is not None:
        options["valueSubject"] = value_subject
    return options
