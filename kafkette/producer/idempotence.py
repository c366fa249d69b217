"""The idempotent producer's state: producer id, epoch, sequence numbers per partition.

A batch gets its base sequence when it is drained for its first send (or
again after an epoch bump); a retry keeps it, so the broker recognises a
batch it already stored and answers with the original offset instead of
storing it twice. Sequences are per partition, count records, and wrap from
``2**31 - 1`` to 0.

When the broker reports a sequence it did not expect for the next batch we
expect it to take (OUT_OF_ORDER_SEQUENCE_NUMBER) or forgot our producer id
(UNKNOWN_PRODUCER_ID), the producer bumps its epoch (KIP-360:
InitProducerId with its current id and epoch; a fresh id on older brokers)
and starts every partition's sequences again from 0.

The producer id of an idempotent producer without a ``transactional.id``
comes from InitProducerId, built here (:meth:`IdempotenceState.init_request`)
and read here (:meth:`IdempotenceState.take_init_answer`); a failed request is
tried again after a backoff (:meth:`IdempotenceState.init_failed`), and
:meth:`IdempotenceState.init_due` says when one should go. A transactional
producer gets its id from the transaction manager instead. No I/O here: the
sender sends the request.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from kafkette.errors import make_error
from kafkette.producer.accumulator import PartitionKey, ProducerBatch
from kafkette.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from kafkette.protocol.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_MASK,
)

SEQUENCE_MODULUS = 2**31
KIP360_INIT_PRODUCER_ID_VERSION = 3
"""From this InitProducerId version, the request may carry the current id and epoch
to bump the epoch of the same producer id (KIP-360); older brokers give a new id."""
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")


def stamp(
    data: bytearray, producer_id: int, epoch: int, base_sequence: int, transactional: bool = False
) -> None:
    """Write producer id, epoch and base sequence into a built batch and fix its CRC.

    ``transactional`` sets the batch's transactional attribute: its records
    stay invisible to read_committed consumers until the transaction ends.
    """
    _PRODUCER_FIELDS.pack_into(data, PRODUCER_ID_OFFSET, producer_id, epoch, base_sequence)
    if transactional:
        (attributes,) = _ATTRIBUTES.unpack_from(data, ATTRIBUTES_OFFSET)
        _ATTRIBUTES.pack_into(data, ATTRIBUTES_OFFSET, attributes | TRANSACTIONAL_MASK)
    _CRC.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))


class IdempotenceState:
    """Producer id, epoch and per-partition sequences of one idempotent producer."""

    def __init__(self, *, transactional: bool = False) -> None:
        self.transactional = transactional
        self.producer_id = -1
        self.epoch = -1
        self.bump_needed = False
        self._next: dict[PartitionKey, int] = {}
        self._acked: dict[PartitionKey, int] = {}  # last acknowledged sequence
        self.init_busy = False
        """An InitProducerId request is in flight."""
        self.init_retry_at = 0.0
        """When a failed InitProducerId may be sent again (the sender's clock, ms)."""
        self.init_failures = 0

    @property
    def has_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def needs_id(self) -> bool:
        """Nothing may be sent before an InitProducerId: no id yet, or a new epoch needed."""
        return not self.has_id or self.bump_needed

    def init_due(self, now: float) -> float | None:
        """None when an InitProducerId may go now (marked in flight), else ms to wait.

        The caller checked :attr:`needs_id`, that records wait and that none is
        in flight (the new epoch must not overtake batches of the old one).
        """
        if self.init_busy:
            return float("inf")
        if now < self.init_retry_at:
            return self.init_retry_at - now
        self.init_busy = True
        return None

    def init_request(self, version: int, transaction_timeout_ms: int) -> InitProducerIdRequest:
        """The InitProducerId to send at ``version``: with the current id and epoch
        when the broker can bump the epoch (KIP-360)."""
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=transaction_timeout_ms
        )
        if self.has_id and version >= KIP360_INIT_PRODUCER_ID_VERSION:
            request.producer_id = self.producer_id
            request.producer_epoch = self.epoch
        return request

    def take_init_answer(self, response: InitProducerIdResponse) -> None:
        """Take the new id and epoch; raise the answer's error (:class:`KafkaError`)."""
        if response.error_code:
            raise make_error(response.error_code, "InitProducerId")
        self.reset(response.producer_id, response.producer_epoch)
        self.init_failures = 0

    def init_failed(self, now: float, backoff_ms: float) -> None:
        """The InitProducerId failed: try again after ``backoff_ms``."""
        self.init_retry_at = now + backoff_ms
        self.init_failures += 1

    def reset(self, producer_id: int, epoch: int) -> None:
        """A new producer id or epoch: every partition starts again at sequence 0."""
        self.producer_id = producer_id
        self.epoch = epoch
        self.bump_needed = False
        self._next.clear()
        self._acked.clear()

    def assign(self, batch: ProducerBatch) -> None:
        """Give ``batch`` its sequence (unless it kept one from this epoch).

        A batch not built yet is built with them; a built one is stamped.
        """
        if (
            batch.base_sequence >= 0
            and batch.producer_id == self.producer_id
            and batch.producer_epoch == self.epoch
        ):
            return
        tp = batch.tp
        sequence = self._next.get(tp, 0)
        self._next[tp] = (sequence + batch.record_count) % SEQUENCE_MODULUS
        batch.base_sequence = sequence
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.epoch
        batch.transactional = self.transactional
        if batch.data is not None:  # built before (a retry): stamped in place
            stamp(batch.data, self.producer_id, self.epoch, sequence, self.transactional)

    def owns(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` got its sequence under the current producer id and epoch."""
        return (
            batch.base_sequence >= 0
            and batch.producer_id == self.producer_id
            and batch.producer_epoch == self.epoch
        )

    def reuse_sequences(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """Give the parts of a split ``batch`` its sequence numbers, in order, and stamp them."""
        sequence = batch.base_sequence
        for part in parts:
            part.producer_id = self.producer_id
            part.producer_epoch = self.epoch
            part.base_sequence = sequence
            stamp(part.build(), self.producer_id, self.epoch, sequence, self.transactional)
            sequence = (sequence + part.record_count) % SEQUENCE_MODULUS

    def acknowledged(self, batch: ProducerBatch) -> None:
        """The broker stored ``batch``."""
        if batch.producer_id == self.producer_id and batch.producer_epoch == self.epoch:
            last = (batch.base_sequence + batch.record_count - 1) % SEQUENCE_MODULUS
            self._acked[batch.tp] = last

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` directly follows the last acknowledged one of its partition.

        If not, an earlier batch of the partition is still being retried, and a
        sequence error for this one is a consequence of that, not a loss.
        """
        if batch.producer_id != self.producer_id or batch.producer_epoch != self.epoch:
            return False
        last = self._acked.get(batch.tp)
        expected = 0 if last is None else (last + 1) % SEQUENCE_MODULUS
        return batch.base_sequence == expected
