"""The producer's ``metrics()`` snapshot under KIP-714's standard producer metric names."""

from __future__ import annotations

from kafkette.client.telemetry.samples import PREFIX, producer_samples


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
