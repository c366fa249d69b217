"""Producer state rebuilt from the log, and its ``.snapshot`` file format.

For every producer id the table keeps its epoch, the last five batches
(sequence range, offset range, max timestamp: what idempotent deduplication
needs), the first offset of its open transaction and the coordinator epoch of
its last transaction marker. :meth:`ProducerStateTable.update` folds one
:class:`~kafkette.backends.types.BatchInfo` in, in offset order; a scan of the
log from a snapshot's offset on restores the state as of the log end.

Snapshot file (``<20-digit offset>.snapshot``, the state after every batch
below that offset; written at a segment roll, when the log start offset
moves and at a clean shutdown; of those below the log start only the newest
is kept), all integers big-endian::

    magic b"KKPS" | version int16 (1) | crc uint32 (CRC-32C of what follows)
    producer_count int32, then per producer:
      producer_id int64 | producer_epoch int16 | coordinator_epoch int32
      txn_first_offset int64 (-1: no open transaction) | batch_count int8
      batch_count x (base_sequence int32 | last_sequence int32 |
                     base_offset int64 | last_offset int64 | max_timestamp int64)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import attrs
from crc32c import crc32c

from kafkette.backends.types import BatchInfo

MAX_BATCHES_PER_PRODUCER = 5
"""Batches remembered per producer, as Kafka (the producer's max in-flight requests)."""

SNAPSHOT_MAGIC = b"KKPS"
SNAPSHOT_VERSION = 1

_HEAD = struct.Struct(">4shI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhiqb")
_BATCH = struct.Struct(">iiqqq")


class SnapshotError(ValueError):
    """A snapshot file that is truncated, of an unknown version or fails its CRC."""


class BatchMetadata(NamedTuple):
    """What deduplication remembers of one batch (a tuple: one is made per batch)."""

    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@attrs.define(slots=True)
class ProducerEntry:
    """State of one producer id."""

    producer_id: int
    producer_epoch: int
    batches: list[BatchMetadata] = attrs.field(factory=list)
    txn_first_offset: int = -1
    coordinator_epoch: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@attrs.frozen(slots=True)
class CompletedTxn:
    """A transaction ended by a control batch."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@attrs.define(slots=True)
class ProducerStateTable:
    """Producer ids -> :class:`ProducerEntry`, folded from batches in offset order."""

    producers: dict[int, ProducerEntry] = attrs.field(factory=dict)

    def update(self, info: BatchInfo) -> CompletedTxn | None:
        """Fold one batch in; returns the transaction a control batch completes."""
        if info.producer_id < 0:
            return None
        entry = self.producers.get(info.producer_id)
        if entry is None or info.producer_epoch != entry.producer_epoch:
            if entry is None:
                entry = ProducerEntry(info.producer_id, info.producer_epoch)
                self.producers[info.producer_id] = entry
            else:
                entry.producer_epoch = info.producer_epoch
                entry.batches.clear()
        if info.is_control:
            completed = None
            if entry.txn_first_offset >= 0:
                completed = CompletedTxn(
                    info.producer_id,
                    entry.txn_first_offset,
                    info.last_offset,
                    aborted=info.control_type == 0,
                )
            entry.txn_first_offset = -1
            if info.coordinator_epoch >= 0:
                entry.coordinator_epoch = info.coordinator_epoch
            return completed
        if info.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(
                    info.base_sequence,
                    info.last_sequence,
                    info.base_offset,
                    info.last_offset,
                    info.max_timestamp,
                )
            )
            del entry.batches[:-MAX_BATCHES_PER_PRODUCER]
        if info.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = info.base_offset
        return None

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, if any."""
        starts = [e.txn_first_offset for e in self.producers.values() if e.txn_first_offset >= 0]
        return min(starts) if starts else None

    def copy(self) -> ProducerStateTable:
        """An independent copy."""
        return ProducerStateTable(
            {
                pid: ProducerEntry(
                    e.producer_id,
                    e.producer_epoch,
                    list(e.batches),
                    e.txn_first_offset,
                    e.coordinator_epoch,
                )
                for pid, e in self.producers.items()
            }
        )

    def to_bytes(self) -> bytes:
        """The snapshot encoding described in the module docstring."""
        parts = [_COUNT.pack(len(self.producers))]
        for pid in sorted(self.producers):
            e = self.producers[pid]
            parts.append(
                _PRODUCER.pack(
                    e.producer_id,
                    e.producer_epoch,
                    e.coordinator_epoch,
                    e.txn_first_offset,
                    len(e.batches),
                )
            )
            parts.extend(
                _BATCH.pack(
                    b.base_sequence, b.last_sequence, b.base_offset, b.last_offset, b.max_timestamp
                )
                for b in e.batches
            )
        body = b"".join(parts)
        return _HEAD.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(body)) + body

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerStateTable:
        """Decode a snapshot; raises :class:`SnapshotError` when it is damaged."""
        try:
            magic, version, crc = _HEAD.unpack_from(data, 0)
            if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
                raise SnapshotError(f"not a version {SNAPSHOT_VERSION} producer snapshot")
            body = memoryview(data)[_HEAD.size :]
            if crc32c(body) != crc:
                raise SnapshotError("producer snapshot fails its CRC")
            (count,) = _COUNT.unpack_from(body, 0)
            pos = _COUNT.size
            table = cls()
            for _ in range(count):
                pid, epoch, coordinator_epoch, txn_first, nbatches = _PRODUCER.unpack_from(
                    body, pos
                )
                pos += _PRODUCER.size
                batches = []
                for _ in range(nbatches):
                    batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                table.producers[pid] = ProducerEntry(
                    pid, epoch, batches, txn_first, coordinator_epoch
                )
            if pos != len(body):
                raise SnapshotError("trailing bytes in producer snapshot")
        except struct.error as exc:
            raise SnapshotError(f"truncated producer snapshot: {exc}") from None
        return table
