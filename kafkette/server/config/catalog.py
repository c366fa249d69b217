"""Kafka's topic and broker configuration definitions, as DescribeConfigs reports them.

Every topic configuration Kafka (3.9) reports for a topic is listed in
:data:`TOPIC_CONFIGS` with its type, default and broker synonyms. Those the
storage backends act on are :class:`~kafkette.backends.LogConfig` fields
(their defaults come from there); the others are *inert* on a single node
without tiered storage or replication (throttled replicas, local retention,
compression levels, ``remote.*``): they are validated, stored, described and
otherwise ignored, so tools that set them keep working. ``remote.storage.enable``
can only be ``false`` (this broker has no tiered storage, as Kafka with
``remote.log.storage.system.enable=false`` refuses it too).
``message.format.version`` (deprecated in Kafka 3, removed in 4) is not
accepted.

:data:`BROKER_CONFIGS` lists the broker properties this broker understands,
with Kafka's defaults (``kafkette serve --set`` takes these).
:data:`ALL_BROKER_CONFIGS` is every broker configuration of Kafka 4
(:mod:`kafkette.server.config.kafka_broker_configs`, generated from Kafka's sources by
``tools/kafka-broker-configs``) with ours in place of Kafka's where we
implement one. Kafka's dynamic ones (``DynamicBrokerConfig``) may be changed
by AlterConfigs/IncrementalAlterConfigs on the broker resource, per broker or
cluster-wide as Kafka allows, and ``listener.name.<listener>.<config>`` too;
those that are defaults of topic configurations (``log.retention.ms`` for
``retention.ms``...) are applied to the topics at once, the others are
*inert*: checked by type, stored, described, and not acted upon.

Sources (``ConfigSource`` in the protocol): ``DYNAMIC_TOPIC_CONFIG`` (1) for a
topic override, ``DYNAMIC_BROKER_CONFIG`` (2) set on this broker by id,
``DYNAMIC_DEFAULT_BROKER_CONFIG`` (3) set for every broker (empty resource
name), ``STATIC_BROKER_CONFIG`` (4) from ``server.properties``/``--set``,
``DEFAULT_CONFIG`` (5) Kafka's default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum

import attrs

from kafkette.backends import LogConfig
from kafkette.backends.config import LONG_MAX
from kafkette.errors import InvalidConfigError, InvalidRequestError
from kafkette.server.config import kafka_broker_configs


class ConfigSource(IntEnum):
    """Where a configuration value comes from (DescribeConfigs ``ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """A configuration's data type (DescribeConfigs v3+ ``ConfigType``)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ResourceType(IntEnum):
    """Config resource types (``ConfigResource.Type``)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32


_INT_MAX = 2**31 - 1


@attrs.frozen(slots=True)
class Synonym:
    """A broker property that sets the default of a topic configuration."""

    name: str
    factor: int = 1
    """What one unit of the broker property is in the topic's unit (hours -> ms)."""


@attrs.frozen(slots=True)
class TopicConfigDef:
    """One topic configuration."""

    name: str
    type: ConfigType
    default: str
    doc: str
    synonyms: tuple[Synonym, ...] = ()
    """Broker properties whose value is the default, in priority order (first is primary)."""
    validate: Callable[[str], str] | None = None
    """For inert configurations: returns the normalised value or raises ValueError."""

    @property
    def inert(self) -> bool:
        """Accepted and described, but not acted upon by this broker."""
        return self.validate is not None


@attrs.frozen(slots=True)
class BrokerConfigDef:
    """One broker property."""

    name: str
    type: ConfigType
    default: str | None
    doc: str
    dynamic: bool = False
    """Whether AlterConfigs may change it at run time."""
    per_broker: bool = False
    """Dynamic for one broker only (Kafka's PerBrokerConfigs), not at the cluster default."""
    internal: bool = False
    """Kafka's internal configs: never described, never dynamic."""
    implemented: bool = True
    """Whether this broker acts on it; the others are inert (stored and described only)."""
    check: tuple[str, ...] = ()
    """Kafka's validator of a dynamic value: ('at_least', MIN), ('between', MIN, MAX),
    ('one_of', *STRINGS), or () (see kafka_broker_configs)."""

    @property
    def sensitive(self) -> bool:
        """Passwords are described without their value."""
        return self.type == ConfigType.PASSWORD


# ---- validators of the inert topic configurations


def _long_at_least(low: int) -> Callable[[str], str]:
    def parse(value: str) -> str:
        number = int(value.strip())
        if not low <= number <= LONG_MAX:
            raise ValueError(f"must be at least {low}, got {number}")
        return str(number)

    return parse


def _int_between(low: int, high: int) -> Callable[[str], str]:
    def parse(value: str) -> str:
        number = int(value.strip())
        if not low <= number <= high:
            raise ValueError(f"must be between {low} and {high}, got {number}")
        return str(number)

    return parse


def _gzip_level(value: str) -> str:
    number = int(value.strip())
    if number != -1 and not 1 <= number <= 9:
        raise ValueError(f"must be -1 or between 1 and 9, got {number}")
    return str(number)


def _false_only(value: str) -> str:
    lowered = value.strip().lower()
    if lowered == "false":
        return "false"
    if lowered == "true":
        raise ValueError("tiered storage is not available on this broker")
    raise ValueError(f"must be true or false, got {value!r}")


def _bool(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"must be true or false, got {value!r}")
    return lowered


def _throttled_replicas(value: str) -> str:
    """``*`` or a list of ``partition:broker`` pairs (Kafka's ThrottledReplicaListValidator)."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if items == ["*"]:
        return "*"
    for item in items:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"must be '*' or a list of partitionId:brokerId pairs, got {value!r}")
    return ",".join(items)


_log_defaults = LogConfig().to_kafka()


def _topic(
    name: str,
    type_: ConfigType,
    doc: str,
    *synonyms: str | tuple[str, int],
    default: str | None = None,
    validate: Callable[[str], str] | None = None,
) -> TopicConfigDef:
    syns = tuple(Synonym(s) if isinstance(s, str) else Synonym(*s) for s in synonyms)
    value = default if default is not None else _log_defaults[name]
    return TopicConfigDef(name, type_, value, doc, syns, validate)


_HOUR = 3_600_000
_MINUTE = 60_000

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in sorted(
        [
            _topic(
                "cleanup.policy",
                ConfigType.LIST,
                "'delete' (drop old segments), 'compact' (keep the latest value per key) or both.",
                "log.cleanup.policy",
            ),
            _topic(
                "compression.gzip.level",
                ConfigType.INT,
                "The gzip level when compression.type is gzip (accepted, not used).",
                "compression.gzip.level",
                default="-1",
                validate=_gzip_level,
            ),
            _topic(
                "compression.lz4.level",
                ConfigType.INT,
                "The lz4 level when compression.type is lz4 (accepted, not used).",
                "compression.lz4.level",
                default="9",
                validate=_int_between(1, 17),
            ),
            _topic(
                "compression.type",
                ConfigType.STRING,
                "The compression of stored batches: 'producer' keeps the producer's.",
                "compression.type",
            ),
            _topic(
                "compression.zstd.level",
                ConfigType.INT,
                "The zstd level when compression.type is zstd (accepted, not used).",
                "compression.zstd.level",
                default="3",
                validate=_int_between(-131072, 22),
            ),
            _topic(
                "delete.retention.ms",
                ConfigType.LONG,
                "How long tombstones are kept in a compacted topic.",
                "log.cleaner.delete.retention.ms",
            ),
            _topic(
                "file.delete.delay.ms",
                ConfigType.LONG,
                "How long to wait before deleting a file from the filesystem.",
                "log.segment.delete.delay.ms",
            ),
            _topic(
                "flush.messages",
                ConfigType.LONG,
                "Force an fsync after this many messages.",
                "log.flush.interval.messages",
            ),
            _topic(
                "flush.ms",
                ConfigType.LONG,
                "Force an fsync after this much time.",
                "log.flush.interval.ms",
                "log.flush.scheduler.interval.ms",
            ),
            _topic(
                "follower.replication.throttled.replicas",
                ConfigType.LIST,
                "Replicas throttled on the follower side (accepted, not used: one node).",
                default="",
                validate=_throttled_replicas,
            ),
            _topic(
                "index.interval.bytes",
                ConfigType.INT,
                "Bytes of log between two offset index entries.",
                "log.index.interval.bytes",
            ),
            _topic(
                "leader.replication.throttled.replicas",
                ConfigType.LIST,
                "Replicas throttled on the leader side (accepted, not used: one node).",
                default="",
                validate=_throttled_replicas,
            ),
            _topic(
                "local.retention.bytes",
                ConfigType.LONG,
                "Local retention with tiered storage (accepted, not used).",
                "log.local.retention.bytes",
                default="-2",
                validate=_long_at_least(-2),
            ),
            _topic(
                "local.retention.ms",
                ConfigType.LONG,
                "Local retention with tiered storage (accepted, not used).",
                "log.local.retention.ms",
                default="-2",
                validate=_long_at_least(-2),
            ),
            _topic(
                "max.compaction.lag.ms",
                ConfigType.LONG,
                "The longest a record stays uncompacted.",
                "log.cleaner.max.compaction.lag.ms",
            ),
            _topic(
                "max.message.bytes",
                ConfigType.INT,
                "The largest record batch accepted.",
                "message.max.bytes",
            ),
            _topic(
                "message.downconversion.enable",
                ConfigType.BOOLEAN,
                "Whether old fetch versions may be down-converted.",
                "log.message.downconversion.enable",
            ),
            _topic(
                "message.timestamp.after.max.ms",
                ConfigType.LONG,
                "How far in the future a CreateTime timestamp may be.",
                "log.message.timestamp.after.max.ms",
            ),
            _topic(
                "message.timestamp.before.max.ms",
                ConfigType.LONG,
                "How far in the past a CreateTime timestamp may be.",
                "log.message.timestamp.before.max.ms",
            ),
            _topic(
                "message.timestamp.difference.max.ms",
                ConfigType.LONG,
                "Deprecated: the largest difference between a timestamp and the broker's clock.",
                "log.message.timestamp.difference.max.ms",
            ),
            _topic(
                "message.timestamp.type",
                ConfigType.STRING,
                "CreateTime (the producer's) or LogAppendTime (the broker's).",
                "log.message.timestamp.type",
            ),
            _topic(
                "min.cleanable.dirty.ratio",
                ConfigType.DOUBLE,
                "The dirty share of a log above which it is compacted.",
                "log.cleaner.min.cleanable.ratio",
            ),
            _topic(
                "min.compaction.lag.ms",
                ConfigType.LONG,
                "The least time a record stays uncompacted.",
                "log.cleaner.min.compaction.lag.ms",
            ),
            _topic(
                "min.insync.replicas",
                ConfigType.INT,
                "Replicas that must acknowledge an acks=all write.",
                "min.insync.replicas",
            ),
            _topic(
                "preallocate", ConfigType.BOOLEAN, "Preallocate segment files.", "log.preallocate"
            ),
            _topic(
                "remote.log.copy.disable",
                ConfigType.BOOLEAN,
                "Stop copying to tiered storage (accepted, not used).",
                default="false",
                validate=_bool,
            ),
            _topic(
                "remote.log.delete.on.disable",
                ConfigType.BOOLEAN,
                "Delete remote data when tiered storage is disabled (accepted, not used).",
                default="false",
                validate=_bool,
            ),
            _topic(
                "remote.storage.enable",
                ConfigType.BOOLEAN,
                "Tiered storage for the topic (only false: this broker has none).",
                default="false",
                validate=_false_only,
            ),
            _topic(
                "retention.bytes",
                ConfigType.LONG,
                "The size a partition may grow to before old segments are deleted.",
                "log.retention.bytes",
            ),
            _topic(
                "retention.ms",
                ConfigType.LONG,
                "How long records are kept before their segment is deleted (-1: forever).",
                "log.retention.ms",
                ("log.retention.minutes", _MINUTE),
                ("log.retention.hours", _HOUR),
            ),
            _topic(
                "segment.bytes",
                ConfigType.INT,
                "The size of a log segment file.",
                "log.segment.bytes",
            ),
            _topic(
                "segment.index.bytes",
                ConfigType.INT,
                "The size of a segment's offset index.",
                "log.index.size.max.bytes",
            ),
            _topic(
                "segment.jitter.ms",
                ConfigType.LONG,
                "The largest random jitter subtracted from segment.ms.",
                "log.roll.jitter.ms",
                ("log.roll.jitter.hours", _HOUR),
            ),
            _topic(
                "segment.ms",
                ConfigType.LONG,
                "The time after which a segment is rolled even if not full.",
                "log.roll.ms",
                ("log.roll.hours", _HOUR),
            ),
            _topic(
                "unclean.leader.election.enable",
                ConfigType.BOOLEAN,
                "Whether an out-of-sync replica may become leader.",
                "unclean.leader.election.enable",
            ),
        ],
        key=lambda d: d.name,
    )
}
"""Every topic configuration, by name (sorted, as Kafka lists them)."""

_missing = LogConfig.names() - set(TOPIC_CONFIGS)
assert not _missing, f"LogConfig settings without a definition: {sorted(_missing)}"


def _broker(
    name: str,
    type_: ConfigType,
    default: str | None,
    doc: str,
    *,
    dynamic: bool = False,
) -> BrokerConfigDef:
    return BrokerConfigDef(name, type_, default, doc, dynamic)


# Kafka's defaults of the broker properties that set topic defaults: the
# ``*.hours`` form carries the default where the ``*.ms`` form has none.
_BROKER_SYNONYM_DEFAULTS: dict[str, str | None] = {
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": "0",
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": str(LONG_MAX),
}


def _topic_default_brokers() -> list[BrokerConfigDef]:
    result = []
    for topic in TOPIC_CONFIGS.values():
        for index, synonym in enumerate(topic.synonyms):
            default = _BROKER_SYNONYM_DEFAULTS.get(synonym.name, topic.default)
            type_ = ConfigType.INT if synonym.name.endswith((".hours", ".minutes")) else topic.type
            result.append(
                _broker(
                    synonym.name,
                    type_,
                    default,
                    f"The default of the topic configuration {topic.name}.",
                    # Kafka reconfigures the primary synonym only (not *.hours, *.minutes)
                    dynamic=index == 0 and not topic.inert,
                )
            )
    return result


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    d.name: d
    for d in sorted(
        [
            *_topic_default_brokers(),
            _broker("node.id", ConfigType.INT, "1", "The id of this node."),
            _broker(
                "num.partitions",
                ConfigType.INT,
                "1",
                "Partitions of a topic created without a count.",
            ),
            _broker(
                "default.replication.factor",
                ConfigType.INT,
                "1",
                "Replication factor of a topic created without one.",
            ),
            _broker(
                "auto.create.topics.enable",
                ConfigType.BOOLEAN,
                "true",
                "Create a topic when a client asks for its metadata.",
            ),
            _broker(
                "delete.topic.enable",
                ConfigType.BOOLEAN,
                "true",
                "Whether DeleteTopics may delete topics.",
            ),
            _broker(
                "socket.request.max.bytes",
                ConfigType.INT,
                "104857600",
                "The largest request accepted.",
            ),
            _broker(
                "group.initial.rebalance.delay.ms",
                ConfigType.INT,
                "0",
                "How long a new group waits for more members before its first "
                "rebalance (0 here, as in Kafka's sample server.properties).",
            ),
            _broker(
                "group.min.session.timeout.ms",
                ConfigType.INT,
                "6000",
                "The shortest session timeout a consumer may ask for.",
            ),
            _broker(
                "group.max.session.timeout.ms",
                ConfigType.INT,
                "1800000",
                "The longest session timeout a consumer may ask for.",
            ),
            _broker(
                "group.consumer.session.timeout.ms",
                ConfigType.INT,
                "45000",
                "The session timeout of members of consumer-type groups (KIP-848).",
            ),
            _broker(
                "group.consumer.heartbeat.interval.ms",
                ConfigType.INT,
                "5000",
                "The heartbeat interval given to members of consumer-type groups.",
            ),
            _broker(
                "group.consumer.min.session.timeout.ms",
                ConfigType.INT,
                "45000",
                "The shortest consumer.session.timeout.ms a group config may set.",
            ),
            _broker(
                "group.consumer.max.session.timeout.ms",
                ConfigType.INT,
                "60000",
                "The longest consumer.session.timeout.ms a group config may set.",
            ),
            _broker(
                "group.consumer.min.heartbeat.interval.ms",
                ConfigType.INT,
                "5000",
                "The shortest consumer.heartbeat.interval.ms a group config may set.",
            ),
            _broker(
                "group.consumer.max.heartbeat.interval.ms",
                ConfigType.INT,
                "15000",
                "The longest consumer.heartbeat.interval.ms a group config may set.",
            ),
            _broker(
                "group.consumer.max.size",
                ConfigType.INT,
                "2147483647",
                "The most members a consumer-type group may have.",
            ),
            _broker(
                "group.share.delivery.count.limit",
                ConfigType.INT,
                "5",
                "Deliveries of a share group's record before it is archived.",
            ),
            _broker(
                "group.share.record.lock.duration.ms",
                ConfigType.INT,
                "30000",
                "How long a share group's member holds a record it acquired.",
            ),
            _broker(
                "group.share.session.timeout.ms",
                ConfigType.INT,
                "45000",
                "The session timeout of members of share groups (KIP-932).",
            ),
            _broker(
                "group.share.heartbeat.interval.ms",
                ConfigType.INT,
                "5000",
                "The heartbeat interval given to members of share groups.",
            ),
            _broker(
                "group.share.min.session.timeout.ms",
                ConfigType.INT,
                "45000",
                "The shortest share.session.timeout.ms a group config may set.",
            ),
            _broker(
                "group.share.max.session.timeout.ms",
                ConfigType.INT,
                "60000",
                "The longest share.session.timeout.ms a group config may set.",
            ),
            _broker(
                "group.share.min.heartbeat.interval.ms",
                ConfigType.INT,
                "5000",
                "The shortest share.heartbeat.interval.ms a group config may set.",
            ),
            _broker(
                "group.share.max.heartbeat.interval.ms",
                ConfigType.INT,
                "15000",
                "The longest share.heartbeat.interval.ms a group config may set.",
            ),
            _broker(
                "group.share.min.record.lock.duration.ms",
                ConfigType.INT,
                "15000",
                "The shortest share.record.lock.duration.ms a group config may set.",
            ),
            _broker(
                "group.share.max.record.lock.duration.ms",
                ConfigType.INT,
                "60000",
                "The longest share.record.lock.duration.ms a group config may set.",
            ),
            _broker(
                "group.share.partition.max.record.locks",
                ConfigType.INT,
                "2000",
                "The most records of one share partition in flight.",
            ),
            _broker(
                "group.share.max.size",
                ConfigType.INT,
                "200",
                "The most members a share group may have.",
            ),
            _broker(
                "group.consumer.assignors",
                ConfigType.LIST,
                "uniform,range",
                "The server assignors of consumer-type groups; the first is the default.",
            ),
            _broker(
                "group.consumer.migration.policy",
                ConfigType.STRING,
                "bidirectional",
                "Online migration between classic and consumer groups: bidirectional, "
                "upgrade, downgrade or disabled.",
            ),
            _broker(
                "offsets.retention.minutes",
                ConfigType.INT,
                "10080",
                "How long committed offsets of an empty group are kept.",
            ),
            _broker(
                "offsets.topic.num.partitions",
                ConfigType.INT,
                "50",
                "Partitions of the internal topic __consumer_offsets, made on first use "
                "(changing it afterwards moves groups to other partitions).",
            ),
            _broker(
                "offsets.topic.segment.bytes",
                ConfigType.INT,
                "104857600",
                "segment.bytes of __consumer_offsets, kept small for faster compaction "
                "and loading.",
            ),
            _broker(
                "offset.metadata.max.bytes",
                ConfigType.INT,
                "4096",
                "The longest metadata string a committed offset may carry.",
            ),
            _broker(
                "transaction.state.log.num.partitions",
                ConfigType.INT,
                "50",
                "Partitions of the internal topic __transaction_state, made on first use.",
            ),
            _broker(
                "transaction.state.log.segment.bytes",
                ConfigType.INT,
                "104857600",
                "segment.bytes of __transaction_state.",
            ),
            _broker(
                "max.connections.per.ip",
                ConfigType.INT,
                "2147483647",
                "The most connections one client address may hold, across listeners.",
                dynamic=True,
            ),
            _broker(
                "max.connections.per.ip.overrides",
                ConfigType.STRING,
                "",
                "Per-address exceptions to max.connections.per.ip: HOST_OR_IP:N,...",
                dynamic=True,
            ),
            _broker(
                "authorizer.class.name",
                ConfigType.STRING,
                "",
                "The authorizer: empty (every request allowed) or Kafka's "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs; kafkette "
                "serve --authorizer).",
            ),
            _broker(
                "super.users",
                ConfigType.LIST,
                "",
                "Principals the authorizer allows everything, User:NAME;User:OTHER.",
            ),
            _broker(
                "allow.everyone.if.no.acl.found",
                ConfigType.BOOLEAN,
                "false",
                "Whether the authorizer allows a resource that has no ACL at all.",
            ),
            _broker(
                "sasl.enabled.mechanisms",
                ConfigType.LIST,
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "SASL mechanisms the listener offers once users are given (kafkette serve "
                "--sasl-user); --sasl-mechanisms wins over it.",
            ),
            _broker(
                "transaction.max.timeout.ms",
                ConfigType.INT,
                "900000",
                "The longest transaction timeout a producer may ask for.",
            ),
            _broker(
                "transactional.id.expiration.ms",
                ConfigType.INT,
                "604800000",
                "How long an idle transactional id is kept.",
            ),
            _broker(
                "producer.id.expiration.ms",
                ConfigType.INT,
                "86400000",
                "How long an idle producer id's state is kept.",
            ),
            _broker(
                "connections.max.idle.ms",
                ConfigType.LONG,
                "600000",
                "Idle connections are closed after this long (-1: never).",
            ),
            _broker(
                "connections.max.reauth.ms",
                ConfigType.LONG,
                "0",
                "A positive value is the SASL session lifetime told to clients when they "
                "authenticate (KIP-368); a connection that has not re-authenticated by then "
                "is closed at its next request. Per listener and mechanism: "
                "listener.name.<listener>.<mechanism>.connections.max.reauth.ms.",
            ),
            _broker(
                "broker.rack",
                ConfigType.STRING,
                None,
                "Rack of the broker. With kafkette serve --nodes N (or MemoryCluster(brokers=N)) "
                "one rack for every node, or one per node in node order, comma-separated.",
            ),
            _broker(
                "replica.selector.class",
                ConfigType.STRING,
                None,
                "The replica selector of fetch-from-follower (KIP-392): "
                "org.apache.kafka.common.replica.RackAwareReplicaSelector names a consumer's "
                "same-rack in-sync replica as its preferred read replica (simulated nodes).",
            ),
            _broker(
                "replica.fetch.max.bytes",
                ConfigType.INT,
                "1048576",
                "Bytes fetched per partition by followers.",
            ),
            _broker(
                "fetch.max.bytes",
                ConfigType.INT,
                "57671680",
                "The most bytes a fetch response carries.",
            ),
            _broker(
                "log.retention.check.interval.ms",
                ConfigType.LONG,
                "300000",
                "How often retention is enforced.",
            ),
            _broker(
                "log.cleaner.backoff.ms",
                ConfigType.LONG,
                "15000",
                "How long the log cleaner sleeps between compaction passes.",
            ),
            _broker(
                "telemetry.max.bytes",
                ConfigType.INT,
                "1048576",
                "The largest metrics payload a client may push to the broker (KIP-714).",
            ),
        ],
        key=lambda d: d.name,
    )
}
"""Every broker property this broker understands, by name (sorted)."""

SYNONYM_OF: dict[str, tuple[str, int]] = {
    synonym.name: (topic.name, synonym.factor)
    for topic in TOPIC_CONFIGS.values()
    for synonym in topic.synonyms
}
"""Broker property -> (topic configuration it is the default of, unit factor)."""


def is_list(name: str) -> bool:
    """Whether a topic or broker configuration is list-typed (APPEND/SUBTRACT apply)."""
    definition = TOPIC_CONFIGS.get(name) or broker_config(name)
    return definition is not None and definition.type == ConfigType.LIST


def validate_topic_configs(
    configs: Mapping[str, str], *, base: LogConfig | None = None
) -> tuple[LogConfig, dict[str, str]]:
    """Check topic overrides; returns the log settings and the normalised overrides.

    Raises :class:`InvalidConfigError` naming an unknown configuration or an
    invalid value.
    """
    backend: dict[str, str] = {}
    normalised: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic config {name}")
        if definition.validate is not None:
            try:
                normalised[name] = definition.validate(value)
            except ValueError as exc:
                raise InvalidConfigError(f"Invalid value {value!r} for {name}: {exc}") from None
        else:
            _check_type(definition, value)
            backend[name] = value
    log_config = LogConfig.from_kafka(backend, base=base)
    parsed = log_config.to_kafka()
    for name, value in backend.items():
        if TOPIC_CONFIGS[name].type == ConfigType.LIST:
            # Kafka keeps a list in the order given
            items = [item.strip() for item in value.split(",") if item.strip()]
            normalised[name] = ",".join(dict.fromkeys(items))
        else:
            normalised[name] = parsed[name]
    return log_config, normalised


_INT_RANGES = {ConfigType.SHORT: 2**15, ConfigType.INT: 2**31, ConfigType.LONG: 2**63}


def _check_type(definition: TopicConfigDef | BrokerConfigDef, value: str) -> None:
    """Kafka's type check and message (ConfigDef.parseType) before the range checks."""
    text = value.strip()
    bound = _INT_RANGES.get(definition.type)
    try:
        if bound is not None:
            if not -bound <= int(text) < bound:
                raise ValueError(text)
        elif definition.type == ConfigType.DOUBLE:
            float(text)
        elif definition.type == ConfigType.BOOLEAN and text.lower() not in ("true", "false"):
            raise ValueError(text)
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {definition.name}: "
            f"Not a number of type {definition.type.name}"
            if definition.type != ConfigType.BOOLEAN
            else f"Invalid value {value} for configuration {definition.name}: "
            "Expected value to be either true or false"
        ) from None


