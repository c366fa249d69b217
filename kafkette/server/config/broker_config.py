"""Broker configuration: Kafka's broker property names and defaults.

:class:`BrokerConfig` holds what the broker core acts on. Topic-level
defaults (``log.segment.bytes``, ``log.retention.ms``, ``message.max.bytes``
...) are kept as a :class:`~kafkette.backends.LogConfig`, the base every
topic's own overrides apply to. :meth:`BrokerConfig.from_properties` accepts
Kafka's names (``num.partitions``; the catalogue is
:data:`~kafkette.server.config.catalog.BROKER_CONFIGS`) and rejects unknown
ones and invalid values, naming them. Where Kafka has several spellings of one
setting, the finer one wins whatever the order (``log.retention.ms`` over
``log.retention.minutes`` over ``log.retention.hours``); ``broker.id`` is
``node.id`` and ``log.dirs``/``log.dir`` (the first directory) the data
directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kafkette.backends import LogConfig
from kafkette.errors import ConfigError, InvalidConfigError
from kafkette.server.config.catalog import (
    BROKER_CONFIGS,
    SYNONYM_OF,
    TOPIC_CONFIGS,
    validate_topic_configs,
)
from kafkette.server.config.listeners import advertised_address
from kafkette.server.connection_quotas import parse_overrides
from kafkette.server.sasl.credentials import MECHANISMS as SASL_MECHANISMS
from kafkette.server.sasl.reauth import parse_reauth_ms

DEFAULT_PORT = 9092


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"must be true or false, got {value!r}")
    return lowered == "true"


def _int(low: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(f"must be an integer, got {value!r}") from None
        if number < low:
            raise ValueError(f"must be at least {low}, got {number}")
        return number

    return parse


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(value: str) -> str:
    name = value.strip()
    if name not in ("", RACK_AWARE_SELECTOR):
        raise ValueError(f"the replica selectors served are {RACK_AWARE_SELECTOR} and none")
    return name


def _sasl_mechanisms(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(m.strip().upper() for m in value.split(",") if m.strip()))
    if not names:
        raise ValueError("expected at least one mechanism")
    for name in names:
        if name not in SASL_MECHANISMS:
            raise ValueError(f"{name} is not supported (supported: {', '.join(SASL_MECHANISMS)})")
    return names


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")
"""Kafka's authorizers (KRaft's and ZooKeeper's), both served by the same ACL rules."""


def _connection_overrides(value: str) -> str:
    parse_overrides(value)  # raises ValueError naming the bad entry
    return value.strip()


def _authorizer_class(value: str) -> str:
    name = value.strip()
    if name and name not in AUTHORIZER_CLASSES:
        raise ValueError(f"unknown authorizer {name!r} (empty, or {STANDARD_AUTHORIZER})")
    return name


def _super_users(value: str) -> tuple[str, ...]:
    users = tuple(u.strip() for u in value.split(";") if u.strip())
    for user in users:
        kind, colon, name = user.partition(":")
        if not colon or not kind or not name:
            raise ValueError(f"expected TYPE:NAME;TYPE:NAME, got {user!r}")
    return users


def _consumer_assignors(value: str) -> tuple[str, ...]:
    # Checked here so that a bad name is refused with the other settings.
    from kafkette.server.groups.consumer_protocol import ConsumerGroupConfig

    try:
        return ConsumerGroupConfig.from_properties({"group.consumer.assignors": value}).assignors
    except ConfigError as exc:
        raise ValueError(exc.reason) from None


def _consumer_migration_policy(value: str) -> str:
    from kafkette.server.groups.consumer_protocol import ConsumerGroupConfig

    try:
        properties = {"group.consumer.migration.policy": value}
        return ConsumerGroupConfig.from_properties(properties).migration_policy
    except ConfigError as exc:
        raise ValueError(exc.reason) from None


