"""What a Produce answer means for one batch (sans I/O): one table, one decision.

Theory of operation. Each partition of a Produce response carries an error
code. :data:`OUTCOMES` maps the codes the producer treats in its own way to an
:class:`Outcome`; every other code is read by :func:`outcome_for` from the
error table of :mod:`kafkette.errors`: retriable ones are retried (with a
metadata refresh for the InvalidMetadata family, as Java's
``InvalidMetadataException``), the rest fail the batch.

The outcome alone does not say what to do: a too-large batch of one record
cannot be split, and a sequence error is a loss or a consequence of an
earlier failure depending on the partition's sequence state.
:func:`decide` takes the outcome and those facts and returns a
:class:`Decision` (complete, split, retry or fail, and what it does to the
idempotence state). A retry is then checked against ``retries``,
``delivery.timeout.ms`` and a closing producer by :func:`retry_verdict`.

The sender (:mod:`kafkette.producer.sender`) applies the decisions; nothing
here touches a batch, a future or a connection.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from kafkette.errors import (
    NO_ERROR,
    DuplicateSequenceNumberError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    RecordListTooLargeError,
    UnknownProducerIdError,
    error_for_code,
)


class Outcome(enum.Enum):
    """What an error code in a Produce answer means, before the batch is looked at."""

    OK = "ok"
    """Stored: the batch's records are at the base offset."""
    DUPLICATE = "duplicate"
    """DUPLICATE_SEQUENCE_NUMBER: the broker stored this batch before; a success."""
    LEADER_MOVED = "leader_moved"
    """NOT_LEADER_OR_FOLLOWER: take the answer's new leader (KIP-951), else refresh; retry."""
    TOO_LARGE = "too_large"
    """MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE: split a batch of several records, as Java."""
    OUT_OF_ORDER = "out_of_order"
    """OUT_OF_ORDER_SEQUENCE_NUMBER: a gap in the partition's sequences."""
    UNKNOWN_PRODUCER = "unknown_producer"
    """UNKNOWN_PRODUCER_ID: the broker kept no state for the producer id."""
    RETRY_REFRESH = "retry_refresh"
    """Retriable once the metadata is refreshed (the InvalidMetadata family)."""
    RETRY = "retry"
    """Retriable as it is."""
    FAIL = "fail"
    """Fails the batch's records with the error class."""


OUTCOMES: Mapping[int, Outcome] = {
    NO_ERROR: Outcome.OK,
    DuplicateSequenceNumberError.code: Outcome.DUPLICATE,
    NotLeaderOrFollowerError.code: Outcome.LEADER_MOVED,
    MessageTooLargeError.code: Outcome.TOO_LARGE,
    RecordListTooLargeError.code: Outcome.TOO_LARGE,
    OutOfOrderSequenceNumberError.code: Outcome.OUT_OF_ORDER,
    UnknownProducerIdError.code: Outcome.UNKNOWN_PRODUCER,
}
"""Error code -> outcome, for the codes a Produce answer treats in its own way."""


def outcome_for(code: int) -> Outcome:
    """What error ``code`` of a Produce answer's partition means."""
    listed = OUTCOMES.get(code)
    if listed is not None:
        return listed
    error_class = error_for_code(code)
    assert error_class is not None  # code 0 is listed
    if issubclass(error_class, InvalidMetadataError):
        return Outcome.RETRY_REFRESH
    return Outcome.RETRY if error_class.retriable else Outcome.FAIL


def outcome_of_error(error: KafkaError) -> Outcome:
    """:func:`outcome_for` of an exception (a response's error, or one of the connection)."""
    if error.code is not None:
        return outcome_for(error.code)
    return Outcome.RETRY if error.retriable else Outcome.FAIL


class Step(enum.Enum):
    """What the sender does with a batch."""

    COMPLETE = "complete"
    SPLIT = "split"
    RETRY = "retry"
    FAIL = "fail"


@attrs.frozen(slots=True)
class Decision:
    """The sender's reading of one batch's answer."""

    step: Step
    bump_epoch: bool = False
    """The producer needs a new epoch (KIP-360) before it sends again."""
    reuse_sequences: bool = False
    """SPLIT: the parts take the batch's sequence numbers (inside a transaction)."""
    resync: bool = False
    """SPLIT: the partition sends one batch at a time until one succeeds."""
    count_attempt: bool = True
    """RETRY: the retry counts against ``retries``."""
    refresh_metadata: bool = False
    """RETRY: the metadata may be stale (a leader moved)."""


