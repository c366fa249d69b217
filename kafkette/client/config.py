"""Client configuration: Kafka's property names, Python spellings, Kafka's defaults.

Every client takes its settings as keyword arguments or a mapping, in either
spelling: ``bootstrap_servers`` or ``"bootstrap.servers"``. Values may be
Python values or Kafka's strings (``"all"``, ``"true"``, ``"5"``). Defaults are
those of Apache Kafka's Java client 4.x (``acks=all``,
``enable.idempotence=true``, ``linger.ms=5`` ...). An unknown setting, an
invalid value, or two settings that contradict each other raise
:class:`~kafkette.errors.ConfigError` at construction, naming the setting.

Each client has a typed, frozen config class (:class:`ProducerConfig`,
:class:`ConsumerConfig`, :class:`ShareConsumerConfig`, :class:`AdminConfig`) whose
attributes are the Python spellings; :meth:`ClientConfig.from_user` builds one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from kafkette.errors import ConfigError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

C = TypeVar("C", bound="ClientConfig")


# ---- value parsers: a Python value or Kafka's string form -> the typed value


def _int(low: int = 0, high: int = LONG_MAX) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected an integer, got a bool")
        number = int(value.strip()) if isinstance(value, str) else int(value)
        if not low <= number <= high:
            raise ValueError(f"must be between {low} and {high}, got {number}")
        return number

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return text

    return parse


def _optional_str(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _servers(value: Any) -> tuple[str, ...]:
    """``host:port`` entries, or one in-process cluster (``memory://NAME``, ``file:///path``)."""
    if isinstance(value, str) and value.strip().startswith(("memory://", "file://")):
        return (value.strip(),)
    items = value.split(",") if isinstance(value, str) else list(value)
    servers = tuple(str(item).strip() for item in items if str(item).strip())
    if not servers:
        raise ValueError("at least one bootstrap server is required")
    return servers


def _list(value: Any) -> tuple[Any, ...]:
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _acks(value: Any) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ValueError(f"must be all, -1, 0 or 1, got {value!r}")


def _endpoint_identification(value: Any) -> bool:
    """Kafka's ``https`` (check the host name) or empty (do not); a bool is accepted too."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("https", ""):
        return text == "https"
    raise ValueError(f"must be https or empty, got {value!r}")


def _sasl_mechanism(value: Any) -> str:
    text = str(value).strip().upper()
    if text not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(
            f"{value!r} is not supported (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
        )
    return text


def _callable_or_none(value: Any) -> Any:
    if value is not None and not callable(value):
        raise ValueError(f"expected a callable, got {type(value).__name__}")
    return value


def _any(value: Any) -> Any:
    return value


def _provider(method: str) -> Callable[[Any], Any]:
    """An OpenTelemetry provider (None: off): an object with ``method``, as the API's."""

    def parse(value: Any) -> Any:
        if value is not None and not callable(getattr(value, method, None)):
            raise ValueError(f"expected an OpenTelemetry provider (with {method}()), got {value!r}")
        return value

    return parse


_TRACER_PROVIDER = _provider("get_tracer")
_METER_PROVIDER = _provider("get_meter")


def setting(kafka_name: str, default: Any, parse: Callable[[Any], Any]) -> Any:
    """An attrs field for one setting, carrying its Kafka name and parser."""
    return attrs.field(default=default, metadata={"kafka": kafka_name, "parse": parse})


@attrs.frozen(kw_only=True)
class ClientConfig:
    """Settings every client has."""

    bootstrap_servers: tuple[str, ...] = setting("bootstrap.servers", ("localhost:9092",), _servers)
    client_id: str = setting("client.id", "kafkette", _str)
    request_timeout_ms: int = setting("request.timeout.ms", 30_000, _int(1, INT_MAX))
    retry_backoff_ms: int = setting("retry.backoff.ms", 100, _int(0))
    retry_backoff_max_ms: int = setting("retry.backoff.max.ms", 1_000, _int(0))
    reconnect_backoff_ms: int = setting("reconnect.backoff.ms", 50, _int(0))
    reconnect_backoff_max_ms: int = setting("reconnect.backoff.max.ms", 1_000, _int(0))
    socket_connection_setup_timeout_ms: int = setting(
        "socket.connection.setup.timeout.ms", 10_000, _int(1)
    )
    metadata_max_age_ms: int = setting("metadata.max.age.ms", 300_000, _int(0))
    connections_max_idle_ms: int = setting("connections.max.idle.ms", 540_000, _int(-1))
    security_protocol: str = setting(
        "security.protocol", "plaintext", _choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
    )
    ssl_context: Any = setting("ssl.context", None, _any)
    ssl_cafile: str | None = setting("ssl.ca.location", None, _optional_str)
    ssl_certfile: str | None = setting("ssl.certificate.location", None, _optional_str)
    ssl_keyfile: str | None = setting("ssl.key.location", None, _optional_str)
    ssl_check_hostname: bool = setting(
        "ssl.endpoint.identification.algorithm", True, _endpoint_identification
    )
    sasl_mechanism: str = setting("sasl.mechanism", "PLAIN", _sasl_mechanism)
    sasl_username: str | None = setting("sasl.username", None, _optional_str)
    sasl_password: str | None = setting("sasl.password", None, _optional_str)
    enable_metrics_push: bool = setting("enable.metrics.push", True, _bool)
    """Push the client metrics a broker's subscription asks for (KIP-714), as Java does."""

    KIND: ClassVar[str] = "client"

    @classmethod
    def kafka_names(cls) -> dict[str, str]:
        """Kafka property name -> attribute name, for every setting of this client."""
        return {f.metadata["kafka"]: f.name for f in attrs.fields(cls) if "kafka" in f.metadata}

    @classmethod
    def from_user(cls: type[C], config: Mapping[str, Any] | None = None, **kwargs: Any) -> C:
        """Build the config from a mapping and/or keyword arguments, in either spelling."""
        by_kafka = cls.kafka_names()
        by_attr = {attr: kafka for kafka, attr in by_kafka.items()}
        fields = {f.name: f for f in attrs.fields(cls)}
        values: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        for source in (config or {}, kwargs):
            for name, value in source.items():
                attr = by_kafka.get(name) or (name if name in by_attr else None)
                if attr is None:
                    attr = by_kafka.get(name.replace("_", "."))
                if attr is None:
                    raise ConfigError(name, cls._unknown_hint(name, by_kafka))
                if attr in given_as and given_as[attr] != name:
                    raise ConfigError(name, f"given twice, also as {given_as[attr]!r}")
                given_as[attr] = name
                try:
                    values[attr] = fields[attr].metadata["parse"](value)
                except (ValueError, TypeError) as exc:
                    raise ConfigError(by_attr[attr], str(exc)) from None
        result = cls(**values)
        result._check(set(values))
        return result

    @classmethod
    def _unknown_hint(cls, name: str, by_kafka: Mapping[str, str]) -> str:
        candidates = list(by_kafka) + list(by_kafka.values())
        close = difflib.get_close_matches(name, candidates, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {cls.KIND} setting{hint}"

    def _check(self, explicit: set[str]) -> None:
        """Cross-setting checks; ``explicit`` holds the attributes the user gave."""
        if self.retry_backoff_max_ms < self.retry_backoff_ms and "retry_backoff_max_ms" in explicit:
            raise ConfigError("retry.backoff.max.ms", "must not be smaller than retry.backoff.ms")
        if self.security_protocol.startswith("sasl"):
            for name, value in (
                ("sasl.username", self.sasl_username),
                ("sasl.password", self.sasl_password),
            ):
                if not value:
                    raise ConfigError(
                        name, f"required with security.protocol={self.security_protocol.upper()}"
                    )


_COMPRESSION = _choice("none", "gzip", "snappy", "lz4", "zstd")


@attrs.frozen(kw_only=True)
class ProducerConfig(ClientConfig):
    """Producer settings (Java client 4.x defaults)."""

    acks: int = setting("acks", -1, _acks)
    enable_idempotence: bool = setting("enable.idempotence", True, _bool)
    linger_ms: int = setting("linger.ms", 5, _int(0))
    batch_size: int = setting("batch.size", 16_384, _int(0, INT_MAX))
    buffer_memory: int = setting("buffer.memory", 33_554_432, _int(0))
    max_block_ms: int = setting("max.block.ms", 60_000, _int(0))
    max_request_size: int = setting("max.request.size", 1_048_576, _int(1, INT_MAX))
    compression_type: str = setting("compression.type", "none", _COMPRESSION)
    delivery_timeout_ms: int = setting("delivery.timeout.ms", 120_000, _int(0, INT_MAX))
    max_in_flight_requests_per_connection: int = setting(
        "max.in.flight.requests.per.connection", 5, _int(1, INT_MAX)
    )
    retries: int = setting("retries", INT_MAX, _int(0, INT_MAX))
    transactional_id: str | None = setting("transactional.id", None, _optional_str)
    transaction_timeout_ms: int = setting("transaction.timeout.ms", 60_000, _int(1, INT_MAX))
    partitioner_ignore_keys: bool = setting("partitioner.ignore.keys", False, _bool)
    partitioner: Any = setting("partitioner", None, _callable_or_none)
    key_serializer: Any = setting("key.serializer", None, _callable_or_none)
    value_serializer: Any = setting("value.serializer", None, _callable_or_none)
    tracer_provider: Any = setting("tracer.provider", None, _TRACER_PROVIDER)
    """OpenTelemetry traces (docs/observability.md): spans go to this ``TracerProvider``."""
    meter_provider: Any = setting("meter.provider", None, _METER_PROVIDER)
    """OpenTelemetry metrics: instruments are made with this ``MeterProvider``."""
    opentelemetry: bool = setting("opentelemetry.enabled", False, _bool)
    """OpenTelemetry with the global providers for those not given (``opentelemetry.trace``'s
    and ``opentelemetry.metrics``'s); off by default, as when no provider is given."""

    KIND: ClassVar[str] = "producer"

    def _check(self, explicit: set[str]) -> None:
        super()._check(explicit)
        if self.enable_idempotence and "enable_idempotence" in explicit:
            if self.acks != -1:
                raise ConfigError("acks", "must be all (-1) to use the idempotent producer")
            if self.max_in_flight_requests_per_connection > 5:
                raise ConfigError(
                    "max.in.flight.requests.per.connection",
                    "must be at most 5 to use the idempotent producer",
                )
            if self.retries == 0:
                raise ConfigError(
                    "retries", "must be greater than 0 to use the idempotent producer"
                )
        if self.transactional_id is not None and not self.idempotent:
            # name the setting that turned idempotence off, as Java's checks do
            if not self.enable_idempotence:
                raise ConfigError(
                    "enable.idempotence",
                    "cannot be false with a transactional.id: transactions need idempotence",
                )
            if self.acks != -1:
                raise ConfigError("acks", "must be all (-1) with a transactional.id")
            if self.retries == 0:
                raise ConfigError("retries", "must be greater than 0 with a transactional.id")
            raise ConfigError(
                "max.in.flight.requests.per.connection",
                "must be at most 5 with a transactional.id",
            )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError(
                "delivery.timeout.ms",
                f"must be at least linger.ms + request.timeout.ms "
                f"({self.linger_ms + self.request_timeout_ms})",
            )

    @property
    def idempotent(self) -> bool:
        """Whether idempotence is on: Kafka quietly turns the default off when acks,
        retries or in-flight settings given by the user conflict with it."""
        if not self.enable_idempotence:
            return False
        return (
            self.acks == -1 and self.retries > 0 and self.max_in_flight_requests_per_connection <= 5
        )


@attrs.frozen(kw_only=True)
class ConsumerConfig(ClientConfig):
    """Consumer settings (Java client 4.x defaults)."""

    group_id: str | None = setting("group.id", None, _optional_str)
    group_instance_id: str | None = setting("group.instance.id", None, _optional_str)
    group_protocol: str = setting("group.protocol", "classic", _choice("classic", "consumer"))
    """``classic`` (JoinGroup/SyncGroup, client-side assignors) or ``consumer`` (KIP-848:
    ConsumerGroupHeartbeat, the broker assigns)."""
    group_remote_assignor: str | None = setting("group.remote.assignor", None, _optional_str)
    """The broker assignor asked for under ``group.protocol=consumer`` (None: the broker's
    default)."""
    auto_offset_reset: str = setting(
        "auto.offset.reset", "latest", _choice("earliest", "latest", "none")
    )
    enable_auto_commit: bool = setting("enable.auto.commit", True, _bool)
    auto_commit_interval_ms: int = setting("auto.commit.interval.ms", 5_000, _int(0))
    fetch_min_bytes: int = setting("fetch.min.bytes", 1, _int(0, INT_MAX))
    fetch_max_bytes: int = setting("fetch.max.bytes", 52_428_800, _int(0, INT_MAX))
    fetch_max_wait_ms: int = setting("fetch.max.wait.ms", 500, _int(0, INT_MAX))
    max_partition_fetch_bytes: int = setting(
        "max.partition.fetch.bytes", 1_048_576, _int(0, INT_MAX)
    )
    max_poll_records: int = setting("max.poll.records", 500, _int(1, INT_MAX))
    max_poll_interval_ms: int = setting("max.poll.interval.ms", 300_000, _int(1, INT_MAX))
    session_timeout_ms: int = setting("session.timeout.ms", 45_000, _int(1, INT_MAX))
    heartbeat_interval_ms: int = setting("heartbeat.interval.ms", 3_000, _int(1, INT_MAX))
    isolation_level: str = setting(
        "isolation.level", "read_uncommitted", _choice("read_uncommitted", "read_committed")
    )
    check_crcs: bool = setting("check.crcs", True, _bool)
    partition_assignment_strategy: tuple[Any, ...] = setting(
        "partition.assignment.strategy", ("range", "cooperative-sticky"), _list
    )
    allow_auto_create_topics: bool = setting("allow.auto.create.topics", True, _bool)
    exclude_internal_topics: bool = setting("exclude.internal.topics", True, _bool)
    client_rack: str = setting("client.rack", "", _str)
    default_api_timeout_ms: int = setting("default.api.timeout.ms", 60_000, _int(0, INT_MAX))
    key_deserializer: Any = setting("key.deserializer", None, _callable_or_none)
    value_deserializer: Any = setting("value.deserializer", None, _callable_or_none)
    tracer_provider: Any = setting("tracer.provider", None, _TRACER_PROVIDER)
    """OpenTelemetry traces (docs/observability.md): spans go to this ``TracerProvider``."""
    meter_provider: Any = setting("meter.provider", None, _METER_PROVIDER)
    """OpenTelemetry metrics: instruments are made with this ``MeterProvider``."""
    opentelemetry: bool = setting("opentelemetry.enabled", False, _bool)
    """OpenTelemetry with the global providers for those not given (``opentelemetry.trace``'s
    and ``opentelemetry.metrics``'s); off by default, as when no provider is given."""

    KIND: ClassVar[str] = "consumer"

    def _check(self, explicit: set[str]) -> None:
        super()._check(explicit)
        if self.group_protocol == "consumer":
            # As librdkafka: under KIP-848 these are the broker's, and refused when given.
            for attribute, why in _BROKER_SIDE_UNDER_CONSUMER_PROTOCOL.items():
                if attribute in explicit:
                    name = attrs.fields_dict(ConsumerConfig)[attribute].metadata["kafka"]
                    raise ConfigError(name, f"is not supported for group.protocol=consumer: {why}")
        elif self.group_remote_assignor is not None and "group_remote_assignor" in explicit:
            raise ConfigError(
                "group.remote.assignor", "cannot be set when group.protocol=classic (as Java)"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms", "must be lower than session.timeout.ms")
        if self.group_instance_id is not None and self.group_id is None:
            raise ConfigError("group.instance.id", "requires a group.id")


_BROKER_SIDE_UNDER_CONSUMER_PROTOCOL = {
    "session_timeout_ms": "it is defined broker side (group.consumer.session.timeout.ms)",
    "heartbeat_interval_ms": "it is defined broker side (group.consumer.heartbeat.interval.ms)",
    "partition_assignment_strategy": "use group.remote.assignor instead",
}


@attrs.frozen(kw_only=True)
class ShareConsumerConfig(ClientConfig):
    """Share consumer settings (KIP-932; Java ``KafkaShareConsumer`` 4.2 defaults)."""

    group_id: str | None = setting("group.id", None, _optional_str)
    """The share group; required."""
    share_acknowledgement_mode: str = setting(
        "share.acknowledgement.mode", "implicit", _choice("implicit", "explicit")
    )
    """``implicit``: a poll's records are accepted by the next poll, commit or close;
    ``explicit``: each record is acknowledged with ``acknowledge``."""
    max_poll_records: int = setting("max.poll.records", 500, _int(1, INT_MAX))
    fetch_min_bytes: int = setting("fetch.min.bytes", 1, _int(0, INT_MAX))
    fetch_max_bytes: int = setting("fetch.max.bytes", 52_428_800, _int(0, INT_MAX))
    fetch_max_wait_ms: int = setting("fetch.max.wait.ms", 500, _int(0, INT_MAX))
    check_crcs: bool = setting("check.crcs", True, _bool)
    client_rack: str = setting("client.rack", "", _str)
    default_api_timeout_ms: int = setting("default.api.timeout.ms", 60_000, _int(0, INT_MAX))
    key_deserializer: Any = setting("key.deserializer", None, _callable_or_none)
    value_deserializer: Any = setting("value.deserializer", None, _callable_or_none)

    KIND: ClassVar[str] = "share consumer"

    def _check(self, explicit: set[str]) -> None:
        super()._check(explicit)
        if not self.group_id:
            raise ConfigError("group.id", "required: a share consumer reads as a share group")


@attrs.frozen(kw_only=True)
class AdminConfig(ClientConfig):
    """Admin client settings."""

    default_api_timeout_ms: int = setting("default.api.timeout.ms", 60_000, _int(0, INT_MAX))

    KIND: ClassVar[str] = "admin"
