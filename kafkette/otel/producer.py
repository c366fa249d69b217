"""The producer's telemetry: a ``send {topic}`` span per record and the send metrics.

:meth:`ProducerTelemetry.start_send` runs in ``send`` (the caller's thread or task, so the
span's parent is the caller's current span): it starts the span and puts its context
into the record's headers, unless the caller put a ``traceparent`` there already (the
conventions' "custom creation context": kept, and linked). The returned
:class:`SendTrace` is the record's delivery callback: the acknowledgement (in the
producer's event loop thread) ends the span with the partition and offset, or the error
(with the partition when one was chosen before the failure: the producer sets
:attr:`SendTrace.partition` once it picks one).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from kafkette.otel import attributes as a
from kafkette.otel.carrier import GETTER, SETTER
from kafkette.otel.instruments import Instruments

if TYPE_CHECKING:
    from kafkette.client.config import ProducerConfig
    from kafkette.producer.futures import DeliveryCallback, RecordMetadata


class SendTrace:
    """One record on its way: its span and start time; called as ``on_delivery``."""

    __slots__ = (
        "_done",
        "_owner",
        "headers",
        "partition",
        "span",
        "start_ns",
        "topic",
        "user_callback",
    )

    def __init__(
        self,
        owner: ProducerTelemetry,
        topic: str,
        headers: list[tuple[str, Any]] | Any,
        span: trace.Span | None,
        user_callback: DeliveryCallback | None,
    ) -> None:
        self._owner = owner
        self._done = False
        self.topic = topic
        self.headers = headers
        """The record's headers, with the trace context in them."""
        self.span = span
        self.start_ns = time.time_ns()
        self.user_callback = user_callback
        self.partition: int | None = None
        """The partition chosen for the record, once it is: a failed send's span and
        metrics carry it too (the delivery callback gives no metadata on failure)."""

    def __call__(self, error: BaseException | None, metadata: RecordMetadata | None) -> None:
        self.finish(error, metadata)
        if self.user_callback is not None:
            self.user_callback(error, metadata)

    def abandon(self, error: BaseException) -> None:
        """The send raised before the record was queued: end the span with ``error``."""
        self.finish(error, None)

    def finish(self, error: BaseException | None, metadata: RecordMetadata | None) -> None:
        if self._done:
            return
        self._done = True
        self._owner.finished(self, error, metadata)

    def __repr__(self) -> str:
        return repr(self.user_callback) if self.user_callback is not None else "<SendTrace>"


class ProducerTelemetry:
    """What one producer records; built by its core when OpenTelemetry is on."""

    def __init__(self, config: ProducerConfig) -> None:
        self.instruments = Instruments(config)
        self.span_attributes: dict[str, Any] = {
            a.SYSTEM: a.KAFKA,
            a.OPERATION_NAME: "send",
            a.OPERATION_TYPE: "send",
            a.CLIENT_ID: config.client_id,
            **a.server_attributes(config.bootstrap_servers),
        }

    def start_send(
        self, topic: str, key: Any, value: Any, headers: Any, on_delivery: DeliveryCallback | None
    ) -> SendTrace:
        """A record's send begins: its span (child of the current span) and its headers."""
        carrier: list[tuple[str, Any]] = (
            list(headers.items()) if isinstance(headers, Mapping) else list(headers or ())
        )
        tracer = self.instruments.tracer
        span = None
        if tracer is not None:
            attributes = {**self.span_attributes, a.DESTINATION: topic}
            key_text = a.key_text(key)
            if key_text is not None:
                attributes[a.KEY] = key_text
            if value is None:
                attributes[a.TOMBSTONE] = True
            given = _span_context(carrier)
            links = [Link(given)] if given is not None else None
            span = tracer.start_span(
                f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes, links=links
            )
            if given is None:
                propagate.inject(carrier, context=trace.set_span_in_context(span), setter=SETTER)
        return SendTrace(self, topic, carrier, span, on_delivery)

    def finished(
        self, send: SendTrace, error: BaseException | None, metadata: RecordMetadata | None
    ) -> None:
        """A record was acknowledged (``metadata``) or failed (``error``)."""
        end_ns = time.time_ns()
        labels: dict[str, Any] = {
            a.SYSTEM: a.KAFKA,
            a.DESTINATION: send.topic,
            a.OPERATION_NAME: "send",
        }
        partition = metadata.partition if metadata is not None else send.partition
        if partition is not None:
            labels[a.PARTITION] = str(partition)
        if error is not None:
            labels[a.ERROR_TYPE] = a.error_type(error)
        span = send.span
        if span is not None:
            if partition is not None:
                span.set_attribute(a.PARTITION, str(partition))
            if metadata is not None and metadata.offset >= 0:
                span.set_attribute(a.OFFSET, metadata.offset)
            if error is not None:
                span.set_attribute(a.ERROR_TYPE, labels[a.ERROR_TYPE])
                span.record_exception(error, timestamp=end_ns)
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end(end_ns)
        instruments = self.instruments
        if instruments.sent is not None:
            instruments.sent.add(1, labels)
        if instruments.duration is not None:
            labels[a.OPERATION_TYPE] = "send"
            instruments.duration.record((end_ns - send.start_ns) / 1e9, labels)


def _span_context(carrier: list[tuple[str, Any]]) -> trace.SpanContext | None:
    """The trace context the caller put in the headers already, if any."""
    if not any(name == "traceparent" for name, _ in carrier):
        return None
    context = trace.get_current_span(propagate.extract(carrier, getter=GETTER)).get_span_context()
    return context if context.is_valid else None