_COMPLETE = Decision(Step.COMPLETE)
_FAIL = Decision(Step.FAIL)
_RETRY = Decision(Step.RETRY)
_RETRY_REFRESH = Decision(Step.RETRY, refresh_metadata=True)


@attrs.frozen(slots=True)
class BatchFacts:
    """What :func:`decide` needs to know of a batch and its producer."""

    record_count: int
    idempotent: bool = False
    transactional: bool = False
    sequenced: bool = False
    """The batch has a base sequence (it was sent by an idempotent producer)."""
    owned: bool = False
    """Its sequence is of the producer's current id and epoch."""
    next_expected: bool = False
    """It directly follows the last acknowledged batch of its partition."""


def decide(outcome: Outcome, facts: BatchFacts, *, leader_known: bool = False) -> Decision:
    """What to do with a batch whose answer reads as ``outcome``.

    ``leader_known``: the answer named the partition's new leader (KIP-951),
    so no metadata refresh is needed for LEADER_MOVED.
    """
    if outcome is Outcome.OK or outcome is Outcome.DUPLICATE:
        return _COMPLETE
    if outcome is Outcome.TOO_LARGE and facts.record_count > 1:
        if not (facts.idempotent and facts.sequenced):
            return Decision(Step.SPLIT)
        if facts.transactional and facts.owned:
            # no epoch bump inside a transaction: the parts take the sequences of
            # the batch, which the broker did not store
            return Decision(Step.SPLIT, reuse_sequences=True, resync=True)
        return Decision(Step.SPLIT, bump_epoch=True, resync=True)
    if facts.idempotent and outcome in (Outcome.OUT_OF_ORDER, Outcome.UNKNOWN_PRODUCER):
        if not facts.next_expected:
            # an earlier batch of this partition failed: this one follows it again
            return Decision(Step.RETRY, count_attempt=False)
        if facts.transactional:
            return _FAIL  # the transaction is lost: its abort bumps the epoch (as Java)
        if outcome is Outcome.UNKNOWN_PRODUCER:
            # the broker kept no state for us: a new epoch and sequence 0 cannot
            # duplicate anything
            return Decision(Step.RETRY, bump_epoch=True)
        return Decision(Step.FAIL, bump_epoch=True)
    if outcome is Outcome.RETRY:
        return _RETRY
    if outcome is Outcome.RETRY_REFRESH:
        return _RETRY_REFRESH
    if outcome is Outcome.LEADER_MOVED:
        return _RETRY if leader_known else _RETRY_REFRESH
    return _FAIL


class RetryVerdict(enum.Enum):
    """Whether a batch the answer would retry is retried."""

    RETRY = "retry"
    FAIL = "fail"
    """Not retriable, or ``retries`` used up: fails with the error."""
    ABORTED = "aborted"
    """The producer is being closed without delivering: fails with the abort's error."""
    EXPIRED = "expired"
    """The backoff would end after ``delivery.timeout.ms``: fails with a timeout."""


def retry_verdict(
    error: KafkaError,
    *,
    aborted: bool,
    attempts: int,
    retries: int,
    count_attempt: bool,
    retry_at_ms: float,
    expires_at_ms: float,
) -> RetryVerdict:
    """Whether a batch answered with ``error`` goes back to its partition's queue.

    ``attempts`` are the retries made; ``retry_at_ms`` is when the backoff
    ends and ``expires_at_ms`` when ``delivery.timeout.ms`` does.
    """
    if not error.retriable and outcome_of_error(error) not in (
        Outcome.OUT_OF_ORDER,
        Outcome.UNKNOWN_PRODUCER,
    ):
        return RetryVerdict.FAIL
    if aborted:
        return RetryVerdict.ABORTED
    if count_attempt and attempts >= retries:
        return RetryVerdict.FAIL
    if retry_at_ms >= expires_at_ms:
        return RetryVerdict.EXPIRED
    return RetryVerdict.RETRY


def refreshes_on_retry(error: KafkaError) -> bool:
    """A retry after ``error`` asks for new metadata: the broker may be gone."""
    return isinstance(error, (KafkaConnectionError, KafkaTimeoutError))


__all__ = [
    "OUTCOMES",
    "BatchFacts",
    "Decision",
    "Outcome",
    "RetryVerdict",
    "Step",
    "decide",
    "outcome_for",
    "outcome_of_error",
    "refreshes_on_retry",
    "retry_verdict",
]
