"""The clients' ``metrics()`` snapshots under KIP-714's standard metric names."""

from __future__ import annotations

from kafkette.client.telemetry.samples import PREFIX, consumer_samples, producer_samples
from kafkette.consumer.metrics import ConsumerMetrics


def test_queue_and_throttle_times_are_gauges_in_ms_under_kip_714_names() -> None:
    snapshot = {
        "record_queue_time_avg_ms": 12.5,
        "record_queue_time_max_ms": 30.0,
        "produce_throttle_time_avg_ms": 3.5,
        "produce_throttle_time_max_ms": 7.0,
    }
    by_name = {s.name: s for s in producer_samples(snapshot)}
    expected = {
        "producer.record.queue.time.avg": 12.5,
        "producer.record.queue.time.max": 30.0,
        "producer.produce.throttle.time.avg": 3.5,
        "producer.produce.throttle.time.max": 7.0,
    }
    for name, value in expected.items():
        sample = by_name[PREFIX + name]
        assert (sample.value, sample.sum, sample.unit) == (value, False, "ms")


def test_rebalance_latency_is_two_gauges_and_a_sum_in_ms() -> None:
    snapshot = ConsumerMetrics(
        records_consumed=0,
        bytes_consumed=0,
        fetch_count=0,
        bytes_fetched=0,
        fetch_latency_avg_ms=0.0,
        fetch_latency_max_ms=0.0,
        records_lag={},
        rebalance_latency_avg_ms=42.5,
        rebalance_latency_max_ms=45.0,
        rebalance_latency_total_ms=85.0,
    )
    by_name = {s.name: s for s in consumer_samples(snapshot, 0)}
    base = PREFIX + "consumer.coordinator.rebalance.latency."
    got = {n: (by_name[base + n].value, by_name[base + n].sum) for n in ("avg", "max", "total")}
    assert got == {"avg": (42.5, False), "max": (45.0, False), "total": (85.0, True)}
    assert {by_name[base + n].unit for n in ("avg", "max", "total")} == {"ms"}
