"""A push's metrics: :class:`~kafkette.client.telemetry.samples.Sample` values as OTLP
``MetricsData`` (OpenTelemetry's protobuf, with ``opentelemetry-proto``'s generated
classes), compressed with the codec the subscription chose.

The generated classes are imported by the first push, so a client whose broker asks for
no metrics never loads protobuf. Sums go out with the temporality the broker asked for:
delta (the change since the last push, which :class:`Ledger` remembers) or cumulative
(the count since the client started).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkette.client.telemetry.samples import Attributes, Sample
from kafkette.protocol.records.compression import compress

# AggregationTemporality in OTLP's metrics.proto.
DELTA = 1
CUMULATIVE = 2


class Ledger:
    """The last value pushed of each sum, for delta temporality."""

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        """When the client started: the start time of cumulative sums."""
        self._last: dict[tuple[str, Attributes], tuple[float, int]] = {}
        self._delta: bool | None = None

    def points(
        self, samples: Iterable[Sample], delta: bool, now_ns: int
    ) -> list[tuple[Sample, float, int]]:
        """Each sample with the value to push and its start time (sums: the last push's
        time when ``delta``, the client's start when cumulative; gauges: now)."""
        if delta != self._delta:  # the broker switched temporality: start afresh
            self._last.clear()
            self._delta = delta
        out: list[tuple[Sample, float, int]] = []
        for sample in samples:
            if not sample.sum:
                out.append((sample, sample.value, now_ns))
            elif not delta:
                out.append((sample, sample.value, self.start_ns))
            else:
                key = (sample.name, sample.attributes)
                last, since = self._last.get(key, (0.0, self.start_ns))
                self._last[key] = (sample.value, now_ns)
                out.append((sample, sample.value - last, since))
        return out


def load_protobuf() -> None:
    """Import OTLP's generated classes (and protobuf): tens of milliseconds of file reads,
    which the runner does in a worker thread before the first push, not in the loop."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: F401


def encode(
    points: list[tuple[Sample, float, int]],
    delta: bool,
    now_ns: int,
    resource: Attributes = (),
) -> bytes:
    """OTLP ``MetricsData`` bytes: one resource, one scope, a metric per sample."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    resource_metrics = data.resource_metrics.add()
    _attributes(resource_metrics.resource.attributes, resource)
    scope = resource_metrics.scope_metrics.add()
    scope.scope.name = "kafkette"
    temporality = DELTA if delta else CUMULATIVE
    for sample, value, start_ns in points:
        metric = scope.metrics.add()
        metric.name = sample.name
        metric.description = sample.description
        metric.unit = sample.unit
        if sample.sum:
            metric.sum.is_monotonic = True
            metric.sum.aggregation_temporality = temporality
            point = metric.sum.data_points.add()
            point.start_time_unix_nano = start_ns
        else:
            point = metric.gauge.data_points.add()
        point.time_unix_nano = now_ns
        _attributes(point.attributes, sample.attributes)
        if sample.sum and float(value).is_integer():
            point.as_int = int(value)
        else:
            point.as_double = float(value)
    return bytes(data.SerializeToString())


def _attributes(target: Any, attributes: Attributes) -> None:
    for key, text in attributes:
        pair = target.add()
        pair.key = key
        pair.value.string_value = text


def compressed(metrics: bytes, compression_type: int) -> bytes:
    """``metrics`` compressed with ``compression_type`` (0: as they are)."""
    return compress(compression_type, metrics)
