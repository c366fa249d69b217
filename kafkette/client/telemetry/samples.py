"""The metrics a client pushes, named as KIP-714's standard client metrics.

Each client reads what it already measures (the producer's and consumer's ``metrics()``
snapshots, the client core's connections) into :class:`Sample` values here, under Java's
names: a Kafka metric ``record-send-total`` of group ``producer-metrics`` is
``org.apache.kafka.producer.record.send.total``. KIP-714 lists the standard ones
(``producer.node.request.latency.avg``, ``consumer.fetch.manager.fetch.latency.avg``,
``connection.creation.total`` ...); the others are Java's metrics of the same meaning.
Monotonic counts are sums (pushed as deltas or cumulative, as the broker asks); the rest
are gauges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import attrs

PREFIX = "org.apache.kafka."

Attributes = tuple[tuple[str, str], ...]


@attrs.frozen
class Sample:
    """One value of one metric at collection time."""

    name: str
    value: float
    sum: bool = False
    """A monotonic sum (a count since the client started); else a gauge."""
    attributes: Attributes = ()
    description: str = ""
    unit: str = ""


@attrs.frozen
class ConnectionStats:
    """What the client core counts of its connections."""

    creations: int
    """Connections opened since the client started."""
    uptime_ms: float
    """Milliseconds since the client started (for the creation rate)."""


class ConsumerSnapshot(Protocol):
    """The fields of :class:`kafkette.consumer.metrics.ConsumerMetrics` read here."""

    @property
    def records_consumed(self) -> int: ...
    @property
    def bytes_consumed(self) -> int: ...
    @property
    def fetch_count(self) -> int: ...
    @property
    def fetch_latency_avg_ms(self) -> float: ...
    @property
    def fetch_latency_max_ms(self) -> float: ...
    @property
    def records_lag(self) -> Mapping[Any, int]: ...
    @property
    def commit_latency_avg_ms(self) -> float: ...
    @property
    def commit_latency_max_ms(self) -> float: ...
    @property
    def poll_idle_ratio_avg(self) -> float: ...
    @property
    def rebalance_latency_avg_ms(self) -> float: ...
    @property
    def rebalance_latency_max_ms(self) -> float: ...
    @property
    def rebalance_latency_total_ms(self) -> float: ...


def connection_samples(group: str, stats: ConnectionStats) -> list[Sample]:
    """``{group}.connection.creation.total`` and ``.rate``."""
    base = f"{PREFIX}{group}."
    rate = stats.creations / (stats.uptime_ms / 1000) if stats.uptime_ms > 0 else 0.0
    return [
        Sample(
            base + "connection.creation.total",
            stats.creations,
            sum=True,
            description="The total number of connections established.",
        ),
        Sample(
            base + "connection.creation.rate",
            rate,
            description="The rate of connections established per second.",
        ),
    ]


def _latency(base: str, avg: float, max_: float, what: str) -> list[Sample]:
    """``node.request.latency.avg``/``.max``: kafkette times its produce or fetch round
    trips over all brokers together, so these carry no ``node.id`` attribute."""
    return [
        Sample(
            base + "node.request.latency.avg",
            avg,
            description=f"The average request latency in ms of {what} requests.",
            unit="ms",
        ),
        Sample(
            base + "node.request.latency.max",
            max_,
            description=f"The maximum request latency in ms of {what} requests.",
            unit="ms",
        ),
    ]


def producer_samples(snapshot: Mapping[str, float]) -> list[Sample]:
    """The producer's ``metrics()`` snapshot under Java's producer metric names."""
    base = PREFIX + "producer."
    batches = snapshot.get("batches_sent", 0)
    avg = snapshot.get("request_latency_avg_ms", 0.0)
    max_ = snapshot.get("request_latency_max_ms", 0.0)
    return [
        *_latency(base, avg, max_, "produce"),
        Sample(
            base + "record.send.total",
            snapshot.get("records_sent", 0),
            sum=True,
            description="The total number of records sent.",
        ),
        Sample(
            base + "record.retry.total",
            snapshot.get("retries", 0),
            sum=True,
            description="The total number of retried record sends.",
        ),
        Sample(
            base + "record.error.total",
            snapshot.get("errors", 0),
            sum=True,
            description="The total number of record sends that resulted in errors.",
        ),
        Sample(
            base + "request.total",
            snapshot.get("requests_sent", 0),
            sum=True,
            description="The total number of produce requests sent.",
        ),
        Sample(
            base + "record.bytes.total",
            snapshot.get("bytes_sent", 0),
            sum=True,
            description="The total number of record batch bytes sent.",
            unit="By",
        ),
        Sample(
            base + "batch.size.avg",
            snapshot.get("bytes_sent", 0) / batches if batches else 0.0,
            description="The average number of bytes sent per partition per request.",
            unit="By",
        ),
        Sample(
            base + "request.latency.avg",
            snapshot.get("request_latency_avg_ms", 0.0),
            description="The average request latency in ms for produce requests.",
            unit="ms",
        ),
        Sample(
            base + "request.latency.max",
            snapshot.get("request_latency_max_ms", 0.0),
            description="The maximum request latency in ms for produce requests.",
            unit="ms",
        ),
        Sample(
            base + "record.queue.time.avg",
            snapshot.get("record_queue_time_avg_ms", 0.0),
            description="The average time in ms record batches spent in the send buffer.",
            unit="ms",
        ),
        Sample(
            base + "record.queue.time.max",
            snapshot.get("record_queue_time_max_ms", 0.0),
            description="The maximum time in ms record batches spent in the send buffer.",
            unit="ms",
        ),
        Sample(
            base + "produce.throttle.time.avg",
            snapshot.get("produce_throttle_time_avg_ms", 0.0),
            description="The average time in ms a request was throttled by a broker.",
            unit="ms",
        ),
        Sample(
            base + "produce.throttle.time.max",
            snapshot.get("produce_throttle_time_max_ms", 0.0),
            description="The maximum time in ms a request was throttled by a broker.",
            unit="ms",
        ),
        Sample(
            base + "buffer.total.bytes",
            snapshot.get("buffer_memory", 0),
            description="The maximum amount of buffer memory the client can use.",
            unit="By",
        ),
        Sample(
            base + "buffer.available.bytes",
            snapshot.get("buffer_memory", 0) - snapshot.get("buffer_bytes_used", 0),
            description="The total amount of buffer memory that is not being used.",
            unit="By",
        ),
        Sample(
            base + "requests.in.flight",
            snapshot.get("requests_in_flight", 0),
            description="The current number of in-flight requests awaiting a response.",
        ),
    ]


def consumer_samples(snapshot: ConsumerSnapshot, assigned: int) -> list[Sample]:
    """The consumer's ``metrics()`` snapshot under Java's consumer metric names;
    ``assigned``: the partitions it holds now."""
    base = PREFIX + "consumer."
    avg, max_ = snapshot.fetch_latency_avg_ms, snapshot.fetch_latency_max_ms
    samples = [
        *_latency(base, avg, max_, "fetch"),
        Sample(
            base + "fetch.manager.fetch.latency.avg",
            snapshot.fetch_latency_avg_ms,
            description="The average fetch latency in ms for the fetch manager.",
            unit="ms",
        ),
        Sample(
            base + "fetch.manager.fetch.latency.max",
            snapshot.fetch_latency_max_ms,
            description="The maximum fetch latency in ms for the fetch manager.",
            unit="ms",
        ),
        Sample(
            base + "fetch.manager.fetch.total",
            snapshot.fetch_count,
            sum=True,
            description="The total number of fetch requests.",
        ),
        Sample(
            base + "fetch.manager.records.consumed.total",
            snapshot.records_consumed,
            sum=True,
            description="The total number of records consumed.",
        ),
        Sample(
            base + "fetch.manager.bytes.consumed.total",
            snapshot.bytes_consumed,
            sum=True,
            description="The total number of bytes consumed.",
            unit="By",
        ),
        Sample(
            base + "coordinator.assigned.partitions",
            assigned,
            description="The number of partitions currently assigned to this consumer.",
        ),
        Sample(
            base + "coordinator.commit.latency.avg",
            snapshot.commit_latency_avg_ms,
            description="The average time taken for a commit request.",
            unit="ms",
        ),
        Sample(
            base + "coordinator.commit.latency.max",
            snapshot.commit_latency_max_ms,
            description="The max time taken for a commit request.",
            unit="ms",
        ),
        Sample(
            base + "coordinator.rebalance.latency.avg",
            snapshot.rebalance_latency_avg_ms,
            description="The average time taken for a group to complete a rebalance.",
            unit="ms",
        ),
        Sample(
            base + "coordinator.rebalance.latency.max",
            snapshot.rebalance_latency_max_ms,
            description="The max time taken for a group to complete a rebalance.",
            unit="ms",
        ),
        Sample(
            base + "coordinator.rebalance.latency.total",
            snapshot.rebalance_latency_total_ms,
            sum=True,
            description="The total number of milliseconds spent in rebalances.",
            unit="ms",
        ),
        Sample(
            base + "poll.idle.ratio.avg",
            snapshot.poll_idle_ratio_avg,
            description="The average fraction of time the consumer's poll() is idle as "
            "opposed to waiting for the user code to process records.",
        ),
    ]
    lags = dict(snapshot.records_lag)
    samples.append(
        Sample(
            base + "fetch.manager.records.lag.max",
            max(lags.values(), default=0),
            description="The maximum lag in terms of number of records for any partition.",
        )
    )
    for (topic, partition), lag in sorted(
        ((str(getattr(tp, "topic", tp)), int(getattr(tp, "partition", -1))), lag)
        for tp, lag in lags.items()
    ):
        samples.append(
            Sample(
                base + "fetch.manager.records.lag",
                lag,
                attributes=(("topic", str(topic)), ("partition", str(partition))),
                description="The latest lag of the partition.",
            )
        )
    return samples


def selected(samples: Iterable[Sample], prefixes: tuple[str, ...]) -> list[Sample]:
    """The samples whose names start with one of ``prefixes``."""
    return [s for s in samples if any(s.name.startswith(p) for p in prefixes)]
