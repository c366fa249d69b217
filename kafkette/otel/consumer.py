"""The consumer's telemetry: poll, process and commit spans, and the consumer metrics.

- A poll that returns records is a ``poll {topic}`` span (CLIENT, operation type
  ``receive``; ``poll`` alone when the records come from several topics) from the call to
  its return, linked to each record's creation context read from its ``traceparent``
  header, with the record's topic, partition and offset on the link. A poll that returns
  nothing makes no span (the conventions' "MAY").
- Iterating the consumer hands out records one by one: each is a ``process {topic}`` span
  (CONSUMER), child of the span current when the iteration goes on and linked to the
  record's creation context, from the moment it is handed out to the request for the
  next one (or the end of the loop, or close). The sync iteration makes it the current
  span for the loop's body, so the application's spans are its children; the async one
  cannot (an ``async for`` left by ``break`` gives the task's context no way back).
- ``commit()``, ``commit_async()``, auto commits and the commit on close are each a
  ``commit {topic}`` span (CLIENT, operation type ``settle``); ``poll_batches`` makes
  ``poll {topic}`` spans as ``poll`` does (its records counted from the batch headers,
  unlinked: they are not parsed).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context, propagate, trace
from opentelemetry.metrics import Observation
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from kafkette.otel import attributes as a
from kafkette.otel import lag
from kafkette.otel.carrier import GETTER
from kafkette.otel.instruments import Instruments

if TYPE_CHECKING:
    from kafkette.client.config import ConsumerConfig
    from kafkette.consumer.fetch_buffer import FetchedBatch
    from kafkette.consumer.record import ConsumerRecord
    from kafkette.structs import OffsetAndMetadata, TopicPartition

T = TypeVar("T")
Step = TypeVar("Step")


class ConsumerTelemetry:
    """What one consumer records; built by its core when OpenTelemetry is on."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.instruments = Instruments(config)
        self.group = config.group_id
        common: dict[str, Any] = {a.SYSTEM: a.KAFKA}
        if self.group is not None:
            common[a.GROUP] = self.group
        self.metric_attributes = common
        """What every metric of this consumer carries."""
        self.span_attributes: dict[str, Any] = {
            **common,
            a.CLIENT_ID: config.client_id,
            **a.server_attributes(config.bootstrap_servers),
        }
        self._lag_reader: Callable[[], Mapping[TopicPartition, int]] | None = None
        self._processing: tuple[trace.Span | None, ConsumerRecord, int] | None = None

    # ---- poll

    def traced_poll(
        self, steps: Generator[Step, None, dict[TopicPartition, list[T]]]
    ) -> Generator[Step, None, dict[TopicPartition, list[T]]]:
        """A poll's steps, timed; its records, if any, make the poll span and metrics."""
        start_ns = time.time_ns()
        try:
            result = yield from steps
        except Exception as exc:
            self._receive_failed(start_ns, exc)
            raise
        if result:
            counts = {tp: len(taken) for tp, taken in result.items()}
            self._received(start_ns, counts, result)
        return result

    def traced_poll_batches(
        self, steps: Generator[Step, None, dict[TopicPartition, list[FetchedBatch]]]
    ) -> Generator[Step, None, dict[TopicPartition, list[FetchedBatch]]]:
        """``poll_batches``' steps, as :meth:`traced_poll`: the span and metrics count the
        batches' records from their positions on; no links (the records stay unparsed,
        so their creation contexts are not read)."""
        start_ns = time.time_ns()
        try:
            result = yield from steps
        except Exception as exc:
            self._receive_failed(start_ns, exc)
            raise
        if result:
            counts = {tp: sum(map(_batch_records, taken)) for tp, taken in result.items()}
            self._received(start_ns, counts, {})
        return result

    def _received(
        self,
        start_ns: int,
        counts: Mapping[TopicPartition, int],
        records: Mapping[TopicPartition, list[Any]],
    ) -> None:
        """A poll returned ``counts`` records per partition (``records``: those to link)."""
        end_ns = time.time_ns()
        topics = {tp.topic for tp in counts}
        topic = next(iter(topics)) if len(topics) == 1 else None
        instruments = self.instruments
        if instruments.consumed is not None:
            for tp, count in counts.items():
                instruments.consumed.add(
                    count,
                    {
                        **self.metric_attributes,
                        a.OPERATION_NAME: "poll",
                        a.DESTINATION: tp.topic,
                        a.PARTITION: str(tp.partition),
                    },
                )
        if instruments.duration is not None:
            labels = {
                **self.metric_attributes,
                a.OPERATION_NAME: "poll",
                a.OPERATION_TYPE: "receive",
            }
            if topic is not None:
                labels[a.DESTINATION] = topic
            instruments.duration.record((end_ns - start_ns) / 1e9, labels)
        tracer = instruments.tracer
        if tracer is None:
            return
        attributes = {
            **self.span_attributes,
            a.OPERATION_NAME: "poll",
            a.OPERATION_TYPE: "receive",
            a.BATCH_COUNT: sum(counts.values()),
        }
        if topic is not None:
            attributes[a.DESTINATION] = topic
        if len(counts) == 1:
            attributes[a.PARTITION] = str(next(iter(counts)).partition)
        links = []
        for taken in records.values():
            for record in taken:
                created = creation_context(record)
                if created is not None:
                    links.append(
                        Link(
                            created,
                            {
                                a.DESTINATION: record.topic,
                                a.PARTITION: str(record.partition),
                                a.OFFSET: record.offset,
                            },
                        )
                    )
        span = tracer.start_span(
            f"poll {topic}" if topic is not None else "poll",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            links=links,
            start_time=start_ns,
        )
        span.end(end_ns)

    def _receive_failed(self, start_ns: int, error: BaseException) -> None:
        end_ns = time.time_ns()
        kind = a.error_type(error)
        instruments = self.instruments
        if instruments.duration is not None:
            instruments.duration.record(
                (end_ns - start_ns) / 1e9,
                {
                    **self.metric_attributes,
                    a.OPERATION_NAME: "poll",
                    a.OPERATION_TYPE: "receive",
                    a.ERROR_TYPE: kind,
                },
            )
        if instruments.tracer is not None:
            span = instruments.tracer.start_span(
                "poll",
                kind=SpanKind.CLIENT,
                attributes={
                    **self.span_attributes,
                    a.OPERATION_NAME: "poll",
                    a.OPERATION_TYPE: "receive",
                    a.ERROR_TYPE: kind,
                },
                start_time=start_ns,
            )
            span.record_exception(error, timestamp=end_ns)
            span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end(end_ns)

    # ---- process

    def process_next(self, record: ConsumerRecord) -> trace.Span | None:
        """``record`` is handed to the application: the previous record's processing
        ends, this one's begins (its span returned, None without a tracer)."""
        self.process_end()
        tracer = self.instruments.tracer
        span = None
        if tracer is not None:
            attributes = {
                **self.span_attributes,
                a.OPERATION_NAME: "process",
                a.OPERATION_TYPE: "process",
                a.DESTINATION: record.topic,
                a.PARTITION: str(record.partition),
                a.OFFSET: record.offset,
            }
            key_text = a.key_text(record.key)
            if key_text is not None:
                attributes[a.KEY] = key_text
            if record.value is None:
                attributes[a.TOMBSTONE] = True
            created = creation_context(record)
            span = tracer.start_span(
                f"process {record.topic}",
                kind=SpanKind.CONSUMER,
                attributes=attributes,
                links=[Link(created)] if created is not None else None,
            )
        self._processing = (span, record, time.time_ns())
        return span

    def process_end(self) -> None:
        """The record handed out last is processed (the application asked for the next,
        left the loop, or closed the consumer)."""
        processing, self._processing = self._processing, None
        if processing is None:
            return
        span, record, start_ns = processing
        end_ns = time.time_ns()
        if span is not None:
            span.end(end_ns)
        histogram = self.instruments.process_duration
        if histogram is not None:
            histogram.record(
                (end_ns - start_ns) / 1e9,
                {
                    **self.metric_attributes,
                    a.OPERATION_NAME: "process",
                    a.DESTINATION: record.topic,
                    a.PARTITION: str(record.partition),
                },
            )

    def processing(self, next_record: Callable[[], ConsumerRecord]) -> Iterator[ConsumerRecord]:
        """The records of ``next_record()`` until it raises StopIteration (the sync
        consumer's iteration), each in its process span, made the current span while the
        loop's body runs."""
        try:
            while True:
                try:
                    record = next_record()
                except StopIteration:
                    return
                span = self.process_next(record)
                token = None if span is None else context.attach(trace.set_span_in_context(span))
                try:
                    yield record
                finally:
                    if token is not None:
                        context.detach(token)
                    self.process_end()
        finally:
            self.process_end()

    def processing_async(
        self, next_record: Callable[[], Awaitable[ConsumerRecord]]
    ) -> AsyncProcessing:
        """The records of ``await next_record()`` (the async consumer's iteration), each
        in its process span."""
        return AsyncProcessing(self, next_record)

    # ---- commit

    @contextlib.contextmanager
    def committing(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Iterator[None]:
        """A ``commit()`` of ``offsets``: its span (child of the current one: the sync
        consumer's blocking portal carries the caller's context into the event loop) and
        duration, and its error if it fails."""
        topics = {tp.topic for tp in offsets}
        topic = next(iter(topics)) if len(topics) == 1 else None
        attributes = {
            **self.span_attributes,
            a.OPERATION_NAME: "commit",
            a.OPERATION_TYPE: "settle",
        }
        if topic is not None:
            attributes[a.DESTINATION] = topic
        if len(offsets) == 1:
            attributes[a.PARTITION] = str(next(iter(offsets)).partition)
        tracer = self.instruments.tracer
        span = (
            None
            if tracer is None
            else tracer.start_span(
                f"commit {topic}" if topic is not None else "commit",
                kind=SpanKind.CLIENT,
                attributes=attributes,
            )
        )
        start_ns = time.time_ns()
        error: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            error = exc
            raise
        finally:
            end_ns = time.time_ns()
            labels = {
                **self.metric_attributes,
                a.OPERATION_NAME: "commit",
                a.OPERATION_TYPE: "settle",
            }
            if topic is not None:
                labels[a.DESTINATION] = topic
            if error is not None:
                labels[a.ERROR_TYPE] = a.error_type(error)
            if span is not None:
                if error is not None:
                    span.set_attribute(a.ERROR_TYPE, labels[a.ERROR_TYPE])
                    span.record_exception(error, timestamp=end_ns)
                    span.set_status(Status(StatusCode.ERROR, str(error)))
                span.end(end_ns)
            if self.instruments.duration is not None:
                self.instruments.duration.record((end_ns - start_ns) / 1e9, labels)

    # ---- lag

    def watch_lag(self, reader: Callable[[], Mapping[TopicPartition, int]]) -> None:
        """Report ``reader()`` (lag per assigned partition) on the lag gauge."""
        meter = self.instruments.meter
        if meter is None:
            return
        self._lag_reader = reader
        lag.watch(meter, self)

    def lag_observations(self) -> list[Observation]:
        reader = self._lag_reader
        if reader is None:
            return []
        return [
            Observation(
                value,
                {**self.metric_attributes, a.DESTINATION: tp.topic, a.PARTITION: str(tp.partition)},
            )
            for tp, value in sorted(reader().items())
        ]

    def close(self) -> None:
        """The consumer closed: the record being processed is done; no more lag."""
        self.process_end()
        self._lag_reader = None


class AsyncProcessing:
    """The async iteration of a consumer, each record in its process span."""

    def __init__(
        self, telemetry: ConsumerTelemetry, next_record: Callable[[], Awaitable[ConsumerRecord]]
    ) -> None:
        self._telemetry = telemetry
        self._next_record = next_record

    def __aiter__(self) -> AsyncProcessing:
        return self

    async def __anext__(self) -> ConsumerRecord:
        self._telemetry.process_end()
        record = await self._next_record()
        self._telemetry.process_next(record)
        return record


def _batch_records(fetched: FetchedBatch) -> int:
    """The records of a handed-out batch from its position on (compaction may have left
    gaps in its offsets: never more than the header declares)."""
    batch = fetched.batch
    count = len(batch)
    if fetched.position > batch.base_offset:
        count = min(count, batch.next_offset - fetched.position)
    return count


def creation_context(record: ConsumerRecord) -> trace.SpanContext | None:
    """The creation context a producer put in ``record``'s headers, if any."""
    headers = record.headers
    if not headers:
        return None
    found = trace.get_current_span(propagate.extract(headers, getter=GETTER)).get_span_context()
    return found if found.is_valid else None
