"""Idempotent producers: a batch's producer epoch and sequence against the partition's state.

The partition's :class:`~kafkette.backends.ProducerStateTable` (kept by the
log, rebuilt from snapshots and a scan of the log on restart) remembers, per
producer id, its epoch and its last five batches. Before a batch with a
producer id is appended, :func:`check_sequence` applies Kafka's rules:

- an epoch older than the producer's current one: ``INVALID_PRODUCER_EPOCH``;
- the same epoch and the same sequence range as one of the last five
  batches: a duplicate (a retry of a batch already written), acknowledged
  with the original offsets and not appended again;
- the same epoch: the first sequence must follow the last one (wrapping
  after ``2**31 - 1``), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
- a newer epoch: the sequence must start again at 0, else
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
- a producer id the partition has no state for (never seen, or its batches
  removed by retention or DeleteRecords) is accepted at any sequence, as
  Kafka does since 2.5 (KIP-360); ``UNKNOWN_PRODUCER_ID`` is not returned.
"""

from __future__ import annotations

import attrs

from kafkette.backends import ProducerStateTable
from kafkette.backends.header import StoredHeader
from kafkette.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError

MAX_SEQUENCE = 2**31 - 1


@attrs.frozen(slots=True)
class Duplicate:
    """The batch was already appended: its original offsets and max timestamp."""

    base_offset: int
    last_offset: int
    max_timestamp: int


def in_sequence(last: int, first: int) -> bool:
    """Whether a batch starting at ``first`` directly follows one ending at ``last``."""
    return first == last + 1 or (first == 0 and last == MAX_SEQUENCE)


def check_sequence(state: ProducerStateTable, header: StoredHeader) -> Duplicate | None:
    """None when the batch may be appended, a :class:`Duplicate` when it already was.

    Raises ``InvalidProducerEpochError`` or ``OutOfOrderSequenceNumberError``.
    """
    entry = state.producers.get(header.producer_id)
    if entry is None:
        return None
    epoch = header.producer_epoch
    first = header.base_sequence
    if epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id} has epoch {epoch}, "
            f"older than its current epoch {entry.producer_epoch}"
        )
    if epoch > entry.producer_epoch:
        if first != 0:
            raise OutOfOrderSequenceNumberError(
                f"producer {header.producer_id} starts epoch {epoch} at sequence {first}, not 0"
            )
        return None
    last = header.last_sequence
    for batch in entry.batches:
        if batch.base_sequence == first and batch.last_sequence == last:
            return Duplicate(batch.base_offset, batch.last_offset, batch.max_timestamp)
    if not in_sequence(entry.last_sequence, first):
        raise OutOfOrderSequenceNumberError(
            f"producer {header.producer_id} sent sequence {first} after {entry.last_sequence}"
        )
    return None
