"""A PushTelemetry payload read: decompressed with the codec the client named, then
decoded as OTLP ``MetricsData`` (OpenTelemetry's protobuf) with ``opentelemetry-proto``'s
generated classes, into the points the metrics endpoint shows.

Gauges and sums become :class:`Point` values (a monotonic sum a counter, ``delta`` when
the client sent it with delta temporality, as KIP-714 brokers ask); explicit-bucket
histograms keep their buckets. Exponential histograms and summaries, which Kafka's
clients do not send, are left out. A payload that does not decompress or decode is
INVALID_RECORD; one larger than ``max_bytes`` once decompressed TELEMETRY_TOO_LARGE.
"""

from __future__ import annotations

from typing import Any

import attrs

from kafkette.errors import InvalidRecordError, TelemetryTooLargeError
from kafkette.protocol.errors import DecompressionLimitError, ProtocolError
from kafkette.protocol.records.compression import decompress

# AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA in OTLP's metrics.proto. Written
# out so that importing the broker does not load protobuf (about 80 ms): the generated
# classes are imported by the first PushTelemetry.
DELTA = 1

Attributes = tuple[tuple[str, str], ...]


@attrs.frozen
class Point:
    """One data point of a pushed metric."""

    name: str
    description: str
    kind: str
    """``gauge``, ``counter`` or ``histogram``."""
    attributes: Attributes
    value: float = 0.0
    delta: bool = False
    bounds: tuple[float, ...] = ()
    bucket_counts: tuple[int, ...] = ()


def _text(value: Any) -> str:
    """An OTLP ``AnyValue`` as label text."""
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(value, which)).strip()
    return str(getattr(value, which))


def _attributes(pairs: Any) -> Attributes:
    return tuple((pair.key, _text(pair.value)) for pair in pairs)


def _number(point: Any) -> float:
    return float(point.as_int if point.WhichOneof("value") == "as_int" else point.as_double)


def decode_metrics(compression_type: int, payload: bytes, max_bytes: int) -> list[Point]:
    """The points of a PushTelemetry payload (see the module's docstring for errors)."""
    try:
        data = decompress(compression_type, payload, max_size=max_bytes)
    except DecompressionLimitError:
        raise TelemetryTooLargeError(
            f"the metrics are larger than {max_bytes} bytes once decompressed"
        ) from None
    except ProtocolError as exc:
        raise InvalidRecordError(f"the metrics do not decompress: {exc}") from None
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    message = metrics_pb2.MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise InvalidRecordError(f"the metrics are not OTLP MetricsData: {exc}") from None
    points: list[Point] = []
    for resource in message.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.extend(_points(metric))
    return points


def _points(metric: Any) -> list[Point]:
    which = metric.WhichOneof("data")
    name, description = metric.name, metric.description
    if which == "gauge":
        return [
            Point(name, description, "gauge", _attributes(p.attributes), _number(p))
            for p in metric.gauge.data_points
        ]
    if which == "sum":
        kind = "counter" if metric.sum.is_monotonic else "gauge"
        delta = metric.sum.aggregation_temporality == DELTA
        return [
            Point(name, description, kind, _attributes(p.attributes), _number(p), delta)
            for p in metric.sum.data_points
        ]
    if which == "histogram":
        delta = metric.histogram.aggregation_temporality == DELTA
        return [
            Point(
                name,
                description,
                "histogram",
                _attributes(p.attributes),
                p.sum,
                delta,
                tuple(p.explicit_bounds),
                tuple(p.bucket_counts),
            )
            for p in metric.histogram.data_points
        ]
    return []
