"""KIP-714 on the clients: the producer, consumer and admin client answer a broker's
client metrics subscription and push the metrics it asks for (``enable.metrics.push``,
default true as in Java).

Modules: :mod:`.state` (the state machine: what to ask and when, no I/O),
:mod:`.samples` (the clients' measurements under KIP-714's metric names),
:mod:`.payload` (OTLP ``MetricsData``, compressed; protobuf is imported by the first push
only), :mod:`.runner` (the task that sends the requests). The clients call
:func:`attach` with their own collector; nothing here imports the producer or consumer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafkette.client.config import AdminConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig
from kafkette.client.telemetry.runner import ClientTelemetry
from kafkette.client.telemetry.samples import (
    ConsumerSnapshot,
    Sample,
    consumer_samples,
    producer_samples,
)
from kafkette.errors import IllegalStateError

if TYPE_CHECKING:
    from kafkette.client.client import KafkaClient


def attach(
    client: KafkaClient, group: str, collect: Callable[[], list[Sample]] = list
) -> ClientTelemetry | None:
    """Give ``client`` its KIP-714 telemetry (None with ``enable.metrics.push=false``);
    the owner starts :meth:`ClientTelemetry.run` in its task group."""
    if not client.config.enable_metrics_push:
        return None
    telemetry = ClientTelemetry(client, group, collect)
    client.telemetry = telemetry
    return telemetry


def attach_producer(
    client: KafkaClient, metrics: Callable[[], Mapping[str, float]]
) -> ClientTelemetry | None:
    """:func:`attach` for a producer whose ``metrics()`` snapshot is ``metrics``."""
    return attach(client, "producer", lambda: producer_samples(metrics()))


def attach_consumer(
    client: KafkaClient, metrics: Callable[[], ConsumerSnapshot], assigned: Callable[[], int]
) -> ClientTelemetry | None:
    """:func:`attach` for a consumer: its ``metrics()`` snapshot and its assigned
    partitions' count."""
    return attach(client, "consumer", lambda: consumer_samples(metrics(), assigned()))


async def client_instance_id(client: KafkaClient, timeout: float | None) -> uuid.UUID:
    """The client instance id the broker gave this client (KIP-714's
    GetTelemetrySubscriptions), as Java's ``clientInstanceId(Duration)``: waits up to
    ``timeout`` seconds (default ``max.block.ms`` for a producer,
    ``default.api.timeout.ms`` for the others) for it, opening a connection if the
    client has none yet.

    Raises :class:`~kafkette.errors.IllegalStateError` with
    ``enable.metrics.push=false`` and :class:`~kafkette.errors.KafkaTimeoutError` when
    the broker did not give one in time (it has no KIP-714, or no reachable broker).
    The clients' ``client_instance_id`` methods carry this docstring.
    """
    if client.telemetry is None:
        raise IllegalStateError("Telemetry is not enabled")
    if timeout is None:
        config = client.config
        if isinstance(config, ProducerConfig):
            timeout = config.max_block_ms / 1000
        elif isinstance(config, (ConsumerConfig, ShareConsumerConfig, AdminConfig)):
            timeout = config.default_api_timeout_ms / 1000
        else:
            timeout = config.request_timeout_ms / 1000
    return await client.telemetry.wait_instance_id(timeout)


async def run(client: KafkaClient) -> None:
    """The telemetry task of ``client``, for the owner's task group (returns at once
    without telemetry)."""
    if client.telemetry is not None:
        await client.telemetry.run()


__all__ = [
    "ClientTelemetry",
    "Sample",
    "attach",
    "attach_consumer",
    "attach_producer",
    "client_instance_id",
    "run",
]
