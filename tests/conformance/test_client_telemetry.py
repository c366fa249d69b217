"""KIP-714 against ``kafkette serve --metrics``: confluent-kafka with
``enable.metrics.push=true`` and our own producer and consumer (pushing by default) ask for
their subscription and push their metrics, which the Prometheus endpoint shows labelled
with the client's id and instance id."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as ConfluentProducer

from kafkette import AdminClient, Consumer, Producer
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from kafkette.client.telemetry import ClientTelemetry
from kafkette.client.telemetry.state import State, Subscription
from kafkette.structs import TopicPartition
from tests.brokers import BrokerProcess
from tests.server.metrics.scrape import by_label, samples

LATENCY = "org_apache_kafka_producer_node_request_latency_avg"


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerProcess, int]]:
    """One broker for the module's tests (each its own subscription and client ids)."""
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


def wait_subscribed(telemetry: ClientTelemetry | None) -> Subscription | None:
    """Wait for the client's subscription (one round trip after it connected)."""
    assert telemetry is not None
    deadline = time.monotonic() + 30
    while telemetry.machine.state is not State.PUSH_NEEDED:
        assert time.monotonic() < deadline, telemetry.machine.state
        time.sleep(0.02)
    return telemetry.machine.subscription


def test_our_clients_push_their_metrics_to_the_endpoint(broker: tuple[BrokerProcess, int]) -> None:
    process, metrics_port = broker
    with AdminClient(bootstrap_servers=process.bootstrap, enable_metrics_push=False) as admin:
        subscription = ConfigResource(ResourceType.CLIENT_METRICS, "kafkette")
        changes = [
            AlterConfigOp("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer."),
            AlterConfigOp("interval.ms", "200"),
            AlterConfigOp("match", "client_software_name=kafkette"),
        ]
        admin.incremental_alter_configs({subscription: changes}).all()
    with Producer(bootstrap_servers=process.bootstrap, client_id="our-producer") as producer:
        for i in range(50):
            producer.send("our-telemetry", b"record %d" % i, partition=0)
        producer.flush()
        producer_instance = wait_subscribed(producer._core.client.telemetry)
    produced = producer.metrics()
    with Consumer(
        bootstrap_servers=process.bootstrap, client_id="our-consumer", auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TopicPartition("our-telemetry", 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 50 and time.monotonic() < deadline:
            got += sum(map(len, consumer.poll(timeout_ms=1000).values()))
        consumer_instance = wait_subscribed(consumer._core.client.telemetry)
    assert got == 50
    assert producer_instance is not None and consumer_instance is not None
    scraped = samples(scrape(metrics_port))
    sent = by_label(
        scraped,
        "org_apache_kafka_producer_record_send_total",
        "client_instance_id",
        client_id="our-producer",
    )
    assert sent == {str(producer_instance.instance_id): 50.0}
    latency = by_label(scraped, LATENCY, "client_instance_id", client_id="our-producer")
    assert latency == {str(producer_instance.instance_id): produced["request_latency_avg_ms"]}
    consumed = by_label(
        scraped,
        "org_apache_kafka_consumer_fetch_manager_records_consumed_total",
        "client_instance_id",
        client_id="our-consumer",
    )
    assert consumed == {str(consumer_instance.instance_id): 50.0}
    lag = by_label(
        scraped,
        "org_apache_kafka_consumer_fetch_manager_records_lag",
        "partition",
        client_id="our-consumer",
        topic="our-telemetry",
    )
    assert lag == {"0": 0.0}
    requests = by_label(scraped, "kafkette_requests_total", "api")
    assert requests["GetTelemetrySubscriptions"] >= 2 and requests["PushTelemetry"] >= 2
