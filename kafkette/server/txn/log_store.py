"""Transaction metadata kept in ``__transaction_state``, Kafka's compacted internal topic.

Each change of a transactional id's metadata is one record appended to the
partition ``Utils.abs(transactionalId.hashCode()) % partitions`` (the same
hash as the group coordinator's). Keys and values are Kafka's own
``TransactionLogKey`` / ``TransactionLogValue``, each prefixed by its int16
version, at version 0 for both (what Kafka 3.x writes, and 4.x for clients
that do not use transaction version 2), so Kafka's tools read them. An
Empty transaction's partitions are written as null, as Kafka does; a
forgotten (Dead) id is a tombstone. Version 0 does not hold the last
producer id and epoch: after a restart they are unknown (-1), as in Kafka.

The topic is created on first use with ``transaction.state.log.num.partitions``
(50) partitions, ``cleanup.policy=compact``, ``segment.bytes`` 100 MiB and
no compression, as Kafka creates it. :meth:`TxnLogStore.load` reads every
partition from its start: the latest value of each key wins.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkette.protocol.codec import decode_message, encode_message
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import TransactionLogKey, TransactionLogValue
from kafkette.protocol.messages.transaction_log_value import PartitionsSchema
from kafkette.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches
from kafkette.server.internal_topic import InternalTopic
from kafkette.server.txn.state import CoordinatorTxnState, TransactionMetadata

if TYPE_CHECKING:
    from kafkette.backends import Log
    from kafkette.server.cluster import Cluster, Partition

logger = logging.getLogger("kafkette.server.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
READ_CHUNK_BYTES = 1 << 20
_VERSION = struct.Struct(">h")


def encode_key(transactional_id: str) -> bytes:
    """A TransactionLogKey record key (version 0)."""
    out = bytearray(_VERSION.pack(KEY_VERSION))
    encode_message(TransactionLogKey(transactional_id=transactional_id), KEY_VERSION, out)
    return bytes(out)


def encode_value(meta: TransactionMetadata) -> bytes:
    """A TransactionLogValue (version 0) holding ``meta``."""
    partitions: list[PartitionsSchema] | None = None
    if meta.state != CoordinatorTxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(index)
        partitions = [PartitionsSchema(topic, indexes) for topic, indexes in by_topic.items()]
    # PrepareEpochFence is never written: Kafka persists the abort that follows it.
    state = (
        CoordinatorTxnState.PREPARE_ABORT
        if meta.state == CoordinatorTxnState.PREPARE_EPOCH_FENCE
        else meta.state
    )
    value = TransactionLogValue(
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_status=int(state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=meta.last_update_ms,
        transaction_start_timestamp_ms=meta.txn_start_ms,
    )
    out = bytearray(_VERSION.pack(VALUE_VERSION))
    encode_message(value, VALUE_VERSION, out)
    return bytes(out)


def _split_version(data: bytes) -> int:
    if len(data) < 2:
        raise ProtocolError(f"record of {len(data)} bytes has no version")
    version: int = _VERSION.unpack_from(data)[0]
    return version


def decode_key(data: bytes) -> str:
    """The transactional id of a ``__transaction_state`` key (version 0)."""
    version = _split_version(data)
    if version != KEY_VERSION:
        raise ProtocolError(f"unknown transaction log key version {version}")
    key, _ = decode_message(TransactionLogKey, data, 2, version)
    return key.transactional_id


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """The metadata of a ``__transaction_state`` value (versions 0-1)."""
    version = _split_version(data)
    if not 0 <= version <= 1:
        raise ProtocolError(f"unknown transaction log value version {version}")
    value, _ = decode_message(TransactionLogValue, data, 2, version)
    try:
        state = CoordinatorTxnState(value.transaction_status)
    except ValueError:
        raise ProtocolError(f"unknown transaction state {value.transaction_status}") from None
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=frozenset(
            (p.topic, index)
            for p in value.transaction_partitions or ()
            for index in p.partition_ids
        ),
        txn_start_ms=value.transaction_start_timestamp_ms,
        last_update_ms=value.transaction_last_update_timestamp_ms,
    )


def transaction_state_topic(
    cluster: Cluster,
    *,
    partitions: int,
    segment_bytes: int,
    clock: Callable[[], int],
    appended: Callable[[Log], None],
) -> InternalTopic:
    """``__transaction_state`` as Kafka creates it: ``partitions``
    (``transaction.state.log.num.partitions``), compacted, ``segment_bytes``
    (``transaction.state.log.segment.bytes``), uncompressed."""
    return InternalTopic(
        cluster,
        TRANSACTION_STATE_TOPIC,
        partitions=partitions,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "compression.type": "uncompressed",
        },
        clock=clock,
        appended=appended,
        logger=logger,
    )


class TxnLogStore:
    """Writes and reads transaction metadata in ``__transaction_state`` (``topic``, made
    by :func:`transaction_state_topic`)."""

    def __init__(self, topic: InternalTopic) -> None:
        self.topic = topic

    def partition(self, transactional_id: str) -> Partition:
        """The partition holding ``transactional_id``'s records."""
        return self.topic.partition(transactional_id)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch written in markers: the leader epoch of the id's partition, as Kafka."""
        return self.partition(transactional_id).leader_epoch

    def write(self, meta: TransactionMetadata) -> None:
        """Append ``meta`` (a tombstone when it is Dead); returns once it is in the log."""
        value = None if meta.state == CoordinatorTxnState.DEAD else encode_value(meta)
        partition = self.partition(meta.transactional_id)
        builder = RecordBatchBuilder()
        builder.append(self.topic.now_ms(), encode_key(meta.transactional_id), value)
        self.topic.append(partition, builder.build())

    def load(self) -> dict[str, TransactionMetadata]:
        """The latest metadata of every transactional id (none when the topic is absent)."""
        topic = self.topic.existing()
        if topic is None:
            return {}
        latest: dict[str, TransactionMetadata] = {}
        for partition in topic.partitions:
            for record_offset, key, value in _records(partition.log):
                try:
                    transactional_id = decode_key(key)
                    if value is None:
                        latest.pop(transactional_id, None)
                    else:
                        latest[transactional_id] = decode_value(transactional_id, value)
                except ProtocolError as exc:
                    logger.warning(
                        "%s-%d offset %d: unreadable record skipped: %s",
                        TRANSACTION_STATE_TOPIC,
                        partition.index,
                        record_offset,
                        exc,
                    )
        return latest


def _records(log: Log) -> list[tuple[int, bytes, bytes | None]]:
    found: list[tuple[int, bytes, bytes | None]] = []
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, READ_CHUNK_BYTES, end).to_bytes()
        if not data:
            break
        for batch in iter_batches(data, allow_partial=False):
            assert isinstance(batch, RecordBatch)
            offset = batch.next_offset
            if batch.is_control:
                continue
            found.extend((r.offset, r.key, r.value) for r in batch if r.key is not None)
    return found
