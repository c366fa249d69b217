"""The client core shared by producer, consumer and admin client.

:class:`KafkaClient` bootstraps from ``bootstrap.servers``, keeps one
:class:`~kafkette.client.connection.BrokerConnection` per broker (reopened
with exponential backoff after a failure), keeps the cluster metadata fresh
(:class:`~kafkette.client.metadata.MetadataCache`) and routes requests to a
partition's leader or to any broker. It runs on anyio, so under asyncio or
trio; the sync clients run it in a background thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio

from kafkette.client.backoff import backoff_ms
from kafkette.client.config import ClientConfig
from kafkette.client.connection import BrokerConnection
from kafkette.client.diagnose import FailureLog, unresolvable_hosts
from kafkette.client.metadata import BrokerInfo, ClusterMetadata, MetadataCache
from kafkette.client.security.sasl import sasl_credentials_for
from kafkette.client.security.tls import ssl_context_for
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.errors import (
    AuthenticationError,
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    RetriableError,
    UnsupportedVersionError,
    make_error,
)
from kafkette.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.schema import Request, Response

if TYPE_CHECKING:
    from kafkette.client.telemetry import ClientTelemetry

logger = logging.getLogger("kafkette.client")
failure_logger = logging.getLogger("kafkette.client.failures")
"""Each address's failure to connect, once (the ``kafkette`` command shows these)."""


RESOLVE_TIMEOUT_S = 2.0
"""How long a client's construction waits at most for its bootstrap names to resolve."""


def parse_server(server: str) -> tuple[str, int]:
    host, sep, port = server.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError("bootstrap.servers", f"{server!r} is not host:port")
    return host.strip("[]"), int(port)


def check_resolvable(servers: list[tuple[str, int]], timeout_s: float) -> None:
    """Refuse bootstrap servers none of whose names resolve (librdkafka's "No resolvable
    bootstrap urls"), with :class:`ConfigError` naming them; see :func:`unresolvable_hosts`."""
    failed = unresolvable_hosts([host for host, _ in servers], timeout_s)
    if len(failed) < len({host for host, _ in servers}):
        return
    detail = "; ".join(f"{host}:{port}: {failed[host]}" for host, port in servers)
    raise ConfigError("bootstrap.servers", f"no resolvable bootstrap server ({detail})")


def check_connection_settings(config: ClientConfig) -> None:
    """Refuse, with :class:`ConfigError` naming the setting, what could never connect: a
    bootstrap server that is not ``host:port``, bootstrap names none of which resolves,
    a TLS file that cannot be read. :class:`KafkaClient` checks the same when made;
    clients that make theirs later (in their event loop) call this at construction."""
    ssl_context_for(config)
    if _in_process_url(config.bootstrap_servers) is None:
        servers = [parse_server(s) for s in config.bootstrap_servers]
        check_resolvable(servers, _resolve_timeout_s(config))


def _resolve_timeout_s(config: ClientConfig) -> float:
    return min(RESOLVE_TIMEOUT_S, config.socket_connection_setup_timeout_ms / 1000)


def _in_process_url(servers: tuple[str, ...]) -> str | None:
    """The ``memory://``/``file://`` URL when the bootstrap names an in-process cluster."""
    in_process = [s for s in servers if s.startswith(("memory://", "file://"))]
    if not in_process:
        return None
    if len(servers) != 1:
        raise ConfigError(
            "bootstrap.servers",
            "an in-process cluster (memory://, file://) must be the only server",
        )
    return in_process[0]


