"""The broker's transaction coordinator: :mod:`~kafkette.server.txn.state` with storage
and markers.

:class:`TransactionCoordinator` keeps the metadata of every transactional id,
persists each change to ``__transaction_state`` before it is answered
(:class:`~kafkette.server.txn.log_store.TxnLogStore`), and ends transactions
by appending a COMMIT or ABORT marker to every partition of the transaction
(:mod:`~kafkette.server.txn.markers`). As Kafka: PrepareCommit/PrepareAbort
is persisted, then the markers are written, then CompleteCommit/CompleteAbort
is persisted; a restart that finds a transaction in PrepareCommit or
PrepareAbort writes its markers again (a second marker for a transaction
already ended changes nothing) and completes it. Unlike Kafka, which answers
EndTxn once PrepareCommit is written and sends the markers afterwards, this
single-node coordinator answers once the markers are in the logs.

Every method runs in the broker's event loop and does all its work before
returning (no awaits), so requests never see a transition half done.
Time comes from the injected clock; :meth:`TransactionCoordinator.tick`
aborts transactions open longer than their timeout (bumping the producer's
epoch, so the producer is fenced, as Kafka does), retries marker writes
that failed, and forgets transactional ids idle past
``transactional.id.expiration.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

from kafkette.errors import (
    NO_ERROR,
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
)
from kafkette.server.groups.log_store import OFFSETS_TOPIC
from kafkette.server.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    CoordinatorTxnState,
    PartitionKey,
    TransactionMetadata,
    expired,
    new_metadata,
    prepare_add_partitions,
    prepare_complete,
    prepare_dead,
    prepare_end,
    prepare_fence,
    prepare_init,
    timed_out,
)

if TYPE_CHECKING:
    from kafkette.server.groups.log_store import LogGroupStore
    from kafkette.server.txn.log_store import TxnLogStore
    from kafkette.server.txn.markers import MarkerWriter

logger = logging.getLogger("kafkette.server.txn")

MARKER_RETRY_MS = 1000
"""How soon the timer retries a marker or state write that failed."""


@attrs.frozen
class InitResult:
    """InitProducerId's answer."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """Transactional ids, their transactions and the markers that end them, for one broker."""

    def __init__(
        self,
        store: TxnLogStore,
        markers: MarkerWriter,
        offsets: LogGroupStore,
        *,
        clock: Callable[[], float],
        allocate_producer_id: Callable[[], int],
        max_timeout_ms: int,
        id_expiration_ms: int,
    ) -> None:
        """``store`` keeps the metadata, ``markers`` ends transactions, ``offsets`` is
        ``__consumer_offsets`` (where TxnOffsetCommit writes); ``allocate_producer_id``
        hands out new producer ids; ``max_timeout_ms`` is ``transaction.max.timeout.ms``
        and ``id_expiration_ms`` ``transactional.id.expiration.ms``."""
        self.store = store
        self._markers = markers
        self._offsets = offsets
        self._clock = clock
        self._allocate_producer_id = allocate_producer_id
        self.max_timeout_ms = max_timeout_ms
        self._id_expiration_ms = id_expiration_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        """Transactional id -> its current metadata."""
        self._pending_offsets: dict[str, dict[str, set[PartitionKey]]] = {}
        """Transactional id -> group -> partitions with offsets its open transaction wrote."""
        self._retry_at: dict[str, int] = {}
        """Transactional id -> when the timer may try again a write that failed."""

    def now_ms(self) -> int:
        return int(self._clock())

    # -- start ----------------------------------------------------------------------

    def load(self, *, finish_prepared: bool = True) -> None:
        """Read ``__transaction_state`` back and complete the transactions a stop caught
        between PrepareCommit/PrepareAbort and their Complete state (unless not
        ``finish_prepared``: a broker serving its data directory read-only leaves
        them as they are). Ongoing ones stay open: their producer may still end them,
        else they time out."""
        self.transactions = self.store.load()
        for meta in self.transactions.values():
            if meta.state == CoordinatorTxnState.ONGOING:
                for topic, index in meta.partitions:
                    if topic == OFFSETS_TOPIC:
                        written = self._offsets.transactional_offsets(index, meta.producer_id)
                        for group_id, offsets in written.items():
                            self.offsets_written(meta.transactional_id, group_id, offsets)
        if not finish_prepared:
            return
        for meta in list(self.transactions.values()):
            if meta.state in PREPARING:
                logger.info(
                    "transactional id %r was in %s: writing its markers",
                    meta.transactional_id,
                    meta.state.display_name,
                )
                self._finish(meta)

    def highest_producer_id(self) -> int:
        """The largest producer id any transactional id holds (-1 for none)."""
        ids = [m.producer_id for m in self.transactions.values()]
        ids.extend(m.last_producer_id for m in self.transactions.values())
        return max(ids, default=-1)

    # -- requests -------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        """InitProducerId with a transactional id (PRODUCER_FENCED is left to the handler
        to translate for old versions)."""
        if not transactional_id:
            return InitResult(InvalidRequestError.code)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(InvalidTransactionTimeoutError.code)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitResult(InvalidRequestError.code)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        now = self.now_ms()
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = new_metadata(transactional_id, self._allocate_producer_id(), timeout_ms, now)
            self.transactions[transactional_id] = meta
        outcome = prepare_init(
            meta,
            timeout_ms=timeout_ms,
            expected=expected,
            now_ms=now,
            allocate_producer_id=self._allocate_producer_id,
        )
        if isinstance(outcome, int):
            return InitResult(outcome)
        if outcome.state == CoordinatorTxnState.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with a bumped epoch; the producer retries
            # and gets the epoch bumped once more.
            error = self._abort_fenced(outcome)
            return InitResult(error if error != NO_ERROR else ConcurrentTransactionsError.code)
        if not self._persist(outcome):
            return InitResult(CoordinatorNotAvailableError.code)
        return InitResult(NO_ERROR, outcome.producer_id, outcome.producer_epoch)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[PartitionKey],
    ) -> int:
        """AddPartitionsToTxn for partitions known to exist: one error code for all."""
        outcome = prepare_add_partitions(
            self.transactions.get(transactional_id),
            producer_id,
            producer_epoch,
            partitions,
            self.now_ms(),
        )
        if isinstance(outcome, int):
            return outcome
        return NO_ERROR if self._persist(outcome) else CoordinatorNotAvailableError.code

    def offsets_partition(self, group_id: str) -> PartitionKey:
        """The ``__consumer_offsets`` partition of ``group_id`` (the topic made if needed)."""
        self._offsets.ensure_topic()
        return OFFSETS_TOPIC, self._offsets.partition_for(group_id)

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> int:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [self.offsets_partition(group_id)]
        )

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        """EndTxn: an error code, ``NO_ERROR`` once the markers are written."""
        outcome = prepare_end(
            self.transactions.get(transactional_id),
            producer_id,
            producer_epoch,
            commit,
            self.now_ms(),
        )
        if isinstance(outcome, int):
            return outcome
        return self._end(outcome)

    def check_offset_commit(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> int:
        """Whether a TxnOffsetCommit may write: the producer must be the transactional id's
        current one (an older epoch is INVALID_PRODUCER_EPOCH, what Kafka's log answers)
        and the group's offsets partition must be in its Ongoing transaction."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return InvalidProducerIdMappingError.code
        if meta.producer_epoch != producer_epoch:
            return InvalidProducerEpochError.code
        if meta.state != CoordinatorTxnState.ONGOING:
            return InvalidTxnStateError.code
        if self.offsets_partition(group_id) not in meta.partitions:
            return InvalidTxnStateError.code
        return NO_ERROR

    def offsets_written(
        self, transactional_id: str, group_id: str, partitions: Iterable[PartitionKey]
    ) -> None:
        """Note that a TxnOffsetCommit of the open transaction wrote these offsets."""
        groups = self._pending_offsets.setdefault(transactional_id, {})
        groups.setdefault(group_id, set()).update(partitions)

    def has_pending_offsets(self, group_id: str, partition: PartitionKey) -> bool:
        """Whether an unfinished transaction holds an offset of ``group_id`` for
        ``partition``: OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
        then (KIP-447), as Kafka does."""
        return any(
            partition in groups.get(group_id, ()) for groups in self._pending_offsets.values()
        )

    # -- administration ---------------------------------------------------------------

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
    ) -> tuple[list[str], list[TransactionMetadata]]:
        """ListTransactions: (state filters no state is named, matching transactions)."""
        names = list(states)
        unknown = [name for name in names if CoordinatorTxnState.from_name(name) is None]
        wanted = {
            s for s in (CoordinatorTxnState.from_name(name) for name in names) if s is not None
        }
        pids = set(producer_ids)
        now = self.now_ms()
        found = []
        for meta in self.transactions.values():
            if meta.state == CoordinatorTxnState.DEAD:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if names and meta.state not in wanted:
                continue
            if duration_ms >= 0 and now - meta.txn_start_ms <= duration_ms:
                continue
            found.append(meta)
        return unknown, sorted(found, key=lambda m: m.transactional_id)

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """DescribeTransactions for one id (``None``: unknown)."""
        meta = self.transactions.get(transactional_id)
        return None if meta is None or meta.state == CoordinatorTxnState.DEAD else meta

    # -- time -------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has work (``None``: nothing scheduled)."""
        expiration = self._id_expiration_ms
        deadlines = []
        for meta in self.transactions.values():
            if meta.state == CoordinatorTxnState.ONGOING:
                due = meta.txn_start_ms + meta.timeout_ms + 1
            elif meta.state in PREPARING:
                due = meta.last_update_ms + MARKER_RETRY_MS
            elif meta.state != CoordinatorTxnState.DEAD:
                due = meta.last_update_ms + expiration
            else:
                continue
            deadlines.append(max(due, self._retry_at.get(meta.transactional_id, due)))
        return min(deadlines, default=None)

    def tick(self, now_ms: int | None = None) -> None:
        """Abort timed-out transactions, retry failed markers, forget expired ids."""
        now = self.now_ms() if now_ms is None else now_ms
        expiration = self._id_expiration_ms
        for meta in list(self.transactions.values()):
            tid = meta.transactional_id
            if self._retry_at.get(tid, now) > now:
                continue
            self._retry_at.pop(tid, None)
            done = True
            if timed_out(meta, now):
                logger.info(
                    "transactional id %r: transaction open for more than %d ms, aborting it",
                    tid,
                    meta.timeout_ms,
                )
                done = self._abort_fenced(prepare_fence(meta, now)) == NO_ERROR
            elif meta.state in PREPARING and meta.last_update_ms + MARKER_RETRY_MS <= now:
                self._finish(meta)
            elif expired(meta, now, expiration):
                done = self._persist(prepare_dead(meta, now))
                if done:
                    del self.transactions[tid]
            if not done:  # a write failed: try again later, not in a tight loop
                self._retry_at[tid] = now + MARKER_RETRY_MS

    # -- internals ----------------------------------------------------------------------

    def _persist(self, meta: TransactionMetadata) -> bool:
        """Write ``meta``; on success it becomes the current metadata."""
        try:
            self.store.write(meta)
        except Exception:
            logger.exception("transactional id %r: writing its state failed", meta.transactional_id)
            return False
        self.transactions[meta.transactional_id] = meta
        return True

    def _abort_fenced(self, fenced: TransactionMetadata) -> int:
        """Abort the transaction of PrepareEpochFence metadata (with its bumped epoch)."""
        outcome = prepare_end(
            fenced,
            fenced.producer_id,
            fenced.producer_epoch,
            commit=False,
            now_ms=self.now_ms(),
            from_client=False,
        )
        assert not isinstance(outcome, int)
        return self._end(outcome)

    def _end(self, prepared: TransactionMetadata) -> int:
        """Persist PrepareCommit/PrepareAbort, then write the markers and complete."""
        if not self._persist(prepared):
            return CoordinatorNotAvailableError.code
        self._finish(prepared)
        return NO_ERROR

    def _finish(self, prepared: TransactionMetadata) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort. A failed marker
        write leaves the transaction in its Prepare state for :meth:`tick` to retry."""
        try:
            self._markers.write(
                prepared.partitions,
                producer_id=prepared.producer_id,
                producer_epoch=prepared.producer_epoch,
                coordinator_epoch=self.store.coordinator_epoch(prepared.transactional_id),
                commit=prepared.state == CoordinatorTxnState.PREPARE_COMMIT,
            )
        except Exception:
            logger.exception(
                "transactional id %r: writing markers failed, will retry",
                prepared.transactional_id,
            )
            self.transactions[prepared.transactional_id] = prepared
            return
        self._pending_offsets.pop(prepared.transactional_id, None)
        complete = prepare_complete(prepared, self.now_ms())
        if not self._persist(complete):
            # The markers are written: a restart that finds Prepare* writes them again.
            self.transactions[complete.transactional_id] = complete
