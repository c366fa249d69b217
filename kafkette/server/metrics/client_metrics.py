"""KIP-714 on the broker: client metrics subscriptions and the client instances that
follow them. No I/O: requests' fields and the time come in, answers go out.

Subscriptions are Kafka's CLIENT_METRICS config resources (type 16), one per name,
set with IncrementalAlterConfigs: ``metrics`` (metric name prefixes, ``*`` for all),
``interval.ms`` (100 to 3,600,000, default 300,000) and ``match`` (``KEY=REGEX``
entries over ``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address``, ``client_source_port``; every
entry must match the whole value; none: every client). A client instance is given the
union of the metrics of the subscriptions it matches and the shortest of their
intervals, under a subscription id that changes with them.

As Kafka's ``ClientMetricsManager``: GetTelemetrySubscriptions assigns an instance id
to a client that has none, and answers THROTTLING_QUOTA_EXCEEDED when asked again within
the push interval (unless its last push failed with UNKNOWN_SUBSCRIPTION_ID or
UNSUPPORTED_COMPRESSION_TYPE, or the subscriptions changed since); PushTelemetry
answers INVALID_REQUEST for the zero id or after a terminating push,
THROTTLING_QUOTA_EXCEEDED within the interval (the first push after a
GetTelemetrySubscriptions is always accepted, a terminating one too),
UNKNOWN_SUBSCRIPTION_ID for another subscription id, UNSUPPORTED_COMPRESSION_TYPE and
TELEMETRY_TOO_LARGE. An instance not heard from for three push intervals (at least a
minute) is forgotten, and the least recently heard from when there are
:data:`MAX_INSTANCES`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar

import attrs
import crc32c

from kafkette.errors import (
    ApiError,
    InvalidConfigError,
    InvalidRequestError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)

logger = logging.getLogger("kafkette.server.metrics")

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
CONFIG_NAMES = (METRICS, INTERVAL_MS, MATCH)
"""The configurations of a CLIENT_METRICS resource, as Kafka's ``ClientMetricsConfigs``."""
INTERVAL_MS_DEFAULT = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
ALL_METRICS = "*"
MATCH_KEYS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
client_software: ContextVar[tuple[str, str]] = ContextVar("client_software", default=("", ""))
"""The software name and version a connection's client gave in ApiVersions (v3 and
later), for ``match``: set in that connection's task, which serves its requests in turn."""

TELEMETRY_MAX_BYTES = 1_048_576
"""Kafka's ``telemetry.max.bytes`` default: the largest metrics payload accepted (before
and after decompression)."""
ACCEPTED_COMPRESSION = (4, 3, 1, 2)
"""zstd, lz4, gzip, snappy: Kafka's order of preference (clients pick the first they have)."""
_COMPRESSION_IDS = frozenset({0, 1, 2, 3, 4})
CACHE_EXPIRY_MS = 60_000
MAX_INSTANCES = 16_384
"""Client instances kept at most (Kafka's cache size); the least recently heard from goes."""


def _list(value: str) -> list[str]:
    """A LIST configuration's items (comma-separated, trimmed, empty ones dropped)."""
    return [item.strip() for item in value.split(",") if item.strip()]


@attrs.frozen
class Subscription:
    """One CLIENT_METRICS resource, validated."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """Whether a client with these attributes (:data:`MATCH_KEYS`) follows it."""
        return all(
            pattern.fullmatch(attributes.get(key, "")) is not None for key, pattern in self.match
        )


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A subscription from its configurations, as Kafka validates them: an empty name, an
    unknown configuration or an interval out of range is INVALID_REQUEST, a malformed
    ``match`` entry INVALID_CONFIG."""
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_NAMES:
            raise InvalidRequestError(f"Unknown client metrics configuration: {key}")
    interval = INTERVAL_MS_DEFAULT
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS].strip())
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT"
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise InvalidRequestError(
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)"
            )
    match: list[tuple[str, re.Pattern[str]]] = []
    for entry in _list(configs.get(MATCH, "")):
        parts = entry.split("=")
        key = parts[0].strip()
        if len(parts) != 2 or key not in MATCH_KEYS:
            raise InvalidConfigError(f"Illegal client matching pattern: {entry}")
        try:
            match.append((key, re.compile(parts[1].strip())))
        except re.error:
            raise InvalidConfigError(f"Illegal client matching pattern: {entry}") from None
    return Subscription(name, tuple(_list(configs.get(METRICS, ""))), interval, tuple(match))


