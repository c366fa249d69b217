"""What the admin client takes and returns.

Operations on many items (topics, partitions, config resources, groups) return a
:class:`Results` mapping, item -> :class:`Outcome`, as the Java Admin API
returns a future per item: one topic failing to be created does not hide the
others' success. ``Results.all()`` gives every value or raises the first error.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

import attrs

from kafkette.errors import KafkaError
from kafkette.structs import TopicPartition

K = TypeVar("K")
V = TypeVar("V")


@attrs.frozen
class Outcome(Generic[V]):
    """The result of one item: a value, or the error that item got."""

    value: V | None = None
    error: KafkaError | None = None

    def result(self) -> V:
        """The value, or raise the item's error."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]

    @property
    def ok(self) -> bool:
        return self.error is None


class Results(Mapping[K, Outcome[V]]):
    """Per-item outcomes of one admin operation."""

    def __init__(self, outcomes: dict[K, Outcome[V]]) -> None:
        self._outcomes = outcomes

    def __getitem__(self, key: K) -> Outcome[V]:
        return self._outcomes[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    def all(self) -> dict[K, V]:
        """Every item's value; raises the first error (in item order)."""
        return {key: outcome.result() for key, outcome in self._outcomes.items()}

    def errors(self) -> dict[K, KafkaError]:
        return {k: o.error for k, o in self._outcomes.items() if o.error is not None}

    def __repr__(self) -> str:
        return f"Results({self._outcomes!r})"


@attrs.frozen
class NewTopic:
    """A topic to create; -1 means the broker's default (``num.partitions``, replication)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = attrs.Factory(dict)
    replica_assignments: Mapping[int, list[int]] = attrs.Factory(dict)


@attrs.frozen
class CreatedTopic:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None]


@attrs.frozen
class NewPartitions:
    """The new total partition count of a topic."""

    total_count: int
    assignments: list[list[int]] | None = None


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16


@attrs.frozen
class ConfigResource:
    type: ResourceType
    name: str


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@attrs.frozen
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: int = 0
    documentation: str | None = None


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen
class AlterConfigOp:
    """One change of an incremental config update."""

    name: str
    value: str | None = None
    op: AlterOp = AlterOp.SET


class OffsetSpec:
    """Which offset ListOffsets looks up: earliest, latest, max timestamp or a timestamp."""

    EARLIEST = -2
    LATEST = -1
    MAX_TIMESTAMP = -3

    @staticmethod
    def for_timestamp(timestamp_ms: int) -> int:
        if timestamp_ms < 0:
            raise ValueError("a timestamp must be >= 0")
        return timestamp_ms


@attrs.frozen
class ListOffsetsResultInfo:
    offset: int
    timestamp: int
    leader_epoch: int


@attrs.frozen
class Node:
    id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: tuple[Node, ...]


@attrs.frozen
class PartitionDescription:
    partition: int
    leader: Node | None
    replicas: tuple[Node, ...]
    isr: tuple[Node, ...]
    leader_epoch: int = -1


@attrs.frozen
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]


# ---- consumer groups


class GroupState(str, enum.Enum):
    """A group's state as the coordinator reports it (ListGroups v4+, DescribeGroups)."""

    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    NOT_READY = "NotReady"

    @classmethod
    def parse(cls, name: str) -> GroupState:
        """The state named ``name`` (case-insensitive, as Java parses it); UNKNOWN otherwise."""
        lowered = name.lower()
        return next((s for s in cls if s.value.lower() == lowered), cls.UNKNOWN)


class GroupType(str, enum.Enum):
    """Which group protocol a group speaks (ListGroups v5+, KIP-848): ``classic``
    (JoinGroup/SyncGroup) or ``consumer`` (ConsumerGroupHeartbeat)."""

    UNKNOWN = "Unknown"
    CLASSIC = "Classic"
    CONSUMER = "Consumer"
    SHARE = "Share"
    STREAMS = "Streams"

    @classmethod
    def parse(cls, name: str) -> GroupType:
        """The type named ``name`` (case-insensitive, as Java parses it); UNKNOWN otherwise."""
        lowered = name.lower()
        return next((t for t in cls if t.value.lower() == lowered), cls.UNKNOWN)


@attrs.frozen
class ConsumerGroupListing:
    """A group as ListGroups reports it; a simple consumer group has no protocol type
    (it only commits offsets, without membership)."""

    group_id: str
    is_simple_consumer_group: bool
    state: GroupState | None = None
    """None when the broker's ListGroups (before v4) does not report states."""
    coordinator: int = -1
    """The node that listed the group: its coordinator."""
    type: GroupType | None = None
    """None when the broker's ListGroups (before v5) does not report types."""


@attrs.frozen
class ConsumerGroupListings:
    """Groups of every broker; brokers that failed are in ``errors`` (by node id)."""

    valid: tuple[ConsumerGroupListing, ...]
    errors: Mapping[int, KafkaError] = attrs.Factory(dict)

    def all(self) -> tuple[ConsumerGroupListing, ...]:
        """Every listing; raises the first broker error if any broker failed."""
        for error in self.errors.values():
            raise error
        return self.valid


@attrs.frozen
class MemberDescription:
    """A member of a consumer group: who it is and the partitions it was given."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition] = frozenset()
    target_assignment: frozenset[TopicPartition] | None = None
    """A ``consumer`` group's member: the partitions the broker means it to own once it
    has reconciled (None in a classic group)."""
    member_epoch: int | None = None
    """A ``consumer`` group's member: its epoch (None in a classic group)."""


@attrs.frozen
class ConsumerGroupDescription:
    """A consumer group as its coordinator describes it."""

    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    """The assignor the members agreed on (empty unless the group is stable)."""
    state: GroupState
    coordinator: Node | None
    protocol_type: str = "consumer"
    type: GroupType = GroupType.CLASSIC
    group_epoch: int | None = None
    """A ``consumer`` group's epoch (None for a classic group)."""
    target_assignment_epoch: int | None = None
    """The group epoch its target assignment was computed at (``consumer`` groups)."""
