"""The tracer, the meter and the metric instruments a client's settings ask for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from kafkette._version import __version__
from kafkette.otel import attributes as a

if TYPE_CHECKING:
    from kafkette.client.config import ConsumerConfig, ProducerConfig

SCOPE = "kafkette"
"""The instrumentation scope's name: every span and metric of the clients is under it."""
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
"""The semantic conventions' version whose names we emit."""


class Instruments:
    """What a client records with: ``tracer`` (None: no spans) and the metric
    instruments (None each: no metrics), from ``tracer_provider``, ``meter_provider``
    and ``opentelemetry`` (the global providers for those not given)."""

    def __init__(self, config: ProducerConfig | ConsumerConfig) -> None:
        tracer_provider = config.tracer_provider
        if tracer_provider is None and config.opentelemetry:
            tracer_provider = trace.get_tracer_provider()
        meter_provider = config.meter_provider
        if meter_provider is None and config.opentelemetry:
            meter_provider = metrics.get_meter_provider()
        self.tracer: trace.Tracer | None = (
            None
            if tracer_provider is None
            else tracer_provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL)
        )
        self.meter: metrics.Meter | None = (
            None
            if meter_provider is None
            else meter_provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL)
        )
        self.duration: metrics.Histogram | None = None
        self.sent: metrics.Counter | None = None
        self.consumed: metrics.Counter | None = None
        self.process_duration: metrics.Histogram | None = None
        meter = self.meter
        if meter is None:
            return
        self.duration = meter.create_histogram(
            a.OPERATION_DURATION,
            unit="s",
            description="Duration of messaging operation initiated by a producer or consumer "
            "client.",
            explicit_bucket_boundaries_advisory=a.DURATION_BUCKETS,
        )
        if config.KIND == "producer":
            self.sent = meter.create_counter(
                a.SENT_MESSAGES,
                unit="{message}",
                description="Number of messages producer attempted to send to the broker.",
            )
        else:
            self.consumed = meter.create_counter(
                a.CONSUMED_MESSAGES,
                unit="{message}",
                description="Number of messages that were delivered to the application.",
            )
            self.process_duration = meter.create_histogram(
                a.PROCESS_DURATION,
                unit="s",
                description="Duration of processing operation.",
                explicit_bucket_boundaries_advisory=a.DURATION_BUCKETS,
            )
