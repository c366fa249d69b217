"""Our text exposition read by Prometheus' own Python parser (prometheus-client), a reader
we did not write: every family, type and sample of a scrape with every kind of figure
(histograms, counters, gauges, labels needing escapes, pushed client metrics) comes back
as we meant it."""

from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families

from kafkette import AdminClient, Consumer, NewTopic, Producer
from kafkette.client.inprocess import close_cluster, get_cluster
from kafkette.server.metrics.otlp import decode_metrics
from tests.server.metrics.otlp_payloads import payload

GROUP = 'a "quoted" group\\with\nnewline'
CLIENT = 'client "one"'


def test_a_scrape_parses_with_prometheus_client() -> None:
    url = f"memory://parser-{uuid.uuid4().hex[:8]}"
    core = get_cluster(url)
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic("orders", 1)]).all()
        with Producer(bootstrap_servers=url) as producer:
            producer.send("orders", b"abc", partition=0)
        with Consumer(
            bootstrap_servers=url, group_id=GROUP, auto_offset_reset="earliest"
        ) as consumer:
            consumer.subscribe(["orders"])
            polled = consumer.poll(timeout_ms=10_000)
            assert sum(len(records) for records in polled.values()) == 1
            consumer.commit()
        instance = uuid.uuid4()
        points = decode_metrics(0, payload(2.5, 3), 1 << 20)
        core.run(core.broker.metrics.record_push, instance, CLIENT, points)
        text = core.run(core.broker.metrics.text)
    finally:
        close_cluster(url)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # prometheus-client names a counter's family without its _total suffix
    requests = families["kafkette_requests"]
    assert requests.type == "counter"
    assert [s.value for s in requests.samples if s.labels["api"] == "Produce"] == [1.0]
    histogram = families["kafkette_request_duration_seconds"]
    assert histogram.type == "histogram"
    produce = [s for s in histogram.samples if s.labels["api"] == "Produce"]
    assert [s.value for s in produce if s.name.endswith("_count")] == [1.0]
    assert [s.value for s in produce if s.labels.get("le") == "+Inf"] == [1.0]
    records = families["kafkette_topic_records_in"].samples
    assert [(s.labels["topic"], s.value) for s in records] == [("orders", 1.0)]
    lag = families["kafkette_consumer_group_lag"].samples
    assert [(s.labels["group"], s.labels["topic"], s.value) for s in lag] == [
        (GROUP, "orders", 0.0)
    ]
    latency = families["org_apache_kafka_producer_node_request_latency_avg"]
    assert latency.type == "gauge"
    assert [(s.labels, s.value) for s in latency.samples] == [
        ({"client_id": CLIENT, "client_instance_id": str(instance), "node_id": "1"}, 2.5)
    ]
    connections = families["org_apache_kafka_producer_connection_creation"]
    assert connections.type == "counter" and connections.samples[0].value == 3.0
