"""OpenTelemetry's SDK with in-memory exporters, for the clients' traces and metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kafkette.testing import MemoryCluster


class Telemetry:
    """A tracer provider and a meter provider whose spans and metrics stay in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def settings(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """The ended spans (named ``name``), in the order they ended."""
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """``metric``'s data points as (attributes, value), value a histogram's count;
        sorted by attributes."""
        data = self.reader.get_metrics_data()
        result = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for found in scope.metrics:
                    if found.name != metric:
                        continue
                    for point in found.data.data_points:
                        value = getattr(point, "count", None)
                        if value is None:
                            value = point.value  # type: ignore[union-attr]
                        result.append((dict(point.attributes or {}), value))
        return sorted(result, key=lambda item: sorted(item[0].items()))

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    found = Telemetry()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster() as found:
        yield found


def span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def links(span: ReadableSpan) -> list[tuple[int, dict[str, Any]]]:
    """(span id, attributes) of each link."""
    return [(link.context.span_id, dict(link.attributes or {})) for link in span.links]


def traceparent(span: ReadableSpan) -> bytes:
    """The W3C traceparent header of ``span``'s context."""
    context = span.get_span_context()
    assert context is not None
    return b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)
