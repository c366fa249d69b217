"""KIP-714 on the broker over TCP: CLIENT_METRICS subscriptions set and described with the
admin client, GetTelemetrySubscriptions and PushTelemetry, the pushed metrics on the
endpoint (asyncio and trio)."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from kafkette.admin import AlterConfigOp, AlterOp, AsyncAdminClient, ConfigResource, ResourceType
from kafkette.admin.types import ConfigSource
from kafkette.client.connection import BrokerConnection
from kafkette.errors import InvalidConfigError, InvalidRequestError
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kafkette.protocol.records.compression import compress
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net.listener import serve_tcp
from kafkette.testing import ManualClock
from tests.server.metrics.otlp_payloads import payload
from tests.server.metrics.scrape import samples, value

pytestmark = pytest.mark.anyio

SUBSCRIPTION = ConfigResource(ResourceType.CLIENT_METRICS, "producers")
CLOCK = ManualClock()


@pytest.fixture
async def served() -> AsyncIterator[tuple[Broker, int]]:
    broker = Broker(clock=CLOCK)
    async with anyio.create_task_group() as tg:
        port = await tg.start(functools.partial(serve_tcp, broker, "127.0.0.1", 0))
        yield broker, port
        tg.cancel_scope.cancel()


async def test_subscriptions_are_client_metrics_config_resources(
    served: tuple[Broker, int],
) -> None:
    broker, port = served
    async with AsyncAdminClient(bootstrap_servers=f"127.0.0.1:{port}") as admin:
        described = await admin.describe_configs([SUBSCRIPTION])
        defaults = described.all()[SUBSCRIPTION]
        assert {n: (e.value, e.source) for n, e in defaults.items()} == {
            "interval.ms": ("300000", ConfigSource.DEFAULT_CONFIG),
            "match": ("", ConfigSource.DEFAULT_CONFIG),
            "metrics": ("", ConfigSource.DEFAULT_CONFIG),
        }
        changes = [
            AlterConfigOp("metrics", "org.apache.kafka.producer."),
            AlterConfigOp("interval.ms", "1000"),
            AlterConfigOp("match", "client_id=pay.*"),
        ]
        (await admin.incremental_alter_configs({SUBSCRIPTION: changes})).all()
        appended = [AlterConfigOp("metrics", "org.apache.kafka.consumer.", AlterOp.APPEND)]
        (await admin.incremental_alter_configs({SUBSCRIPTION: appended})).all()
        entries = (await admin.describe_configs([SUBSCRIPTION])).all()[SUBSCRIPTION]
        assert {n: (e.value, e.source) for n, e in entries.items()} == {
            "interval.ms": ("1000", ConfigSource.CLIENT_METRICS_CONFIG),
            "match": ("client_id=pay.*", ConfigSource.CLIENT_METRICS_CONFIG),
            "metrics": (
                "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                ConfigSource.CLIENT_METRICS_CONFIG,
            ),
        }
        bad = {SUBSCRIPTION: [AlterConfigOp("interval.ms", "10")]}
        with pytest.raises(InvalidRequestError, match="interval must be between 100"):
            (await admin.incremental_alter_configs(bad)).all()
        bad = {SUBSCRIPTION: [AlterConfigOp("match", "host=x")]}
        with pytest.raises(InvalidConfigError, match="Illegal client matching pattern"):
            (await admin.incremental_alter_configs(bad)).all()
        unnamed = ConfigResource(ResourceType.CLIENT_METRICS, "")
        with pytest.raises(InvalidRequestError, match="Subscription name can't be empty"):
            (await admin.describe_configs([unnamed])).all()
    assert broker.metrics.client_metrics.subscriptions["producers"].interval_ms == 1000


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
async def test_pushed_metrics_are_on_the_endpoint(served: tuple[Broker, int], codec: int) -> None:
    broker, port = served
    broker.metrics.client_metrics.update(
        "all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "100"}
    )
    async with await BrokerConnection.connect("127.0.0.1", port, client_id="pay-1") as connection:
        versions = await connection.request(ApiVersionsRequest())
        assert isinstance(versions, ApiVersionsResponse)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert (ranges[71], ranges[72]) == ((0, 0), (0, 0))
        got = await connection.request(GetTelemetrySubscriptionsRequest())
        assert isinstance(got, GetTelemetrySubscriptionsResponse)
        assert got.error_code == 0 and got.client_instance_id != uuid.UUID(int=0)
        assert got.requested_metrics == ["org.apache.kafka.producer."]
        assert (got.push_interval_ms, got.telemetry_max_bytes) == (100, 1_048_576)
        assert got.accepted_compression_types == [4, 3, 1, 2] and got.delta_temporality
        instance = got.client_instance_id
        for latency, connections in ((2.5, 3), (4.0, 2)):
            push = PushTelemetryRequest(
                client_instance_id=instance,
                subscription_id=got.subscription_id,
                compression_type=codec,
                metrics=compress(codec, payload(latency, connections)),
            )
            answer = await connection.request(push)
            assert answer == PushTelemetryResponse(error_code=0)
            CLOCK.advance(100)  # the push interval
        garbage = PushTelemetryRequest(
            client_instance_id=instance,
            subscription_id=got.subscription_id,
            compression_type=codec,
            metrics=compress(codec, b"\xff\xff\xff\xff not protobuf"),
        )
        refused = await connection.request(garbage)
        assert refused == PushTelemetryResponse(error_code=87)  # INVALID_RECORD
    CLOCK.advance(59_999)  # not yet forgotten (a minute without requests)
    scraped = samples(broker.metrics.text())
    labels = {"client_id": "pay-1", "client_instance_id": str(instance)}
    latency_name = "org_apache_kafka_producer_node_request_latency_avg"
    assert value(scraped, latency_name, node_id="1", **labels) == 4.0
    # A delta sum adds up to a Prometheus counter.
    assert value(scraped, "org_apache_kafka_producer_connection_creation_total", **labels) == 5
    assert value(scraped, "kafkette_client_metrics_instances") == 1
    CLOCK.advance(1)
    assert "pay-1" not in broker.metrics.text()


async def test_telemetry_max_bytes_is_the_brokers_property() -> None:
    """GetTelemetrySubscriptions tells ``telemetry.max.bytes``; a larger push, or one larger
    once decompressed, is TELEMETRY_TOO_LARGE."""
    config = BrokerConfig.from_properties({"telemetry.max.bytes": "200"})
    broker = Broker(config, clock=CLOCK)
    broker.metrics.client_metrics.update("all", {"metrics": "*", "interval.ms": "100"})
    async with anyio.create_task_group() as tg:
        port = await tg.start(functools.partial(serve_tcp, broker, "127.0.0.1", 0))
        async with await BrokerConnection.connect("127.0.0.1", port) as connection:
            got = await connection.request(GetTelemetrySubscriptionsRequest())
            assert isinstance(got, GetTelemetrySubscriptionsResponse)
            assert got.telemetry_max_bytes == 200
            for data in (b"\x00" * 201, compress(4, b"\x00" * 201)):
                push = PushTelemetryRequest(
                    client_instance_id=got.client_instance_id,
                    subscription_id=got.subscription_id,
                    compression_type=0 if len(data) == 201 else 4,
                    metrics=data,
                )
                answer = await connection.request(push)
                assert answer == PushTelemetryResponse(error_code=118)  # TELEMETRY_TOO_LARGE
                CLOCK.advance(100)
        tg.cancel_scope.cancel()


async def test_match_on_the_software_the_client_named_in_api_versions(
    served: tuple[Broker, int],
) -> None:
    """Our connection says ``kafkette`` and its version in ApiVersions v3: a subscription
    matching that software applies to it, one matching another does not."""
    from kafkette import __version__

    broker, port = served
    manager = broker.metrics.client_metrics
    match = f"client_software_name=kafkette,client_software_version={re.escape(__version__)}"
    manager.update("ours", {"metrics": "a.", "match": match})
    manager.update("theirs", {"metrics": "b.", "match": "client_software_name=librdkafka"})
    async with await BrokerConnection.connect("127.0.0.1", port) as connection:
        got = await connection.request(GetTelemetrySubscriptionsRequest())
        assert isinstance(got, GetTelemetrySubscriptionsResponse)
        assert got.requested_metrics == ["a."]
