"""The metrics clients pushed (KIP-714), kept for the endpoint: the last value of each
point per client instance, a delta sum added to what came before (Prometheus counters
are cumulative). Shown under the metric's name in Prometheus' spelling
(``org.apache.kafka.producer.node.request.latency.avg`` becomes
``org_apache_kafka_producer_node_request_latency_avg``, a counter ends in ``_total``),
labelled ``client_id`` and ``client_instance_id`` and with the point's attributes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator

import attrs

from kafkette.server.metrics.exposition import (
    Family,
    Labels,
    histogram_samples,
    label_name,
    metric_name,
)
from kafkette.server.metrics.otlp import Attributes, Point


@attrs.define
class _Value:
    kind: str
    description: str
    value: float
    bounds: tuple[float, ...] = ()
    counts: list[int] = attrs.Factory(list)


@attrs.define
class _Client:
    client_id: str
    values: dict[tuple[str, Attributes], _Value] = attrs.Factory(dict)


class PushedMetrics:
    """The pushed points of each client instance."""

    def __init__(self) -> None:
        self.clients: dict[uuid.UUID, _Client] = {}

    def record(self, instance_id: uuid.UUID, client_id: str, points: Iterable[Point]) -> None:
        """Keep the points one push carried."""
        client = self.clients.get(instance_id)
        if client is None:
            client = self.clients[instance_id] = _Client(client_id)
        for point in points:
            key = (point.name, point.attributes)
            old = client.values.get(key)
            counts = list(point.bucket_counts)
            if old is not None and point.delta and old.kind == point.kind:
                value = old.value + point.value
                if len(old.counts) == len(counts) and old.bounds == point.bounds:
                    counts = [a + b for a, b in zip(old.counts, counts, strict=True)]
            else:
                value = point.value
            client.values[key] = _Value(point.kind, point.description, value, point.bounds, counts)

    def forget(self, instance_ids: Iterable[uuid.UUID]) -> None:
        """Drop the points of instances that went away."""
        for instance_id in instance_ids:
            self.clients.pop(instance_id, None)

    def families(self) -> Iterator[Family]:
        """One family per pushed metric name, every instance's points in it."""
        families: dict[str, Family] = {}
        for instance_id, client in sorted(self.clients.items(), key=lambda item: str(item[0])):
            base: Labels = (
                ("client_id", client.client_id),
                ("client_instance_id", str(instance_id)),
            )
            for (name, attributes), value in sorted(client.values.items()):
                prom = metric_name(name)
                if value.kind == "counter" and not prom.endswith("_total"):
                    prom += "_total"
                family = families.get(prom)
                if family is None:
                    help_text = value.description or f"{name}, pushed by clients (KIP-714)."
                    family = families[prom] = Family(prom, value.kind, help_text)
                labels: Labels = (*base, *((label_name(k), v) for k, v in attributes))
                if value.kind == "histogram" and value.counts:
                    histogram_samples(family, labels, value.bounds, value.counts, value.value)
                else:
                    family.add(labels, value.value)
        yield from families.values()
