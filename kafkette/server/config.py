"""Broker configuration: Kafka's broker property names and defaults.

:class:`BrokerConfig` holds what the broker core acts on. Topic-level
defaults (``log.segment.bytes``, ``log.retention.ms``, ``message.max.bytes``
...) are kept as a :class:`~kafkette.backends.LogConfig`, the base every
topic's own overrides apply to. :meth:`BrokerConfig.from_properties` accepts
Kafka's names (``num.partitions``) and rejects unknown ones, naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kafkette.backends import LogConfig
from kafkette.errors import ConfigError

DEFAULT_PORT = 9092

# broker property -> topic property it sets the default of
TOPIC_DEFAULT_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
}
"""Broker properties that are the defaults of topic properties (Kafka's synonyms)."""

_HOURS_AND_MINUTES = {
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
}


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"must be true or false, got {value!r}")
    return lowered == "true"


def _int(low: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value.strip())
        if number < low:
            raise ValueError(f"must be at least {low}, got {number}")
        return number

    return parse


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
    "offsets.retention.minutes": _int(1),
    "transaction.max.timeout.ms": _int(1),
    "transactional.id.expiration.ms": _int(1),
    "producer.id.expiration.ms": _int(1),
    "connections.max.idle.ms": _int(-1),
    "replica.fetch.max.bytes": _int(0),
    "fetch.max.bytes": _int(0),
    "log.retention.check.interval.ms": _int(1),
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
    cluster_id: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    group_initial_rebalance_delay_ms: int = 0  # Kafka's sample server.properties value
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_minutes: int = 10_080
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    producer_id_expiration_ms: int = 86_400_000
    connections_max_idle_ms: int = 600_000
    replica_fetch_max_bytes: int = 1_048_576
    fetch_max_bytes: int = 57_671_680
    log_retention_check_interval_ms: int = 300_000
    log: LogConfig = attrs.Factory(LogConfig)
    """Defaults of every topic's log settings (the ``log.*`` broker properties)."""
    overrides: dict[str, str] = attrs.Factory(dict)
    """Broker properties given explicitly (for DescribeConfigs sources)."""

    @property
    def advertised(self) -> tuple[str, int]:
        """Host and port clients are told to connect to."""
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    @classmethod
    def property_names(cls) -> frozenset[str]:
        return (
            frozenset(_BROKER_PARSERS)
            | frozenset(TOPIC_DEFAULT_SYNONYMS)
            | frozenset(_HOURS_AND_MINUTES)
        )

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], *, base: BrokerConfig | None = None
    ) -> BrokerConfig:
        """A config from Kafka broker properties over ``base``; unknown names are errors."""
        config = base if base is not None else cls()
        changes: dict[str, Any] = {}
        topic_defaults: dict[str, str] = {}
        for name, raw in properties.items():
            value = str(raw)
            if name in _HOURS_AND_MINUTES:
                target, factor = _HOURS_AND_MINUTES[name]
                try:
                    value = str(int(value) * factor)
                except ValueError:
                    raise ConfigError(name, f"must be an integer, got {value!r}") from None
                topic_defaults[TOPIC_DEFAULT_SYNONYMS[target]] = value
            elif name in TOPIC_DEFAULT_SYNONYMS:
                topic_defaults[TOPIC_DEFAULT_SYNONYMS[name]] = value
            elif name in _BROKER_PARSERS:
                try:
                    changes[name.replace(".", "_")] = _BROKER_PARSERS[name](value)
                except ValueError as exc:
                    raise ConfigError(name, str(exc)) from None
            else:
                raise ConfigError(name, "unknown broker configuration")
        if topic_defaults:
            try:
                changes["log"] = LogConfig.from_kafka(topic_defaults, base=config.log)
            except Exception as exc:
                raise ConfigError(", ".join(sorted(topic_defaults)), str(exc)) from None
        overrides = {**config.overrides, **{k: str(v) for k, v in properties.items()}}
        return attrs.evolve(config, overrides=overrides, **changes)
