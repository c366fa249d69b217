"""OpenTelemetry traces and metrics for the producer and the consumer (extra ``otel``).

Off unless a client is given a ``tracer_provider`` or a ``meter_provider``, or
``opentelemetry=True`` (the global providers): then its core builds a
:class:`~kafkette.otel.producer.ProducerTelemetry` or
:class:`~kafkette.otel.consumer.ConsumerTelemetry` through the functions below,
and calls it at its hook points (a send, its acknowledgement, a poll that returns
records, a commit, the records of ``for record in consumer``). When off, nothing
here is imported and the cores do no per-record work for it.

What is recorded follows OpenTelemetry's messaging semantic conventions for Kafka
(docs/observability.md lists every span, attribute and metric):

- ``send {topic}`` (PRODUCER) per record, from ``send`` to its acknowledgement; its
  context goes into the record's ``traceparent``/``tracestate`` headers (W3C);
- ``poll {topic}`` (CLIENT, operation type ``receive``) per poll that returns
  records, linked to each record's creation context read from its headers;
- ``process {topic}`` (CONSUMER) per record handed out by iterating the consumer;
- ``commit {topic}`` (CLIENT, operation type ``settle``) per ``commit()``;
- the metrics ``messaging.client.operation.duration``,
  ``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
  ``messaging.process.duration`` and ``messaging.kafka.consumer.lag`` (a gauge per
  assigned partition).

Modules: :mod:`.attributes` (the conventions' names), :mod:`.carrier` (record headers
as a propagation carrier), :mod:`.instruments` (tracer, meter and instruments from
the configuration), :mod:`.producer`, :mod:`.consumer`, :mod:`.lag` (the lag gauge).
This package imports nothing of the clients at run time: the cores import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.errors import ConfigError

if TYPE_CHECKING:
    from kafkette.client.config import ConsumerConfig, ProducerConfig
    from kafkette.otel.consumer import ConsumerTelemetry
    from kafkette.otel.producer import ProducerTelemetry

EXTRA_HINT = "OpenTelemetry's API is not installed: pip install kafkette[otel]"


def producer_telemetry(config: ProducerConfig) -> ProducerTelemetry:
    """The producer's telemetry; ConfigError when OpenTelemetry's API is missing."""
    try:
        from kafkette.otel.producer import ProducerTelemetry
    except ImportError as exc:
        raise ConfigError("opentelemetry.enabled", EXTRA_HINT) from exc
    return ProducerTelemetry(config)


def consumer_telemetry(config: ConsumerConfig) -> ConsumerTelemetry:
    """The consumer's telemetry; ConfigError when OpenTelemetry's API is missing."""
    try:
        from kafkette.otel.consumer import ConsumerTelemetry
    except ImportError as exc:
        raise ConfigError("opentelemetry.enabled", EXTRA_HINT) from exc
    return ConsumerTelemetry(config)
