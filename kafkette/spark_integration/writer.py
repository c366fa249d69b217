"""The data source's writers: ``df.write`` and ``df.writeStream`` to Kafka.

Spark builds a writer on the driver (in a Python worker), pickles it and calls
``write(batches)`` in one task per Spark partition with that partition's rows
as Arrow record batches. Each task opens its own producer (idempotent), sends
every row, flushes and closes it; a record that fails fails the task, so Spark
retries it (at least once). With ``exactlyOnce=true`` each task writes in a
Kafka transaction instead (:mod:`.exactly_once`).

Options (keys arrive lower-cased): ``kafka.bootstrap.servers`` and any other
``kafka.*`` producer setting; ``topic`` (overrides the ``topic`` column);
``exactlyOnce``; ``transactionalIdPrefix`` (default ``kafkette-spark-`` + the
streaming query id); ``markerTopic`` (the topic holding the exactly-once
markers, default the ``topic`` option); ``batchId`` (set by
:class:`~kafkette.spark_integration.sink.KafkaSink`: the micro-batch of a
``foreachBatch`` write); ``valueFormat=avro`` with its registry options
(:mod:`.avro.options`): the ``value`` column encoded in Confluent's framing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kafkette.spark_integration.avro.options import AvroValues, avro_request, writer_schema
from kafkette.spark_integration.avro.types import check_writable
from kafkette.spark_integration.exactly_once import (
    KafketteSession,
    PartitionPlan,
    Record,
    write_partition,
)
from kafkette.spark_integration.options import kafka_client_settings
from kafkette.spark_integration.sink_columns import SinkColumns

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
DEFAULT_PREFIX = "kafkette-spark-"
_CHECK_EVERY = 10_000  # records between looks at the delivery results while sending


def _flag(options: Mapping[str, str], name: str) -> bool:
    text = options.get(name, "false").strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"option '{name}' must be true or false, got {text!r}")
    return text == "true"


@attrs.frozen
class WriteOptions:
    """The writer's options, checked on the driver (so a mistake fails the query, not a task)."""

    producer_settings: dict[str, str]
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str | None
    marker_topic: str | None
    batch_id: int | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Read the (lower-cased) data source options; ValueError with Spark's message if wrong."""
        lowered = {k.lower(): v for k, v in options.items()}
        settings = kafka_client_settings(lowered)
        if "bootstrap.servers" not in settings:
            raise ValueError(
                "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
            )
        topic = lowered.get("topic")
        exactly_once = _flag(lowered, "exactlyonce")
        marker_topic = lowered.get("markertopic", topic)
        if exactly_once and marker_topic is None:
            raise ValueError(
                "exactlyOnce=true needs the topic option, or the markerTopic option when the "
                "topic comes from the 'topic' column: partition 0 of that topic holds the "
                "exactly-once markers"
            )
        batch_text = lowered.get("batchid")
        return cls(
            producer_settings=settings,
            topic=topic,
            exactly_once=exactly_once,
            transactional_id_prefix=lowered.get("transactionalidprefix"),
            marker_topic=marker_topic,
            batch_id=None if batch_text is None else int(batch_text),
        )


@dataclasses.dataclass(frozen=True)
class KafkaWriteMessage(WriterCommitMessage):
    """What one task wrote: its Spark partition, its rows, and whether it skipped them
    (exactly once: an earlier attempt had committed this partition of this batch)."""

    partition: int
    rows: int
    skipped: bool = False


class _TaskWriter:
    """The work of ``write()`` in a task, shared by the batch and the streaming writer."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.write_options = WriteOptions.parse(options)
        request = avro_request(options, self.write_options.topic)
        self.columns = SinkColumns.check(
            schema, self.write_options.topic, any_value=request is not None
        )
        self.value_avro: AvroValues | None = None
        if request is not None:
            found = writer_schema(request)
            value_type = next(f.dataType for f in schema.fields if f.name == "value")
            check_writable(value_type, found.spark_type()[0])
            self.value_avro = AvroValues(request, found)

    def _records(self, batches: Iterator[Any]) -> Iterator[Record]:
        columns = self.columns
        if self.value_avro is None:
            for batch in batches:
                yield from columns.records(batch)
            return
        from kafkette.spark_integration.avro.values import ValueEncoder

        encoder = ValueEncoder(self.value_avro)
        for batch in batches:
            values = encoder.encode(batch.column(batch.schema.get_field_index(columns.value)))
            yield from columns.records(batch, values)

    def write_task(self, batches: Iterator[Any]) -> KafkaWriteMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        if self.write_options.exactly_once:
            return self._write_exactly_once(context, partition, batches)
        return KafkaWriteMessage(partition, self._write_at_least_once(batches))

    def _write_at_least_once(self, batches: Iterator[Any]) -> int:
        from kafkette import Producer

        records = self._records(batches)
        first = next(records, None)
        if first is None:
            return 0
        rows = 0
        producer = Producer(self.write_options.producer_settings)
        try:
            send = producer.send
            pending = []
            topic, value, key, headers, partition, timestamp = first
            pending.append(send(topic, value, key, headers, partition, timestamp))
            rows = 1
            for topic, value, key, headers, partition, timestamp in records:
                pending.append(send(topic, value, key, headers, partition, timestamp))
                rows += 1
                if len(pending) >= _CHECK_EVERY:
                    pending = _unfinished(pending)
            producer.flush()
            _unfinished(pending)
        finally:
            producer.close()
        return rows

    def _write_exactly_once(
        self, context: Any, partition: int, batches: Iterator[Any]
    ) -> KafkaWriteMessage:
        options = self.write_options
        query = None if context is None else context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_text = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
        batch = options.batch_id if options.batch_id is not None else batch_text
        if query is None or batch is None:
            raise ValueError(
                "exactlyOnce=true writes the micro-batches of a streaming query (writeStream, "
                "or KafkaSink in foreachBatch): this task has no streaming query id or batch id"
            )
        prefix = options.transactional_id_prefix or DEFAULT_PREFIX + query
        transactional_id = f"{prefix}-{partition}"
        plan = PartitionPlan(query, int(batch), transactional_id)
        assert options.marker_topic is not None
        session = KafketteSession(options.producer_settings, transactional_id, options.marker_topic)
        try:
            outcome = write_partition(session, plan, self._records(batches))
        finally:
            session.close()
        return KafkaWriteMessage(partition, outcome.rows, skipped=not outcome.written)


def _unfinished(futures: list[Any]) -> list[Any]:
    """The futures not done yet; raises the error of the first failed one."""
    left = []
    for future in futures:
        if not future.done():
            left.append(future)
            continue
        error = future.exception(0)
        if error is not None:
            raise error
    return left


class KafketteBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafkette")``: each task sends its partition's rows to Kafka."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._task = _TaskWriter(options, schema)

    def write(self, iterator: Iterator[Any]) -> KafkaWriteMessage:
        """Send the task's rows (Arrow record batches); returns how many were sent."""
        return self._task.write_task(iterator)


class KafketteStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkette")``: each micro-batch's tasks send their rows
    (in transactions with ``exactlyOnce=true``)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._task = _TaskWriter(options, schema)

    def write(self, iterator: Iterator[Any]) -> KafkaWriteMessage:
        """Send the task's rows of this micro-batch; returns how many were sent."""
        return self._task.write_task(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: each task has delivered (or committed) its rows already."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: delivered records stay (at least once), open transactions
        were aborted by their task or are by the next attempt's ``init_transactions``."""