def topic_defaults_from(properties: Mapping[str, str]) -> dict[str, str]:
    """Topic defaults set by broker properties, honouring synonym priority and units.

    ``log.retention.ms`` wins over ``log.retention.minutes``, which wins over
    ``log.retention.hours``, whatever their order. Values are not validated here.
    """
    result: dict[str, str] = {}
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            raw = properties.get(synonym.name)
            if raw is None:
                continue
            if synonym.factor != 1:
                try:
                    number = int(str(raw).strip())
                except ValueError:
                    raise InvalidConfigError(
                        f"Invalid value {raw!r} for {synonym.name}: must be an integer"
                    ) from None
                result[topic.name] = str(number * synonym.factor)
            else:
                result[topic.name] = str(raw)
            break
    return result


# ---- every Kafka 4 broker configuration, and dynamic updates

_INERT_NOTE = " (kafkette: accepted, stored and described; not acted upon)"
_DESCRIBED_ONLY_NOTE = " (kafkette: Kafka's default, described only)"
_STATIC_ONLY_NOTE = (
    " (kafkette: acts on the static value; a dynamic one is stored and described only)"
)


def _kafka_def(
    row: tuple[str, str, str | None, str, bool, str, tuple[str, ...]],
) -> BrokerConfigDef:
    name, type_name, default, mode, internal, doc, check = row
    dynamic = mode != "read-only"
    return BrokerConfigDef(
        name,
        ConfigType[type_name],
        default,
        (doc or f"Kafka's {name}.") + (_INERT_NOTE if dynamic else _DESCRIBED_ONLY_NOTE),
        dynamic=dynamic,
        per_broker=mode == "per-broker",
        internal=internal,
        implemented=False,
        check=check,
    )


