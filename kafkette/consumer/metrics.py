"""Consumer metrics: counters kept by the fetcher and poll, read as a snapshot."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

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
    commit_latency_avg_ms: float = 0.0
    """Offset commits that succeeded (every kind: commit, commit_async, auto, on close):
    their average round trip."""
    commit_latency_max_ms: float = 0.0
    rebalance_latency_avg_ms: float = 0.0
    """Rebalances the member went through (classic: JoinGroup to SyncGroup's assignment,
    retries included; KIP-848: the join or new target to the assignment reconciled):
    Java's rebalance-latency-avg, -max and -total."""
    rebalance_latency_max_ms: float = 0.0
    rebalance_latency_total_ms: float = 0.0
    poll_idle_ratio_avg: float = 0.0
    """Java's poll-idle-ratio-avg: per poll, the time inside it over that time plus the
    time since the previous poll returned (the application's), averaged over the polls."""


S = TypeVar("S")
R = TypeVar("R")


class MetricsRecorder:
    """Mutable counters; plain attribute updates (no lock: ints under the GIL)."""

    __slots__ = (
        "bytes_consumed",
        "bytes_fetched",
        "commit_count",
        "commit_latency_max_ms",
        "commit_latency_total_ms",
        "fetch_count",
        "fetch_latency_max_ms",
        "fetch_latency_total_ms",
        "poll_count",
        "poll_ended_ms",
        "poll_idle_ratio_total",
        "rebalance_count",
        "rebalance_latency_max_ms",
        "rebalance_latency_total_ms",
        "records_consumed",
    )

    def __init__(self) -> None:
        self.records_consumed = 0
        self.bytes_consumed = 0
        self.fetch_count = 0
        self.bytes_fetched = 0
        self.fetch_latency_total_ms = 0.0
        self.fetch_latency_max_ms = 0.0
        self.commit_count = 0
        self.commit_latency_total_ms = 0.0
        self.commit_latency_max_ms = 0.0
        self.rebalance_count = 0
        self.rebalance_latency_total_ms = 0.0
        self.rebalance_latency_max_ms = 0.0
        self.poll_count = 0
        self.poll_idle_ratio_total = 0.0
        self.poll_ended_ms: float | None = None

    def fetch_done(self, latency_ms: float, size: int) -> None:
        self.fetch_count += 1
        self.bytes_fetched += size
        self.fetch_latency_total_ms += latency_ms
        if latency_ms > self.fetch_latency_max_ms:
            self.fetch_latency_max_ms = latency_ms

    def commit_done(self, latency_ms: float) -> None:
        """An offset commit succeeded after ``latency_ms``."""
        self.commit_count += 1
        self.commit_latency_total_ms += latency_ms
        if latency_ms > self.commit_latency_max_ms:
            self.commit_latency_max_ms = latency_ms

    def rebalance_done(self, latency_ms: float) -> None:
        """A rebalance ended after ``latency_ms``."""
        self.rebalance_count += 1
        self.rebalance_latency_total_ms += latency_ms
        if latency_ms > self.rebalance_latency_max_ms:
            self.rebalance_latency_max_ms = latency_ms

    def timed_poll(
        self, steps: Generator[S, None, R], clock: Callable[[], float]
    ) -> Generator[S, None, R]:
        """A poll's steps, its time inside and since the previous poll counted."""
        start = clock()
        result = yield from steps
        end = clock()
        inside = end - start
        if self.poll_ended_ms is not None:
            total = inside + (start - self.poll_ended_ms)
            self.poll_idle_ratio_total += inside / total if total > 0 else 1.0
            self.poll_count += 1
        self.poll_ended_ms = end
        return result

    def snapshot(self, lag: dict[TopicPartition, int]) -> ConsumerMetrics:
        count = self.fetch_count
        commits, polls = self.commit_count, self.poll_count
        rebalances = self.rebalance_count
        return ConsumerMetrics(
            records_consumed=self.records_consumed,
            bytes_consumed=self.bytes_consumed,
            fetch_count=count,
            bytes_fetched=self.bytes_fetched,
            fetch_latency_avg_ms=self.fetch_latency_total_ms / count if count else 0.0,
            fetch_latency_max_ms=self.fetch_latency_max_ms,
            records_lag=lag,
            commit_latency_avg_ms=self.commit_latency_total_ms / commits if commits else 0.0,
            commit_latency_max_ms=self.commit_latency_max_ms,
            rebalance_latency_avg_ms=self.rebalance_latency_total_ms / rebalances
            if rebalances
            else 0.0,
            rebalance_latency_max_ms=self.rebalance_latency_max_ms,
            rebalance_latency_total_ms=self.rebalance_latency_total_ms,
            poll_idle_ratio_avg=self.poll_idle_ratio_total / polls if polls else 0.0,
        )
