"""KIP-714 against librdkafka: confluent-kafka with ``enable.metrics.push=true`` asks
``kafkette serve`` for its subscription and pushes its metrics, which the Prometheus
endpoint shows labelled with the client's id and instance id."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as ConfluentProducer

from kafkette import AdminClient
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from tests.brokers import BrokerProcess
from tests.server.metrics.scrape import by_label, samples

LATENCY = "org_apache_kafka_producer_node_request_latency_avg"


@pytest.fixture
def broker() -> Iterator[tuple[BrokerProcess, int]]:
    process = BrokerProcess(args=("--metrics", "127.0.0.1:0")).start()
    try:
        found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", process.log())
        assert found is not None, process.log()
        yield process, int(found.group(1))
    finally:
        process.stop()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
        return text


def test_librdkafka_pushes_its_metrics_to_the_endpoint(broker: tuple[BrokerProcess, int]) -> None:
    process, metrics_port = broker
    subscription = ConfigResource(ResourceType.CLIENT_METRICS, "producers")
    with AdminClient(bootstrap_servers=process.bootstrap) as admin:
        changes = [
            AlterConfigOp("metrics", "org.apache.kafka.producer."),
            AlterConfigOp("interval.ms", "1000"),
        ]
        admin.incremental_alter_configs({subscription: changes}).all()
    producer = ConfluentProducer(
        {
            "bootstrap.servers": process.bootstrap,
            "client.id": "librdkafka-producer",
            "enable.metrics.push": True,
        }
    )
    try:
        latencies: dict[str, float] = {}
        deadline = time.monotonic() + 30
        while not latencies and time.monotonic() < deadline:
            producer.produce("telemetry", b"x")
            producer.flush(5)
            scraped = samples(scrape(metrics_port))
            latencies = by_label(
                scraped, LATENCY, "client_instance_id", client_id="librdkafka-producer"
            )
        assert latencies, scrape(metrics_port)
        (instance_id,) = latencies
        assert re.fullmatch(r"[0-9a-f-]{36}", instance_id)
        assert all(v >= 0 for v in latencies.values())
        instances = by_label(scraped, "kafkette_requests_total", "api")
        assert instances["GetTelemetrySubscriptions"] >= 1 and instances["PushTelemetry"] >= 1
    finally:
        producer.flush(5)