def _merge() -> dict[str, BrokerConfigDef]:
    kafka = {row[0]: _kafka_def(row) for row in kafka_broker_configs.ROWS}
    merged = dict(kafka)
    for name, ours in BROKER_CONFIGS.items():
        theirs = kafka.get(name)
        if theirs is None:
            merged[name] = ours
            continue
        applied = name in SYNONYM_OF
        merged[name] = attrs.evolve(
            ours,
            dynamic=theirs.dynamic,
            per_broker=theirs.per_broker,
            doc=ours.doc + (_STATIC_ONLY_NOTE if theirs.dynamic and not applied else ""),
            implemented=applied or not theirs.dynamic,
            # a topic default is checked as its topic config
            check=() if applied else theirs.check,
        )
    return dict(sorted(merged.items()))


ALL_BROKER_CONFIGS: dict[str, BrokerConfigDef] = _merge()
"""Every Kafka 4 broker configuration, ours where we implement it (sorted by name)."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
"""Listener configs Kafka lets the cluster default set (ClusterLevelListenerConfigs)."""

_LISTENER_CONFIG = re.compile(r"listener\.name\.([^.]+)\.(.+)")


def _listener_base(name: str) -> BrokerConfigDef | None:
    """The configuration a ``listener.name.<listener>.<config>`` name sets for one listener."""
    match = _LISTENER_CONFIG.fullmatch(name)
    if match is None:
        return None
    rest = match.group(2)
    base = ALL_BROKER_CONFIGS.get(rest)
    if base is None:
        # listener.name.<listener>.<mechanism>.sasl.jaas.config and its kind
        for mechanism_config in kafka_broker_configs.LISTENER_MECHANISM_CONFIGS:
            if rest.endswith("." + mechanism_config):
                base = ALL_BROKER_CONFIGS[mechanism_config]
                break
    if base is None or base.internal:
        return None
    return base


def broker_config(name: str) -> BrokerConfigDef | None:
    """The definition of a broker configuration name, including listener-prefixed ones."""
    definition = ALL_BROKER_CONFIGS.get(name)
    if definition is not None:
        return definition
    base = _listener_base(name)
    if base is None:
        return None
    return BrokerConfigDef(
        name,
        base.type,
        None,
        f"{base.name} for one listener: {base.doc}",
        dynamic=True,
        per_broker=base.name not in CLUSTER_LEVEL_LISTENER_CONFIGS,
        implemented=False,
        check=base.check,
    )


def _scala_set(names: Iterable[str]) -> str:
    """Scala's Set.toString, as in Kafka's messages (sorted here; Kafka's order is a hash's)."""
    items = sorted(names)
    return f"{'Set' if len(items) <= 4 else 'HashSet'}({', '.join(items)})"


def check_dynamic_broker_configs(configs: Mapping[str, str], *, per_broker: bool) -> None:
    """Kafka's checks of a broker resource's dynamic configs (DynamicBrokerConfig.validateConfigs).

    ``per_broker``: set for this broker by id, else the cluster-wide default. An
    unknown name is INVALID_CONFIG; the rest is INVALID_REQUEST, as Kafka wraps
    these ConfigExceptions: a read-only name, an SSL keystore/truststore config
    without a listener prefix, a value not of the config's type, a per-broker
    config at the cluster default.
    """
    for name in sorted(configs):
        if broker_config(name) is None:
            raise InvalidConfigError(f"Unknown broker config name: {name}")
    read_only = [n for n in configs if not _definition(n).dynamic]
    if read_only:
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: {_scala_set(read_only)}"
        )
    unprefixed = [n for n in configs if n in kafka_broker_configs.SSL_RECONFIGURABLE]
    if unprefixed:
        raise InvalidRequestError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_scala_set(unprefixed)}"
        )
    for name in sorted(configs):
        definition = _definition(name)
        try:
            _check_type(definition, configs[name])
        except InvalidConfigError as exc:
            raise InvalidRequestError(exc.detail) from None
        problem = _out_of_range(definition, configs[name].strip())
        if problem:
            raise InvalidRequestError(
                f"Invalid value {configs[name]} for configuration {name}: {problem}"
            )
    if not per_broker:
        only_per_broker = [n for n in configs if _definition(n).per_broker]
        if only_per_broker:
            raise InvalidRequestError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(only_per_broker)}"
            )


def _out_of_range(definition: BrokerConfigDef, value: str) -> str | None:
    """Kafka's message when ``value`` (of the right type) fails the config's validator."""
    kind, *args = definition.check or ("",)
    if kind == "one_of":
        return None if value in args else f"String must be one of: {', '.join(args)}"
    if kind not in ("at_least", "between"):
        return None
    number = float(value) if definition.type == ConfigType.DOUBLE else int(value)
    if number < float(args[0]):
        return f"Value must be at least {args[0]}"
    if kind == "between" and number > float(args[1]):
        return f"Value must be no more than {args[1]}"
    return None


def _definition(name: str) -> BrokerConfigDef:
    definition = broker_config(name)
    assert definition is not None, name
    return definition
