"""The I/O around :class:`~kafkette.client.telemetry.state.TelemetryMachine`: one task
per client that waits until the machine has a request due and a connected broker
supports KIP-714's APIs (ApiVersions said so), sends it, and hands the answer back;
and the terminating push when the client closes.

The client core calls :meth:`ClientTelemetry.connected` for each connection it opens
and :meth:`ClientTelemetry.close` first thing when it closes; the client that owns the
core starts :meth:`ClientTelemetry.run` in its task group.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from kafkette.client.telemetry.payload import Ledger, compressed, encode, load_protobuf
from kafkette.client.telemetry.samples import (
    ConnectionStats,
    Sample,
    connection_samples,
    selected,
)
from kafkette.client.telemetry.state import (
    DEFAULT_PUSH_INTERVAL_MS,
    State,
    Subscription,
    TelemetryMachine,
)
from kafkette.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafkette.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

if TYPE_CHECKING:
    from kafkette.client.client import KafkaClient
    from kafkette.client.connection import BrokerConnection

logger = logging.getLogger("kafkette.client.telemetry")

CLOSE_TIMEOUT_MS = 5_000
"""The terminating push waits at most this long (or ``request.timeout.ms`` when shorter)."""


class ClientTelemetry:
    """KIP-714 for one client: see the module's docstring.

    ``group`` names the client kind in the metric names (``producer``, ``consumer``,
    ``admin``); ``collect`` reads the client's own samples when a push is due.
    """

    def __init__(
        self,
        client: KafkaClient,
        group: str,
        collect: Callable[[], list[Sample]],
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.machine = TelemetryMachine(rng=rng)
        self.group = group
        self._client = client
        self._clock = client.clock
        self._collect = collect
        self._started_ms = client.clock()
        self._ledger: Ledger | None = None  # made by the first push
        self._nodes: list[int] = []
        self._wake: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._closed = False
        self._protobuf_loaded = False
        self._id_waiters: list[anyio.Event] = []
        self.connections_created = 0
        self.requests_sent = 0
        """GetTelemetrySubscriptions and PushTelemetry requests sent (for tests and logs)."""

    # ---- hooks of the client core

    def connected(self, node_id: int) -> None:
        """The client opened a connection to ``node_id``."""
        self.connections_created += 1
        if node_id not in self._nodes:
            self._nodes.append(node_id)
        if self._wake is not None:
            self._wake.set()

    def samples(self) -> list[Sample]:
        """Every metric this client can push, now."""
        stats = ConnectionStats(self.connections_created, self._clock() - self._started_ms)
        return [*connection_samples(self.group, stats), *self._collect()]

    # ---- the instance id

    @property
    def instance_id(self) -> uuid.UUID | None:
        """The client instance id the broker gave (None before its first answer)."""
        subscription = self.machine.subscription
        return subscription.instance_id if subscription is not None else None

    async def wait_instance_id(self, timeout: float) -> uuid.UUID:
        """Java's ``clientInstanceId(Duration)``: the instance id, waiting up to ``timeout``
        seconds for GetTelemetrySubscriptions' answer (opening a connection when the
        client has none yet, as a producer before its first record); raises
        :class:`KafkaTimeoutError` when it did not come in time."""
        if timeout < 0:
            raise ValueError(f"timeout must not be negative, got {timeout}")
        known = self.instance_id
        if known is not None:
            return known
        waiter = anyio.Event()
        self._id_waiters.append(waiter)
        try:
            with anyio.move_on_after(timeout):
                if not self._nodes:  # its connected() hook wakes the task
                    # no broker reachable: the wait ends at the timeout
                    with contextlib.suppress(KafkaConnectionError, KafkaTimeoutError):
                        await self._client.any_node()
                await waiter.wait()
        finally:
            self._id_waiters.remove(waiter)
        known = self.instance_id
        if known is None:
            raise KafkaTimeoutError(f"the client instance id was not received within {timeout}s")
        return known

    # ---- the task

    async def run(self) -> None:
        """Send what the machine asks for, as it comes due, until :meth:`close`."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            while not self._closed and self.machine.due_in_ms(self._clock()) is not None:
                wait_ms = self._wait_ms()
                if wait_ms > 0:
                    self._wake = anyio.Event()
                    with anyio.move_on_after(wait_ms / 1000 if math.isfinite(wait_ms) else None):
                        await self._wake.wait()
                    self._wake = None
                    continue
                try:
                    await self.step()
                except Exception:  # never the client's failure: telemetry stops, it goes on
                    logger.exception("client telemetry failed and stops")
                    self.machine.disable()

    def _wait_ms(self) -> float:
        due = self.machine.due_in_ms(self._clock())
        if due is None or self._connection(any_open=True) is None:
            return math.inf  # woken by the first connection
        return due

    def _connection(self, *, any_open: bool = False) -> BrokerConnection | None:
        """A connected broker that supports KIP-714 (``any_open``: any connected one)."""
        for node_id in list(self._nodes):
            connection = self._client.open_connection(node_id)
            if connection is None:
                continue
            if any_open or (
                connection.supports(GetTelemetrySubscriptionsRequest)
                and connection.supports(PushTelemetryRequest)
            ):
                return connection
        return None

    async def step(self) -> None:
        """Send the request due now, if any, and read its answer."""
        connection = self._connection()
        if connection is None:
            if self.machine.due_in_ms(self._clock()) == 0:
                # no connected broker has the APIs: look again later, as Java does
                logger.debug("no connected broker supports client telemetry (KIP-714)")
                self.machine.on_failure(self._clock())
                self.machine.next_at_ms = self._clock() + DEFAULT_PUSH_INTERVAL_MS
            return
        pushing = self.machine.state in (State.PUSH_NEEDED, State.TERMINATING_PUSH_NEEDED)
        if pushing and not self._protobuf_loaded:
            await anyio.to_thread.run_sync(load_protobuf)  # not on the loop: file reads
            self._protobuf_loaded = True
        request = self.machine.next_request(self._clock(), self._payload)
        if request is None:
            return
        self.requests_sent += 1
        try:
            response = await connection.request(request)
        except KafkaError as exc:
            logger.debug("client telemetry request failed: %s", exc)
            self.machine.on_failure(self._clock())
            return
        if isinstance(response, GetTelemetrySubscriptionsResponse):
            self.machine.on_subscriptions(response, self._clock())
            subscription = self.machine.subscription
            if subscription is not None:
                for waiter in self._id_waiters:
                    waiter.set()
            if subscription is not None and response.error_code == 0:
                log = logger.info if subscription.prefixes else logger.debug
                log(
                    "client telemetry: instance id %s, %s every %d ms",
                    subscription.instance_id,
                    list(subscription.prefixes) or "no metrics",
                    subscription.interval_ms,
                )
        elif isinstance(response, PushTelemetryResponse):
            if response.error_code:
                logger.info("PushTelemetry answered error code %d", response.error_code)
            self.machine.on_push(response, self._clock())

    def _payload(self, subscription: Subscription) -> bytes:
        now_ns = time.time_ns()
        if self._ledger is None:
            self._ledger = Ledger(now_ns - round((self._clock() - self._started_ms) * 1e6))
        samples = selected(self.samples(), subscription.prefixes)
        points = self._ledger.points(samples, subscription.delta, now_ns)
        return compressed(encode(points, subscription.delta, now_ns), subscription.compression_type)

    # ---- closing

    async def close(self) -> None:
        """Stop the task; push once more with ``terminating`` set when subscribed."""
        if self._closed:
            return
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        if self.machine.initiate_close():
            timeout_ms = min(CLOSE_TIMEOUT_MS, self._client.config.request_timeout_ms)
            with anyio.move_on_after(timeout_ms / 1000, shield=True):
                await self.step()
        self.machine.close()
