"""The transaction coordinator's state machine, without I/O.

Theory of operation (Kafka's ``TransactionMetadata``, 3.x): each
transactional id has one :class:`TransactionMetadata`, replaced as a whole on
every change. The functions below take the current metadata and a request
and return either the metadata to persist next or an error code (``NO_ERROR``
meaning: nothing to change, answer OK). Every transition is checked against
:data:`VALID_PREVIOUS_STATES`; one that is not listed is a bug and raises
:class:`IllegalTransition`.

::

    Empty, Complete* --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
    Ongoing --EndTxn(abort)---> PrepareAbort --markers--> CompleteAbort
    Ongoing --InitProducerId, timeout--> PrepareEpochFence (epoch bumped)
            --> PrepareAbort --markers--> CompleteAbort
    Empty, Complete* --InitProducerId--> Empty (epoch bumped, or a new producer id)
    Empty, Complete* --expired--> Dead (the id is forgotten)

The coordinator runs each transition to its end before it serves another
request (the markers are appended in the same call), so Kafka's "pending
transition in progress" never shows from outside; PrepareCommit and
PrepareAbort are only seen while markers are being written, or after a
restart that caught them (recovery completes them).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import attrs

from kafkette.errors import (
    NO_ERROR,
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
"""Java's ``Short.MAX_VALUE``."""

PartitionKey = tuple[str, int]