_BROKER_PARSERS: dict[str, Callable[[str], Any]] = {
    "node.id": _int(0),
    "num.partitions": _int(1),
    "default.replication.factor": _int(1),
    "auto.create.topics.enable": _bool,
    "delete.topic.enable": _bool,
    "socket.request.max.bytes": _int(1),
    "group.initial.rebalance.delay.ms": _int(0),
    "group.min.session.timeout.ms": _int(0),
    "group.max.session.timeout.ms": _int(0),
    "group.consumer.session.timeout.ms": _int(1),
    "group.consumer.heartbeat.interval.ms": _int(1),
    "group.consumer.min.session.timeout.ms": _int(1),
    "group.consumer.max.session.timeout.ms": _int(1),
    "group.consumer.min.heartbeat.interval.ms": _int(1),
    "group.consumer.max.heartbeat.interval.ms": _int(1),
    "group.consumer.max.size": _int(1),
    "group.consumer.assignors": _consumer_assignors,
    "group.share.delivery.count.limit": _int(2),
    "group.share.record.lock.duration.ms": _int(1000),
    "group.share.session.timeout.ms": _int(1),
    "group.share.heartbeat.interval.ms": _int(1),
    "group.share.min.session.timeout.ms": _int(1),
    "group.share.max.session.timeout.ms": _int(1),
    "group.share.min.heartbeat.interval.ms": _int(1),
    "group.share.max.heartbeat.interval.ms": _int(1),
    "group.share.min.record.lock.duration.ms": _int(1000),
    "group.share.max.record.lock.duration.ms": _int(30_000),
    "group.share.partition.max.record.locks": _int(100),
    "group.share.max.size": _int(1),
    "group.consumer.migration.policy": _consumer_migration_policy,
    "offsets.retention.minutes": _int(1),
    "offsets.topic.num.partitions": _int(1),
    "offsets.topic.segment.bytes": _int(1),
    "offset.metadata.max.bytes": _int(0),
    "transaction.state.log.num.partitions": _int(1),
    "transaction.state.log.segment.bytes": _int(1),
    "max.connections.per.ip": _int(0),
    "max.connections.per.ip.overrides": _connection_overrides,
    "authorizer.class.name": _authorizer_class,
    "super.users": _super_users,
    "allow.everyone.if.no.acl.found": _bool,
    "sasl.enabled.mechanisms": _sasl_mechanisms,
    "transaction.max.timeout.ms": _int(1),
    "transactional.id.expiration.ms": _int(1),
    "producer.id.expiration.ms": _int(1),
    "connections.max.idle.ms": _int(-1),
    "connections.max.reauth.ms": parse_reauth_ms,
    "replica.fetch.max.bytes": _int(0),
    "broker.rack": str,
    "replica.selector.class": _replica_selector,
    "fetch.max.bytes": _int(0),
    "log.retention.check.interval.ms": _int(1),
    "log.cleaner.backoff.ms": _int(1),
    "telemetry.max.bytes": _int(1),
}


