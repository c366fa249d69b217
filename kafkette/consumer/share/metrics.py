"""What a share consumer counts, and its KIP-714 samples under Java's names.

Java's share consumer keeps these in the metric group
``consumer-share-fetch-manager-metrics``; KIP-714 names a metric by its group without
``-metrics`` and dots for dashes, so ``records-consumed-total`` there is pushed as
``org.apache.kafka.consumer.share.fetch.manager.records.consumed.total``. Counts are
monotonic sums, latencies gauges. Updated in the consumer's event loop only.
"""

from __future__ import annotations

import attrs

from kafkette.client.telemetry.samples import PREFIX, Sample

FETCH_MANAGER = PREFIX + "consumer.share.fetch.manager."


@attrs.define
class ShareFetchMetrics:
    """A share consumer's fetch and acknowledgement counts."""

    records_consumed: int = 0
    """Records handed to the application."""
    bytes_consumed: int = 0
    """Record bytes the broker sent."""
    fetch_count: int = 0
    """ShareFetch requests answered."""
    fetch_latency_total_ms: float = 0.0
    fetch_latency_max_ms: float = 0.0
    acknowledgements_sent: int = 0
    """Offsets acknowledged in ShareFetch and ShareAcknowledge requests."""
    acknowledgements_failed: int = 0
    """Offsets whose acknowledgement the broker refused or never answered."""

    def fetched(self, latency_ms: float, record_bytes: int) -> None:
        """A ShareFetch was answered after ``latency_ms`` with ``record_bytes``."""
        self.fetch_count += 1
        self.fetch_latency_total_ms += latency_ms
        self.fetch_latency_max_ms = max(self.fetch_latency_max_ms, latency_ms)
        self.bytes_consumed += record_bytes

    @property
    def fetch_latency_avg_ms(self) -> float:
        return self.fetch_latency_total_ms / self.fetch_count if self.fetch_count else 0.0

    def samples(self) -> list[Sample]:
        """The KIP-714 samples (what the consumer's telemetry pushes)."""
        base = FETCH_MANAGER

        def total(name: str, value: int, description: str, unit: str = "") -> Sample:
            return Sample(base + name, value, sum=True, description=description, unit=unit)

        return [
            total(
                "records.consumed.total",
                self.records_consumed,
                "The total number of records consumed.",
            ),
            total(
                "bytes.consumed.total",
                self.bytes_consumed,
                "The total number of bytes consumed.",
                "By",
            ),
            total("fetch.total", self.fetch_count, "The total number of fetch requests."),
            Sample(
                base + "fetch.latency.avg",
                self.fetch_latency_avg_ms,
                description="The average time taken for a fetch request.",
                unit="ms",
            ),
            Sample(
                base + "fetch.latency.max",
                self.fetch_latency_max_ms,
                description="The max time taken for any fetch request.",
                unit="ms",
            ),
            total(
                "acknowledgements.send.total",
                self.acknowledgements_sent,
                "The total number of record acknowledgements sent.",
            ),
            total(
                "acknowledgements.error.total",
                self.acknowledgements_failed,
                "The total number of record acknowledgements failed.",
            ),
        ]
