"""What the admin client's transaction operations return (Java's Admin API types)."""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from kafkette.errors import KafkaError
from kafkette.structs import TopicPartition


class TransactionState(str, enum.Enum):
    """A transaction's state as its coordinator reports it (Java's admin TransactionState)."""

    ONGOING = "Ongoing"
    PREPARE_ABORT = "PrepareAbort"
    PREPARE_COMMIT = "PrepareCommit"
    COMPLETE_ABORT = "CompleteAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    EMPTY = "Empty"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, name: str) -> TransactionState:
        """The state named ``name`` (case-insensitive); UNKNOWN for a name we do not know."""
        lowered = name.lower()
        return next((s for s in cls if s.value.lower() == lowered), cls.UNKNOWN)


@attrs.frozen
class TransactionListing:
    """A transactional id as ListTransactions reports it."""

    transactional_id: str
    producer_id: int
    state: TransactionState
    coordinator: int = -1
    """The broker that listed it: its transaction coordinator."""


@attrs.frozen
class TransactionListings:
    """Transactional ids of every broker; brokers that failed are in ``errors`` (by node id)."""

    valid: tuple[TransactionListing, ...]
    errors: Mapping[int, KafkaError] = attrs.Factory(dict)

    def all(self) -> tuple[TransactionListing, ...]:
        """Every listing; raises the first broker error if any broker failed."""
        for error in self.errors.values():
            raise error
        return self.valid


@attrs.frozen
class TransactionDescription:
    """One transactional id as its coordinator describes it."""

    coordinator_id: int
    state: TransactionState
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    """When the open transaction started; None when none is open."""
    topic_partitions: frozenset[TopicPartition]
    """Partitions of the open transaction (while ending: those still without a marker)."""


@attrs.frozen
class AbortTransactionSpec:
    """Which transaction :meth:`~kafkette.AdminClient.abort_transaction` ends, and where:
    the producer's id and epoch and the coordinator epoch of its last marker, as
    :meth:`~kafkette.AdminClient.describe_producers` reports them for the partition
    (Kafka's ``AbortTransactionSpec``)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@attrs.frozen
class ProducerState:
    """A producer that wrote to a partition, as its leader remembers it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None
    """The first offset of the producer's open transaction in the partition, if any."""


__all__ = [
    "AbortTransactionSpec",
    "ProducerState",
    "TransactionDescription",
    "TransactionListing",
    "TransactionListings",
    "TransactionState",
]
