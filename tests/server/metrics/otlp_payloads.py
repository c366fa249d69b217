"""OTLP MetricsData payloads for tests, built with opentelemetry-proto's classes."""

from __future__ import annotations

from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
CONNECTIONS = "org.apache.kafka.producer.connection.creation.total"


def attribute(key: str, value: str) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def payload(latency: float, connections: int) -> bytes:
    """A gauge per node and a monotonic delta sum, as librdkafka pushes them."""
    gauge = metrics_pb2.Metric(
        name=LATENCY,
        description="The average request latency in ms for a node.",
        gauge=metrics_pb2.Gauge(
            data_points=[
                metrics_pb2.NumberDataPoint(
                    as_double=latency, attributes=[attribute("node.id", "1")]
                )
            ]
        ),
    )
    total = metrics_pb2.Metric(
        name=CONNECTIONS,
        sum=metrics_pb2.Sum(
            data_points=[metrics_pb2.NumberDataPoint(as_int=connections)],
            aggregation_temporality=metrics_pb2.AGGREGATION_TEMPORALITY_DELTA,
            is_monotonic=True,
        ),
    )
    data = metrics_pb2.MetricsData(
        resource_metrics=[
            metrics_pb2.ResourceMetrics(
                scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[gauge, total])]
            )
        ]
    )
    encoded: bytes = data.SerializeToString()
    return encoded