class CoordinatorTxnState(enum.IntEnum):
    """Kafka's transaction states; the value is the id written to ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name Kafka reports (ListTransactions, DescribeTransactions)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> CoordinatorTxnState | None:
        """The state Kafka names ``name``, if any."""
        return _BY_NAME.get(name)


_NAMES = {
    CoordinatorTxnState.EMPTY: "Empty",
    CoordinatorTxnState.ONGOING: "Ongoing",
    CoordinatorTxnState.PREPARE_COMMIT: "PrepareCommit",
    CoordinatorTxnState.PREPARE_ABORT: "PrepareAbort",
    CoordinatorTxnState.COMPLETE_COMMIT: "CompleteCommit",
    CoordinatorTxnState.COMPLETE_ABORT: "CompleteAbort",
    CoordinatorTxnState.DEAD: "Dead",
    CoordinatorTxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

S = CoordinatorTxnState
VALID_PREVIOUS_STATES: dict[CoordinatorTxnState, frozenset[CoordinatorTxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
"""State -> the states it may be entered from (Kafka's ``validPreviousStates``)."""

COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
"""States with no transaction in flight."""
PREPARING = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(Exception):
    """A transition :data:`VALID_PREVIOUS_STATES` does not allow (a coordinator bug)."""


@attrs.frozen(slots=True, kw_only=True)
class TransactionMetadata:
    """Everything the coordinator knows of one transactional id."""

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last bump, so a retried InitProducerId gets the same answer."""
    timeout_ms: int
    state: CoordinatorTxnState = CoordinatorTxnState.EMPTY
    partitions: frozenset[PartitionKey] = frozenset()
    txn_start_ms: int = -1
    last_update_ms: int

    @property
    def epoch_exhausted(self) -> bool:
        """Kafka's ``isEpochExhausted``: no bump is left for this producer id."""
        return is_epoch_exhausted(self.producer_epoch)

    def transition(
        self,
        state: CoordinatorTxnState,
        now_ms: int,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: Iterable[PartitionKey] | None = None,
        txn_start_ms: int | None = None,
    ) -> TransactionMetadata:
        """The metadata in ``state``; raises :class:`IllegalTransition` when not allowed."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"transactional id {self.transactional_id!r}: "
                f"{self.state.display_name} -> {state.display_name} is not a valid transition"
            )
        return attrs.evolve(
            self,
            state=state,
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.producer_id,  # as Kafka: the id before this transition
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(
                self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
            ),
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            partitions=self.partitions if partitions is None else frozenset(partitions),
            txn_start_ms=self.txn_start_ms if txn_start_ms is None else txn_start_ms,
            last_update_ms=now_ms,
        )


Outcome = TransactionMetadata | int
"""Metadata to persist, or an error code (``NO_ERROR``: nothing to change, answer OK)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: ``epoch >= Short.MAX_VALUE - 1``."""
    return epoch >= MAX_EPOCH - 1


def new_metadata(
    transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
) -> TransactionMetadata:
    """A transactional id seen for the first time: Empty, with no epoch yet."""
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        timeout_ms=timeout_ms,
        last_update_ms=now_ms,
    )


def prepare_init(
    meta: TransactionMetadata,
    *,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
) -> Outcome:
    """InitProducerId (Kafka's ``prepareInitProducerIdTransit``).

    ``expected`` is the producer id and epoch the request carries (KIP-360,
    v3+), ``None`` when it carries none. An Ongoing transaction gives the
    PrepareEpochFence metadata: the caller aborts the transaction with the
    bumped epoch and answers ``CONCURRENT_TRANSACTIONS`` so that the producer
    retries (and gets the epoch bumped again).
    """
    if expected is not None and not _valid_expected_producer(meta, *expected):
        return ProducerFencedError.code
    if meta.state in PREPARING:
        return ConcurrentTransactionsError.code
    if meta.state == S.ONGOING:
        return prepare_fence(meta, now_ms)
    if meta.state not in COMPLETED:
        raise IllegalTransition(f"InitProducerId in state {meta.state.display_name}")
    if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
        # A new producer id at epoch 0; the last epoch is kept only for a producer that
        # said which epoch it had, so its retry is recognised.
        return meta.transition(
            S.EMPTY,
            now_ms,
            producer_id=allocate_producer_id(),
            producer_epoch=0,
            last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=(),
            txn_start_ms=-1,
        )
    bumped = meta.producer_epoch + 1
    if expected is None:
        epoch, last = bumped, NO_PRODUCER_EPOCH
    elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
        epoch, last = bumped, meta.producer_epoch
    elif expected[1] == meta.last_producer_epoch:
        epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump
    else:
        return ProducerFencedError.code
    return meta.transition(
        S.EMPTY,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=last,
        timeout_ms=timeout_ms,
        partitions=(),
        txn_start_ms=-1,
    )


def _valid_expected_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH  # just created: the new id is safe to return
        or producer_id == meta.producer_id  # the epoch is checked when bumping
        or (producer_id == meta.last_producer_id and is_epoch_exhausted(epoch))
    )


def prepare_fence(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Ongoing -> PrepareEpochFence with the epoch bumped, so the producer is fenced
    (on InitProducerId by another instance, and on timeout)."""
    epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
    return meta.transition(
        S.PREPARE_EPOCH_FENCE,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )


def check_producer(meta: TransactionMetadata | None, producer_id: int, epoch: int) -> int:
    """The error for a request from ``producer_id``/``epoch`` (``NO_ERROR`` when it is current)."""
    if meta is None or meta.producer_id != producer_id:
        return InvalidProducerIdMappingError.code
    if meta.producer_epoch != epoch:
        return ProducerFencedError.code
    return NO_ERROR


def prepare_add_partitions(
    meta: TransactionMetadata | None,
    producer_id: int,
    epoch: int,
    partitions: Iterable[PartitionKey],
    now_ms: int,
) -> Outcome:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction, Ongoing, with the partitions."""
    error = check_producer(meta, producer_id, epoch)
    if error != NO_ERROR:
        return error
    assert meta is not None
    if meta.state in PREPARING:
        return ConcurrentTransactionsError.code
    added = frozenset(partitions)
    if meta.state == S.ONGOING and added <= meta.partitions:
        return NO_ERROR
    start = now_ms if meta.state in COMPLETED else meta.txn_start_ms
    return meta.transition(
        S.ONGOING, now_ms, partitions=meta.partitions | added, txn_start_ms=start
    )


def prepare_end(
    meta: TransactionMetadata | None,
    producer_id: int,
    epoch: int,
    commit: bool,
    now_ms: int,
    *,
    from_client: bool = True,
) -> Outcome:
    """EndTxn: PrepareCommit or PrepareAbort, to persist before the markers are written.

    A retry of an EndTxn that already completed answers ``NO_ERROR`` for the same
    outcome and ``INVALID_TXN_STATE`` for the other; one that is still
    writing its markers, ``CONCURRENT_TRANSACTIONS``. A client's epoch must be
    the current one; the coordinator's own aborts (``from_client=False``) come
    from PrepareEpochFence with the bumped epoch.
    """
    if meta is None or meta.producer_id != producer_id:
        return InvalidProducerIdMappingError.code
    if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
        return ProducerFencedError.code
    state = meta.state
    if state in (S.ONGOING, S.PREPARE_EPOCH_FENCE):
        if state == S.PREPARE_EPOCH_FENCE and commit:
            raise IllegalTransition("an epoch fence always aborts")
        return meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)
    if state == S.COMPLETE_COMMIT:
        return NO_ERROR if commit else InvalidTxnStateError.code
    if state == S.COMPLETE_ABORT:
        return NO_ERROR if not commit else InvalidTxnStateError.code
    if state == S.PREPARE_COMMIT:
        return ConcurrentTransactionsError.code if commit else InvalidTxnStateError.code
    if state == S.PREPARE_ABORT:
        return ConcurrentTransactionsError.code if not commit else InvalidTxnStateError.code
    return InvalidTxnStateError.code  # Empty: no transaction to end (Dead is never kept)


def prepare_complete(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Once every marker is written: CompleteCommit or CompleteAbort, no partitions."""
    target = S.COMPLETE_COMMIT if meta.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
    return meta.transition(target, now_ms, partitions=())


def prepare_dead(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """An idle transactional id past ``transactional.id.expiration.ms``."""
    return meta.transition(S.DEAD, now_ms)


def timed_out(meta: TransactionMetadata, now_ms: int) -> bool:
    """An Ongoing transaction open longer than its timeout (Kafka: start + timeout < now)."""
    return meta.state == S.ONGOING and meta.txn_start_ms + meta.timeout_ms < now_ms


def expired(meta: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
    """An idle transactional id Kafka forgets (last update at least ``expiration_ms`` ago)."""
    return meta.state in COMPLETED and meta.last_update_ms <= now_ms - expiration_ms
