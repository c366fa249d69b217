"""A push's payload: the clients' samples as OTLP MetricsData, compressed, read back by
the broker's decoder; sums as deltas or cumulative, only the metrics asked for."""

from __future__ import annotations

import pytest

from kafkette.client.telemetry.payload import Ledger, compressed, encode
from kafkette.client.telemetry.samples import Sample, consumer_samples, producer_samples, selected
from kafkette.consumer.metrics import ConsumerMetrics
from kafkette.server.metrics.otlp import Point, decode_metrics
from kafkette.structs import TopicPartition

SENT = "org.apache.kafka.producer.record.send.total"
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def decoded(samples: list[Sample], ledger: Ledger, delta: bool, codec: int = 4) -> list[Point]:
    points = ledger.points(samples, delta, now_ns=2_000)
    return decode_metrics(codec, compressed(encode(points, delta, 2_000), codec), 1 << 20)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_reads_back(codec: int) -> None:
    samples = [Sample(SENT, 10, sum=True), Sample(LATENCY, 2.5, unit="ms")]
    points = decoded(samples, Ledger(1_000), delta=False, codec=codec)
    assert [(p.name, p.kind, p.value, p.delta) for p in points] == [
        (SENT, "counter", 10.0, False),
        (LATENCY, "gauge", 2.5, False),
    ]


def test_delta_sums_push_the_change_since_the_last_push_and_cumulative_the_total() -> None:
    ledger = Ledger(1_000)
    assert [p.value for p in decoded([Sample(SENT, 10, sum=True)], ledger, True)] == [10.0]
    assert [p.value for p in decoded([Sample(SENT, 25, sum=True)], ledger, True)] == [15.0]
    assert [p.value for p in decoded([Sample(SENT, 25, sum=True)], ledger, True)] == [0.0]
    # the broker switching to cumulative: totals, and a later switch back starts afresh
    assert [p.value for p in decoded([Sample(SENT, 30, sum=True)], ledger, False)] == [30.0]
    assert [p.value for p in decoded([Sample(SENT, 32, sum=True)], ledger, True)] == [32.0]


def test_delta_points_start_at_the_last_push_and_cumulative_ones_at_the_client_start() -> None:
    ledger = Ledger(1_000)
    first = ledger.points([Sample(SENT, 1, sum=True)], True, now_ns=5_000)
    second = ledger.points([Sample(SENT, 3, sum=True)], True, now_ns=9_000)
    cumulative = Ledger(1_000).points([Sample(SENT, 3, sum=True)], False, now_ns=9_000)
    assert [(v, start) for _, v, start in first + second + cumulative] == [
        (1, 1_000),
        (2, 5_000),
        (3, 1_000),
    ]


def test_only_the_requested_prefixes_are_pushed() -> None:
    samples = producer_samples({"records_sent": 4, "request_latency_avg_ms": 1.5})
    names = {s.name for s in selected(samples, ("org.apache.kafka.producer.node.",))}
    assert names == {LATENCY, "org.apache.kafka.producer.node.request.latency.max"}
    assert selected(samples, ()) == []
    assert len(selected(samples, ("",))) == len(samples)


def test_the_producer_snapshot_under_java_s_names() -> None:
    snapshot = {
        "records_sent": 12,
        "bytes_sent": 600,
        "batches_sent": 3,
        "requests_sent": 2,
        "retries": 1,
        "errors": 0,
        "request_latency_avg_ms": 4.0,
        "request_latency_max_ms": 7.0,
        "buffer_bytes_used": 100,
        "buffer_memory": 1000,
        "requests_in_flight": 1,
        "record_queue_time_avg_ms": 2.5,
        "record_queue_time_max_ms": 30.0,
        "produce_throttle_time_avg_ms": 3.5,
        "produce_throttle_time_max_ms": 7.0,
    }
    values = {
        s.name.removeprefix("org.apache.kafka.producer."): s.value
        for s in producer_samples(snapshot)
    }
    assert values == {
        "node.request.latency.avg": 4.0,
        "node.request.latency.max": 7.0,
        "record.queue.time.avg": 2.5,
        "record.queue.time.max": 30.0,
        "produce.throttle.time.avg": 3.5,
        "produce.throttle.time.max": 7.0,
        "record.send.total": 12,
        "record.retry.total": 1,
        "record.error.total": 0,
        "request.total": 2,
        "record.bytes.total": 600,
        "batch.size.avg": 200.0,
        "request.latency.avg": 4.0,
        "request.latency.max": 7.0,
        "buffer.total.bytes": 1000,
        "buffer.available.bytes": 900,
        "requests.in.flight": 1,
    }


def test_the_consumer_snapshot_under_java_s_names_with_lag_per_partition() -> None:
    snapshot = ConsumerMetrics(
        records_consumed=9,
        bytes_consumed=900,
        fetch_count=3,
        bytes_fetched=1000,
        fetch_latency_avg_ms=2.0,
        fetch_latency_max_ms=5.0,
        records_lag={TopicPartition("t", 1): 4, TopicPartition("t", 0): 6},
        commit_latency_avg_ms=3.0,
        commit_latency_max_ms=8.0,
        rebalance_latency_avg_ms=20.0,
        rebalance_latency_max_ms=30.0,
        rebalance_latency_total_ms=40.0,
        poll_idle_ratio_avg=0.25,
    )
    got = [
        (s.name.removeprefix("org.apache.kafka.consumer."), s.value, s.sum, s.attributes)
        for s in consumer_samples(snapshot, assigned=2)
    ]
    assert got == [
        ("node.request.latency.avg", 2.0, False, ()),
        ("node.request.latency.max", 5.0, False, ()),
        ("fetch.manager.fetch.latency.avg", 2.0, False, ()),
        ("fetch.manager.fetch.latency.max", 5.0, False, ()),
        ("fetch.manager.fetch.total", 3, True, ()),
        ("fetch.manager.records.consumed.total", 9, True, ()),
        ("fetch.manager.bytes.consumed.total", 900, True, ()),
        ("coordinator.assigned.partitions", 2, False, ()),
        ("coordinator.commit.latency.avg", 3.0, False, ()),
        ("coordinator.commit.latency.max", 8.0, False, ()),
        ("coordinator.rebalance.latency.avg", 20.0, False, ()),
        ("coordinator.rebalance.latency.max", 30.0, False, ()),
        ("coordinator.rebalance.latency.total", 40.0, True, ()),
        ("poll.idle.ratio.avg", 0.25, False, ()),
        ("fetch.manager.records.lag.max", 6, False, ()),
        ("fetch.manager.records.lag", 6, False, (("topic", "t"), ("partition", "0"))),
        ("fetch.manager.records.lag", 4, False, (("topic", "t"), ("partition", "1"))),
    ]