class KafkaClient:
    """Connections, metadata and routing for one client instance."""

    def __init__(self, config: ClientConfig, *, clock: MonotonicClockMs = monotonic_ms) -> None:
        self.config = config
        self.clock = clock
        self.metadata = MetadataCache(config.metadata_max_age_ms)
        self._connections: dict[int, BrokerConnection] = {}
        # Coordinator traffic (JoinGroup can wait for minutes) has connections of its own.
        self._coordinator_connections: dict[int, BrokerConnection] = {}
        self._coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node id
        self._coordinator_addresses: dict[int, tuple[str, int]] = {}
        self._connect_locks: dict[tuple[bool, int], anyio.Lock] = {}
        self._failures: dict[int, tuple[int, float]] = {}  # node -> (failures, retry not before)
        self._metadata_lock = anyio.Lock()
        self._ssl_context = ssl_context_for(config)
        self._sasl = sasl_credentials_for(config)
        self.last_connection_error: Exception | None = None
        """The most recent failure to connect, for errors that report why nothing answered."""
        self._in_process_url = _in_process_url(config.bootstrap_servers)
        if self._in_process_url is not None:
            self._bootstrap = [(self._in_process_url, 0)]
        else:
            self._bootstrap = [parse_server(s) for s in config.bootstrap_servers]
            check_resolvable(self._bootstrap, _resolve_timeout_s(config))
        self._failure_log = FailureLog(failure_logger)
        """Logs each address's connection failure once (see :class:`FailureLog`)."""
        self._closing: list[BrokerConnection] = []
        self.coordinator_request_timeout_ms: int | None = None
        """Request timeout of coordinator connections (JoinGroup waits for a rebalance)."""
        self.closed = False
        self.telemetry: ClientTelemetry | None = None
        """KIP-714 client metrics (:func:`kafkette.client.telemetry.attach`), told of each
        connection and closed (a terminating push) before the connections are."""

    # ---- connections

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[-node_id - 1]
        broker = self.metadata.snapshot.brokers.get(node_id)
        if broker is None:
            address = self._coordinator_addresses.get(node_id)
            if address is not None:
                return address
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return broker.host, broker.port

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (negative ids are bootstrap servers)."""
        existing = self._connections.get(node_id)
        if existing is not None and not existing.closed:
            return existing
        return await self._connect(self._connections, node_id, coordinator=False)

    def open_connection(self, node_id: int) -> BrokerConnection | None:
        """The connection to ``node_id`` if one is open now (no waiting, no connecting)."""
        existing = self._connections.get(node_id)
        if existing is not None and not existing.closed:
            return existing
        return None

    async def coordinator_connection(self, node_id: int) -> BrokerConnection:
        """The open connection to coordinator ``node_id``, separate from :meth:`connection`.

        A broker serves one request per connection at a time, so a JoinGroup
        parked for a rebalance must not hold up produce or fetch requests to
        the same broker (the Java client opens a second connection too).
        """
        existing = self._coordinator_connections.get(node_id)
        if existing is not None and not existing.closed:
            return existing
        try:
            return await self._connect(self._coordinator_connections, node_id, coordinator=True)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._forget_coordinator_node(node_id)
            raise

    async def _connect(
        self, pool: dict[int, BrokerConnection], node_id: int, *, coordinator: bool
    ) -> BrokerConnection:
        lock = self._connect_locks.setdefault((coordinator, node_id), anyio.Lock())
        async with lock:
            existing = pool.get(node_id)
            if existing is not None and not existing.closed:
                return existing
            failures, not_before = self._failures.get(node_id, (0, 0.0))
            wait_ms = not_before - self.clock()
            if wait_ms > 0:
                await anyio.sleep(wait_ms / 1000)
            try:
                connection = await self._open(node_id, coordinator=coordinator)
            except (KafkaConnectionError, KafkaTimeoutError, AuthenticationError) as exc:
                # a refused authentication backs off too, or retrying callers would hammer
                self.last_connection_error = exc
                delay = backoff_ms(
                    failures, self.config.reconnect_backoff_ms, self.config.reconnect_backoff_max_ms
                )
                self._failures[node_id] = (failures + 1, self.clock() + delay)
                raise
            self._failures.pop(node_id, None)
            pool[node_id] = connection
            if self.telemetry is not None:
                self.telemetry.connected(node_id)
            return connection

    async def _open(self, node_id: int, *, coordinator: bool = False) -> BrokerConnection:
        timeout_ms = self.config.request_timeout_ms
        if coordinator and self.coordinator_request_timeout_ms is not None:
            timeout_ms = max(timeout_ms, self.coordinator_request_timeout_ms)
        if self._in_process_url is not None:
            # Every node of an in-process cluster is the broker core in this process;
            # the stream says which node it reached (bootstrap ids: the first live one).
            from kafkette.client.inprocess import get_cluster

            cluster = get_cluster(self._in_process_url)
            return await BrokerConnection.over_stream(
                cluster.open_stream(node_id),
                address=self._in_process_url,
                client_id=self.config.client_id,
                request_timeout_s=timeout_ms / 1000,
                clock=self.clock,
            )
        host, port = self._address(node_id)
        return await BrokerConnection.connect(
            host,
            port,
            client_id=self.config.client_id,
            connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000,
            request_timeout_s=timeout_ms / 1000,
            ssl_context=self._ssl_context,
            sasl=self._sasl,
            clock=self.clock,
            failures=self._failure_log,
        )

    async def send(
        self, node_id: int, request: Request, *, expect_response: bool = True
    ) -> Response | None:
        """Send ``request`` to ``node_id``; a broken connection marks metadata stale."""
        connection = await self.connection(node_id)
        try:
            return await connection.request(request, expect_response=expect_response)
        except KafkaConnectionError:
            self.metadata.request_update()
            raise

    async def any_node(self) -> int:
        """A broker to send cluster-wide requests to: connected ones first, then any known."""
        for node_id, connection in self._connections.items():
            if node_id >= 0 and not connection.closed:
                return node_id
        candidates = list(self.metadata.snapshot.brokers) or [
            -(i + 1) for i in range(len(self._bootstrap))
        ]
        last_error: Exception | None = None
        for node_id in candidates:
            try:
                await self.connection(node_id)
                return node_id
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last_error = exc
        detail = f" ({last_error})" if last_error is not None else ""
        raise KafkaConnectionError(
            f"no broker reachable among {', '.join(self.config.bootstrap_servers)}{detail}"
        ) from last_error

    # ---- coordinators

    async def coordinator(
        self, key: str, key_type: int = 0, *, timeout_ms: float | None = None
    ) -> int:
        """The node id coordinating ``key`` (key type 0: a group, 1: a transactional id).

        Cached per (key type, key) until :meth:`invalidate_coordinator` (or a
        lost coordinator connection). Retriable answers (the coordinator still
        loading, not available yet) are retried with backoff until
        ``timeout_ms`` (default ``request.timeout.ms``); other errors raise
        their Kafka exception.
        """
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        deadline = self.clock() + (
            timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        )
        attempt = 0
        while True:
            try:
                node_id = await self._find_coordinator(key, key_type)
            except (RetriableError, KafkaConnectionError, KafkaTimeoutError) as exc:
                wait = backoff_ms(
                    attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                )
                if self.clock() + wait >= deadline:
                    raise
                logger.debug("finding the coordinator of %r: %s; retrying", key, exc)
                attempt += 1
                await anyio.sleep(wait / 1000)
                continue
            self._coordinators[(key_type, key)] = node_id
            return node_id

    async def _find_coordinator(self, key: str, key_type: int) -> int:
        node = await self.any_node()
        connection = await self.connection(node)
        version = connection.version_for(FindCoordinatorRequest)
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        elif version >= 1 or key_type == 0:
            request = FindCoordinatorRequest(key=key, key_type=key_type if version >= 1 else 0)
        else:
            raise UnsupportedVersionError(
                "the broker's FindCoordinator v0 only finds group coordinators"
            )
        response = await connection.request(request, version=version)
        assert isinstance(response, FindCoordinatorResponse)
        if version >= 4:
            found = next((c for c in response.coordinators if c.key == key), None)
            if found is None:
                raise KafkaConnectionError(f"FindCoordinator answered nothing for {key!r}")
            code, message = found.error_code, found.error_message
            node_id, host, port = found.node_id, found.host, found.port
        else:
            code, message = response.error_code, response.error_message
            node_id, host, port = response.node_id, response.host, response.port
        if code != 0:
            raise make_error(code, message or f"finding the coordinator of {key!r}")
        if node_id not in self.metadata.snapshot.brokers:
            self._coordinator_addresses[node_id] = (host, port)
        return node_id

    def invalidate_coordinator(self, key: str, key_type: int = 0) -> None:
        """Forget the coordinator of ``key`` (after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE...).

        The coordinator connection to that node is closed too, as Java does,
        so requests parked on it (a JoinGroup) stop waiting.
        """
        node_id = self._coordinators.pop((key_type, key), None)
        if node_id is not None and node_id not in self._coordinators.values():
            connection = self._coordinator_connections.pop(node_id, None)
            if connection is not None:
                self._closing.append(connection)

    def _forget_coordinator_node(self, node_id: int) -> None:
        for cache_key in [k for k, v in self._coordinators.items() if v == node_id]:
            del self._coordinators[cache_key]

    async def send_to_coordinator(
        self, key: str, request: Request, *, key_type: int = 0, version: int | None = None
    ) -> Response:
        """Send ``request`` to the coordinator of ``key`` over the coordinator connection.

        A broken connection forgets the coordinator (before the error is
        raised, or before the next request when it broke in between); error
        codes in the response are the caller's to read.
        """
        await self._close_forgotten()
        node_id = await self.coordinator(key, key_type)
        existing = self._coordinator_connections.get(node_id)
        if existing is not None and existing.closed:
            # The connection broke since: the coordinator may have moved, look it up again.
            del self._coordinator_connections[node_id]
            self._forget_coordinator_node(node_id)
            node_id = await self.coordinator(key, key_type)
        try:
            connection = await self.coordinator_connection(node_id)
            response = await connection.request(request, version=version)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._forget_coordinator_node(node_id)
            raise
        assert response is not None
        return response

    async def _close_forgotten(self) -> None:
        while self._closing:
            await self._closing.pop().aclose()

    # ---- metadata

    async def bootstrap(self, timeout_ms: float | None = None) -> ClusterMetadata:
        """Fetch the cluster's brokers (no topics) from the first reachable bootstrap server."""
        return await self.refresh_metadata([], timeout_ms=timeout_ms)

    async def refresh_metadata(
        self,
        topics: Iterable[str] | None = None,
        *,
        allow_auto_topic_creation: bool = False,
        timeout_ms: float | None = None,
    ) -> ClusterMetadata:
        """Fetch metadata for ``topics`` (None: every topic; []: brokers only).

        Retries with backoff until ``timeout_ms`` (default ``request.timeout.ms``)
        when no broker answers.
        """
        wanted = None if topics is None else sorted(set(topics))
        deadline = self.clock() + (
            timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        )
        attempt = 0
        async with self._metadata_lock:
            while True:
                try:
                    node_id = await self.any_node()
                    connection = await self.connection(node_id)
                    request = MetadataRequest(
                        topics=None
                        if wanted is None
                        else [MetadataRequestTopic(name=t) for t in wanted],
                        allow_auto_topic_creation=allow_auto_topic_creation,
                    )
                    response = await connection.request(request)
                    assert isinstance(response, MetadataResponse)
                    snapshot = ClusterMetadata.from_response(response)
                    self.metadata.update(snapshot, self.clock(), merge=wanted is not None)
                    return self.metadata.snapshot
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    wait = backoff_ms(
                        attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                    )
                    if self.clock() + wait >= deadline:
                        servers = ", ".join(self.config.bootstrap_servers)
                        raise KafkaTimeoutError(
                            f"could not fetch metadata from {servers} in time: {exc}"
                        ) from exc
                    attempt += 1
                    await anyio.sleep(wait / 1000)

    async def leader(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        """The node id leading ``topic``/``partition``, refreshing metadata if needed."""
        leader = self.metadata.snapshot.leader_for(topic, partition)
        if leader is not None and not self.metadata.needs_update(self.clock()):
            return leader
        self.metadata.wanted_topics.add(topic)
        snapshot = await self.refresh_metadata(self.metadata.wanted_topics, timeout_ms=timeout_ms)
        leader = snapshot.leader_for(topic, partition)
        if leader is None:
            raise LeaderNotAvailableError(f"no leader known for {topic}-{partition}")
        return leader

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.metadata.snapshot.brokers.get(node_id)

    # ---- lifecycle

    async def close(self) -> None:
        if self.telemetry is not None:
            await self.telemetry.close()
        self.closed = True
        connections = [
            *self._connections.values(),
            *self._coordinator_connections.values(),
            *self._closing,
        ]
        self._connections.clear()
        self._coordinator_connections.clear()
        self._closing.clear()
        for connection in connections:
            await connection.aclose()

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