@attrs.define
class ClientInstance:
    """A client instance: what it was given and when it last asked and pushed."""

    instance_id: uuid.UUID
    attributes: dict[str, str]
    subscription_id: int
    version: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: int = 0

    @property
    def expires_after_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@attrs.frozen
class Subscribed:
    """A GetTelemetrySubscriptions answer's fields."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int


def _subscription_id(metrics: tuple[str, ...], interval_ms: int, instance: uuid.UUID) -> int:
    """An id for the set: CRC-32C of the metrics and interval, XORed with the instance id's
    halves (as Kafka: the set changes, the id changes), as a signed 32-bit number."""
    digest = crc32c.crc32c((",".join(metrics) + str(interval_ms)).encode())
    mixed = (digest ^ instance.int ^ (instance.int >> 32) ^ (instance.int >> 64)) & 0xFFFFFFFF
    return mixed - (1 << 32) if mixed >= 1 << 31 else mixed


class ClientMetricsManager:
    """Subscriptions and client instances (Kafka's ``ClientMetricsManager``)."""

    def __init__(self) -> None:
        self.subscriptions: dict[str, Subscription] = {}
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._version = 0
        self.on_change: Callable[[str, dict[str, str]], None] | None = None
        """Called with a subscription's new configs (empty: removed), to keep them."""
        self.forgotten: list[uuid.UUID] = []
        """Instances forgotten since the caller last emptied this (their pushed metrics go)."""

    # -- subscriptions (CLIENT_METRICS resources) --------------------------------------

    def configs(self, name: str) -> dict[str, str]:
        """The configurations set on subscription ``name`` (none: an empty dict)."""
        return dict(self._configs.get(name, {}))

    def restore(self, saved: Mapping[str, Mapping[str, str]]) -> None:
        """Take the subscriptions a data directory kept (one that no longer parses is
        left out, logged)."""
        for name, configs in saved.items():
            try:
                self.update(name, configs)
            except ApiError as error:
                logger.warning("client metrics subscription %s left out: %s", name, error)

    def update(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Set subscription ``name`` to ``configs`` (empty: remove it); raises Kafka's
        error for invalid ones. :attr:`on_change` is told of the change."""
        subscription = parse_subscription(name, configs)
        if validate_only:
            return
        if self.on_change is not None:
            self.on_change(name, dict(configs))
        if configs:
            self.subscriptions[name] = subscription
            self._configs[name] = dict(configs)
        elif self.subscriptions.pop(name, None) is None:
            return
        else:
            del self._configs[name]
        self._version += 1

    # -- client instances --------------------------------------------------------------

    def _instance(
        self, instance_id: uuid.UUID, attributes: Mapping[str, str], now_ms: int
    ) -> ClientInstance:
        """The instance, made (or made again, its times reset, when the subscriptions
        changed since: as Kafka) with its subscription set."""
        self.expire(now_ms)
        found = self.instances.get(instance_id)
        if found is not None and found.version == self._version:
            found.last_seen_ms = now_ms
            return found
        if found is None and len(self.instances) >= MAX_INSTANCES:
            oldest = min(self.instances.values(), key=lambda i: i.last_seen_ms)
            del self.instances[oldest.instance_id]
            self.forgotten.append(oldest.instance_id)
        known = dict(found.attributes) if found is not None else dict(attributes)
        known["client_instance_id"] = str(instance_id)
        metrics: set[str] = set()
        interval = INTERVAL_MS_DEFAULT
        for subscription in self.subscriptions.values():
            if subscription.matches(known):
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        chosen = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
        instance = self.instances[instance_id] = ClientInstance(
            instance_id,
            known,
            _subscription_id(chosen, interval, instance_id),
            self._version,
            chosen,
            interval,
            last_seen_ms=now_ms,
        )
        return instance

    def expire(self, now_ms: int) -> list[uuid.UUID]:
        """Forget the instances not heard from for long; their ids."""
        gone = [
            key
            for key, instance in self.instances.items()
            if now_ms - instance.last_seen_ms >= instance.expires_after_ms
        ]
        for key in gone:
            del self.instances[key]
        self.forgotten.extend(gone)
        return gone

    def get_subscriptions(
        self, instance_id: uuid.UUID, attributes: Mapping[str, str], now_ms: int
    ) -> Subscribed:
        """GetTelemetrySubscriptions (``attributes``: :data:`MATCH_KEYS` but the instance
        id); raises THROTTLING_QUOTA_EXCEEDED when asked again too soon."""
        if instance_id.int == 0:
            instance_id = uuid.uuid4()
            while instance_id in self.instances:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, attributes, now_ms)
        times = [t for t in (instance.last_get_ms, instance.last_push_ms) if t is not None]
        if not times or now_ms - max(times) >= instance.interval_ms:
            instance.last_get_ms = now_ms
        elif instance.last_error not in (
            UnknownSubscriptionIdError.code,
            UnsupportedCompressionTypeError.code,
        ):
            raise ThrottlingQuotaExceededError(
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time"
            )
        instance.last_error = 0
        return Subscribed(
            instance_id, instance.subscription_id, instance.metrics, instance.interval_ms
        )

    def push(
        self,
        instance_id: uuid.UUID,
        attributes: Mapping[str, str],
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        now_ms: int,
        max_bytes: int = TELEMETRY_MAX_BYTES,
    ) -> ClientInstance:
        """PushTelemetry's checks (``max_bytes``: ``telemetry.max.bytes``); the instance,
        when its metrics are to be read."""
        if instance_id.int == 0:
            raise InvalidRequestError(
                f"Invalid request from the client [{instance_id}], invalid client instance id"
            )
        instance = self._instance(instance_id, attributes, now_ms)
        try:
            self._check_push(
                instance, subscription_id, terminating, compression_type, size, now_ms, max_bytes
            )
        except ApiError as error:
            instance.last_error = error.code
            raise
        finally:
            instance.terminating = terminating
        instance.last_error = 0
        return instance

    def _check_push(
        self,
        instance: ClientInstance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        now_ms: int,
        max_bytes: int,
    ) -> None:
        who = instance.instance_id
        if instance.terminating:
            raise InvalidRequestError(
                f"Client [{who}] sent the previous request with state terminating to TRUE, "
                "can not accept any requests after that"
            )
        got, pushed = instance.last_get_ms, instance.last_push_ms
        accept = pushed is None or (got is not None and got > pushed)
        if not accept and pushed is not None:
            accept = now_ms - pushed >= instance.interval_ms
        if accept:
            instance.last_push_ms = now_ms
        elif not terminating:
            raise ThrottlingQuotaExceededError(
                f"Request from the client [{who}] arrived before the next push interval time"
            )
        if subscription_id != instance.subscription_id:
            raise UnknownSubscriptionIdError(
                f"Unknown client subscription id for the client [{who}]"
            )
        if compression_type not in _COMPRESSION_IDS:
            raise UnsupportedCompressionTypeError(
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{who}]"
            )
        if size > max_bytes:
            raise TelemetryTooLargeError(
                f"Telemetry request from [{who}] is larger than the maximum allowed size "
                f"[{max_bytes}]"
            )
