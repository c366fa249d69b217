"""Reading one offset range on an executor: a kafkette Consumer, assign and seek, no group.

Runs in Spark's Python worker processes: everything comes from the pickled
:class:`~kafkette.spark_integration.options.ReaderOptions` and the
:class:`~kafkette.spark_integration.planning.OffsetRange`; the consumer is
opened here and closed when the range is read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from kafkette.consumer import Consumer
from kafkette.errors import CorruptMessageError, OffsetOutOfRangeError
from kafkette.protocol.errors import ProtocolError
from kafkette.spark_integration.arrow_records import ArrowBatchBuilder
from kafkette.spark_integration.options import ReaderOptions
from kafkette.spark_integration.planning import OffsetRange

logger = logging.getLogger(__name__)

ARROW_BATCH_RECORDS = 20_000
"""Records per Arrow batch handed to Spark (fewer, larger batches are cheaper)."""
ARROW_BATCH_BYTES = 64 << 20
"""Key, value and header bytes after which an Arrow batch is handed over anyway (Arrow's
binary columns hold under 2 GiB; one Kafka batch decompresses to 256 MiB at most)."""

_DATA_LOSS = (
    "Some data may have been lost because they are not available in Kafka any more; "
    "either the data was aged out by Kafka or the topic may have been deleted before all the "
    "data in the topic was processed. If you don't want your streaming query to fail on such "
    "cases, set the source option failOnDataLoss to false. Reason: "
)


class KafkaDataLossError(RuntimeError):
    """Offsets a query must read are gone (retention, a recreated topic): Spark's
    ``KAFKA_DATA_LOSS``; raised only with ``failOnDataLoss`` true (the default)."""


def data_loss(reason: str, fail: bool) -> None:
    """Raise :class:`KafkaDataLossError`, or log a warning when ``failOnDataLoss`` is false."""
    if fail:
        raise KafkaDataLossError(_DATA_LOSS + reason)
    logger.warning("%s (failOnDataLoss=false: skipped)", reason)


class KafkaInputPartition(InputPartition):
    """One Spark task's work: an offset range of one Kafka partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range

    def __repr__(self) -> str:
        r = self.range
        return f"KafkaInputPartition({r.tp} [{r.start}, {r.end}))"


def consumer_settings(client: dict[str, str]) -> dict[str, str]:
    """The executor consumer's settings: the user's, without a group, committing nothing,
    never resetting by itself (a missing offset is data loss, decided here)."""
    settings = {k: v for k, v in client.items() if k not in ("group.id", "group.instance.id")}
    settings["enable.auto.commit"] = "false"
    settings["auto.offset.reset"] = "none"
    return settings


def read_range(
    client: dict[str, str],
    offset_range: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[Any]:
    """Arrow record batches of every record in ``[start, end)`` of the range's partition.

    The consumer hands out whole fetched batches (:meth:`Consumer.poll_batches`)
    and their records are decoded straight into Arrow buffers
    (:class:`ArrowBatchBuilder`), ``ARROW_BATCH_RECORDS`` at a time: no Python
    object per record. With read_committed the range ends at (or before) the
    last stable offset, and aborted records and transaction markers are offsets
    with no record: the read ends when the consumer's position reaches ``end``,
    records or not.
    """
    tp, end = offset_range.tp, offset_range.end
    if offset_range.size <= 0:
        return
    consumer = Consumer(consumer_settings(client))
    builder = ArrowBatchBuilder(tp, include_headers)
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset_range.start)
        position = offset_range.start
        idle_since = time.monotonic()
        while position < end:
            try:
                polled = consumer.poll_batches(timeout_ms=200, max_offsets=ARROW_BATCH_RECORDS)
            except OffsetOutOfRangeError:
                earliest = consumer.beginning_offsets([tp])[tp]
                data_loss(
                    f"Could not read records in offset [{position}, {end}) for topic partition "
                    f"{tp}: the partition now starts at {earliest}.",
                    fail_on_data_loss,
                )
                if earliest >= end or earliest <= position:
                    break
                position = earliest
                consumer.seek(tp, position)
                continue
            fetched = polled.get(tp)
            if fetched:
                for batch, first in fetched:
                    try:
                        builder.append(batch, first, end)
                    except ProtocolError as exc:
                        raise CorruptMessageError(
                            f"{tp} batch at offset {batch.base_offset}: {exc}"
                        ) from exc
                    if (
                        len(builder) >= ARROW_BATCH_RECORDS
                        or builder.data_size >= ARROW_BATCH_BYTES
                    ):
                        yield builder.finish()
                position = fetched[-1].batch.next_offset
                idle_since = time.monotonic()
                continue
            moved = consumer.position(tp)
            if moved > position:
                position = moved  # past aborted records or transaction markers
                idle_since = time.monotonic()
            elif (time.monotonic() - idle_since) * 1000 > poll_timeout_ms:
                raise TimeoutError(
                    f"Cannot fetch record for offset {position} of {tp} in "
                    f"{poll_timeout_ms} milliseconds"
                )
        if len(builder):
            yield builder.finish()
    finally:
        consumer.close()


def read_partition(options: ReaderOptions, partition: InputPartition) -> Iterator[Any]:
    """What a reader's ``read(partition)`` yields: the Arrow batches of its offset range.

    Spark calls ``read`` with a stand-in partition when planning found nothing
    to read; that yields nothing. With ``valueFormat=avro`` the values are
    decoded (:class:`~kafkette.spark_integration.avro.values.ValueDecoder`).
    """
    if not isinstance(partition, KafkaInputPartition):
        return
    batches = read_range(
        options.client,
        partition.range,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
    )
    if options.value_avro is None:
        yield from batches
        return
    from kafkette.spark_integration.avro.values import ValueDecoder

    decoder = ValueDecoder(options.value_avro, options.include_headers)
    try:
        for batch in batches:
            yield decoder.decode(batch)
    finally:
        decoder.close()
