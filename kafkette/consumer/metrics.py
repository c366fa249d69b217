"""Consumer metrics: counters kept by the fetcher and poll, read as a snapshot."""

from __future__ import annotations

import attrs

from kafkette.structs import TopicPartition


@attrs.frozen
class ConsumerMetrics:
    """A snapshot of what the consumer did since it started."""

    records_consumed: int
    """Records handed to the application."""
    bytes_consumed: int
    """Record bytes the application received (batch bytes, as stored)."""
    fetch_count: int
    """Fetch requests answered."""
    bytes_fetched: int
    """Record bytes in fetch responses, including batches dropped later (seek, stale)."""
    fetch_latency_avg_ms: float
    fetch_latency_max_ms: float
    records_lag: dict[TopicPartition, int]
    """Per partition: records between the position and the high watermark (LSO for
    read_committed), as of the last fetch response; partitions not fetched yet are left out."""


class MetricsRecorder:
    """Mutable counters; plain attribute updates (no lock: ints under the GIL)."""

    __slots__ = (
        "bytes_consumed",
        "bytes_fetched",
        "fetch_count",
        "fetch_latency_max_ms",
        "fetch_latency_total_ms",
        "records_consumed",
    )

    def __init__(self) -> None:
        self.records_consumed = 0
        self.bytes_consumed = 0
        self.fetch_count = 0
        self.bytes_fetched = 0
        self.fetch_latency_total_ms = 0.0
        self.fetch_latency_max_ms = 0.0

    def fetch_done(self, latency_ms: float, size: int) -> None:
        self.fetch_count += 1
        self.bytes_fetched += size
        self.fetch_latency_total_ms += latency_ms
        if latency_ms > self.fetch_latency_max_ms:
            self.fetch_latency_max_ms = latency_ms

    def snapshot(self, lag: dict[TopicPartition, int]) -> ConsumerMetrics:
        count = self.fetch_count
        return ConsumerMetrics(
            records_consumed=self.records_consumed,
            bytes_consumed=self.bytes_consumed,
            fetch_count=count,
            bytes_fetched=self.bytes_fetched,
            fetch_latency_avg_ms=self.fetch_latency_total_ms / count if count else 0.0,
            fetch_latency_max_ms=self.fetch_latency_max_ms,
            records_lag=lag,
        )