@attrs.define
class BrokerConfig:
    """Settings of one broker, with Kafka's defaults (and this project's for a dev broker)."""

    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: str | None = None
    read_only: bool = False
    """Serve ``data_dir`` without writing to it (:mod:`kafkette.server.data_dir.read_only`)."""
    cluster_id: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    group_initial_rebalance_delay_ms: int = 0  # Kafka's sample server.properties value
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    """The bounds of the group configs ``consumer.session.timeout.ms`` and
    ``consumer.heartbeat.interval.ms`` (:mod:`kafkette.server.config.group_configs`)."""
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_migration_policy: str = "bidirectional"
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """``group.consumer.*``: the consumer group protocol (KIP-848), read by
    :class:`~kafkette.server.groups.consumer_protocol.ConsumerGroupConfig`."""
    group_share_delivery_count_limit: int = 5
    group_share_record_lock_duration_ms: int = 30_000
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_partition_max_record_locks: int = 2_000
    group_share_max_size: int = 200
    """``group.share.*``: share groups (KIP-932), read by
    :class:`~kafkette.server.share.coordinator.ShareConfig`; the min/max pairs bound the
    group configs ``share.*`` (:mod:`kafkette.server.config.group_configs`)."""
    offsets_retention_minutes: int = 10_080
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    offset_metadata_max_bytes: int = 4096
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104_857_600
    max_connections_per_ip: int = 2_147_483_647
    max_connections_per_ip_overrides: str = ""
    """``HOST_OR_IP:N,...`` (:mod:`kafkette.server.connection_quotas`)."""
    authorizer_class_name: str = ""
    """Empty: every request is allowed; Kafka's StandardAuthorizer: ACLs decide
    (:mod:`kafkette.server.acl`)."""
    super_users: tuple[str, ...] = ()
    """``super.users``: principals the authorizer allows everything."""
    allow_everyone_if_no_acl_found: bool = False
    sasl_enabled_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    """Offered when the listener has SASL users (``kafkette serve --sasl-user``)."""
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    producer_id_expiration_ms: int = 86_400_000
    connections_max_idle_ms: int = 600_000
    connections_max_reauth_ms: int = 0
    """KIP-368: the SASL session lifetime (0 or less: sessions do not expire); the
    listeners read it (:mod:`kafkette.server.sasl.reauth`), with per-listener forms."""
    replica_fetch_max_bytes: int = 1_048_576
    broker_rack: str = ""
    """``broker.rack`` (simulated nodes: one each, :func:`~kafkette.server.nodes.node_racks`)."""
    replica_selector_class: str = ""
    """KIP-392's replica selector: empty (the leader serves) or Kafka's RackAwareReplicaSelector."""
    fetch_max_bytes: int = 57_671_680
    log_retention_check_interval_ms: int = 300_000
    log_cleaner_backoff_ms: int = 15_000
    telemetry_max_bytes: int = 1_048_576
    """The largest metrics payload a client may push (KIP-714), before and after
    decompression."""
    log: LogConfig = attrs.Factory(LogConfig)
    """Defaults of every topic's log settings (the ``log.*`` broker properties)."""
    overrides: dict[str, str] = attrs.Factory(dict)
    """Broker properties given explicitly (for DescribeConfigs sources)."""

    @property
    def advertised(self) -> tuple[str, int]:
        """Host and port clients are told to connect to: those of the listener the
        current request came in on (:data:`~kafkette.server.config.listeners.advertised_address`)
        when it has its own."""
        listener = advertised_address.get()
        if listener is not None:
            return listener
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    @classmethod
    def property_names(cls) -> frozenset[str]:
        """Every broker property name :meth:`from_properties` accepts."""
        return frozenset(BROKER_CONFIGS) | frozenset(_ALIASES) | frozenset(_DATA_DIRS)

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], *, base: BrokerConfig | None = None
    ) -> BrokerConfig:
        """A config from Kafka broker properties over ``base``; unknown names are errors."""
        config = base if base is not None else cls()
        given = {_ALIASES.get(k, k): str(v) for k, v in properties.items()}
        for name in given:
            if name not in BROKER_CONFIGS and name not in _DATA_DIRS:
                raise ConfigError(name, "unknown broker configuration")
        changes: dict[str, Any] = {}
        for name, value in given.items():
            parser = _BROKER_PARSERS.get(name)
            if parser is not None:
                try:
                    changes[name.replace(".", "_")] = parser(value)
                except ValueError as exc:
                    raise ConfigError(name, str(exc)) from None
        for name in _DATA_DIRS:
            if name in given:
                first = given[name].split(",")[0].strip()
                if not first:
                    raise ConfigError(name, "expected a directory")
                changes["data_dir"] = first
                break
        overrides = {**config.overrides, **given}
        changes["log"] = static_log_config(overrides)
        return attrs.evolve(config, overrides=overrides, **changes)


_ALIASES = {"broker.id": "node.id"}
_DATA_DIRS = ("log.dirs", "log.dir")


def static_log_config(properties: Mapping[str, str]) -> LogConfig:
    """Topic defaults from broker properties (raises :class:`ConfigError` naming one)."""
    backend: dict[str, str] = {}
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            raw = properties.get(synonym.name)
            if raw is None:
                continue
            value = str(raw)
            if synonym.factor != 1:
                try:
                    value = str(int(value.strip()) * synonym.factor)
                except ValueError:
                    raise ConfigError(synonym.name, f"must be an integer, got {raw!r}") from None
            try:
                validate_topic_configs({topic.name: value})
            except InvalidConfigError as exc:
                raise ConfigError(synonym.name, exc.detail or str(exc)) from None
            if not topic.inert:
                backend[topic.name] = value
            break
    return LogConfig.from_kafka(backend)


assert set(BROKER_CONFIGS) == set(SYNONYM_OF) | set(_BROKER_PARSERS)
