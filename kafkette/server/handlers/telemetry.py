"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714 client metrics.

A client asks which metrics the broker wants and how often
(:class:`~kafkette.server.metrics.client_metrics.ClientMetricsManager` decides from the
CLIENT_METRICS subscriptions it matches), then pushes them as OTLP; the pushed metrics
are decoded and shown on the metrics endpoint, labelled with the client's id and
instance id. The client's attributes for ``match`` are its client id, its source address
and port, and the software name and version it gave in ApiVersions on this connection.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkette.errors import ApiError
from kafkette.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.metrics.client_metrics import ACCEPTED_COMPRESSION, client_software
from kafkette.server.metrics.otlp import decode_metrics

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.telemetry")


def _attributes(ctx: RequestContext) -> dict[str, str]:
    """The client's attributes subscriptions may ``match`` on (but its instance id)."""
    address, _, port = ctx.client_host.rpartition(":")
    name, version = client_software.get()
    return {
        "client_software_name": name,
        "client_software_version": version,
        "client_id": ctx.client_id or "",
        "client_source_address": ctx.host,
        "client_source_port": port if address else "",
    }


@handler(GetTelemetrySubscriptionsRequest)
async def handle_get_telemetry_subscriptions(
    broker: Broker, ctx: RequestContext, request: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    manager = broker.metrics.client_metrics
    try:
        subscribed = manager.get_subscriptions(
            request.client_instance_id, _attributes(ctx), broker.now_ms()
        )
    except ApiError as error:
        return GetTelemetrySubscriptionsResponse(error_code=error.code)
    return GetTelemetrySubscriptionsResponse(
        error_code=0,
        client_instance_id=subscribed.instance_id,
        subscription_id=subscribed.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval_ms=subscribed.interval_ms,
        telemetry_max_bytes=broker.config.telemetry_max_bytes,
        delta_temporality=True,
        requested_metrics=list(subscribed.metrics),
    )


@handler(PushTelemetryRequest)
async def handle_push_telemetry(
    broker: Broker, ctx: RequestContext, request: PushTelemetryRequest
) -> PushTelemetryResponse:
    metrics = broker.metrics
    max_bytes = broker.config.telemetry_max_bytes
    try:
        instance = metrics.client_metrics.push(
            request.client_instance_id,
            _attributes(ctx),
            request.subscription_id,
            request.terminating,
            request.compression_type,
            len(request.metrics),
            broker.now_ms(),
            max_bytes,
        )
    except ApiError as error:
        logger.debug("PushTelemetry from %s refused: %s", ctx.client_host, error)
        return PushTelemetryResponse(error_code=error.code)
    if request.metrics:
        try:
            points = decode_metrics(request.compression_type, request.metrics, max_bytes)
        except ApiError as error:
            instance.last_error = error.code
            logger.warning(
                "PushTelemetry from %s (client instance %s): %s",
                ctx.client_host,
                request.client_instance_id,
                error,
            )
            return PushTelemetryResponse(error_code=error.code)
        metrics.record_push(request.client_instance_id, ctx.client_id or "", points)
    return PushTelemetryResponse(error_code=0)
