"""The transactional producer's state machine (sans I/O), after Java's TransactionManager.

Theory of operation. A producer with a ``transactional.id`` moves through
the states of :class:`ProducerTxnState`; every user call and every coordinator answer
is a :class:`TxnEvent`, and :data:`TRANSITIONS` gives, for each (state, event)
pair, the next state. A pair missing from the table is refused
(:class:`IllegalStateError`) and the state stays as it was::

    UNINITIALIZED --INIT--> INITIALIZING --INITIALIZED--> READY
    READY --BEGIN--> IN_TRANSACTION
    IN_TRANSACTION --COMMIT--> COMMITTING_TRANSACTION --ENDED--> READY
    IN_TRANSACTION | ABORTABLE_ERROR --ABORT--> ABORTING_TRANSACTION --ENDED--> READY
    ABORTING_TRANSACTION --ENDED_BUMP_EPOCH--> INITIALIZING   (KIP-360, see below)
    COMMITTING_TRANSACTION | ABORTING_TRANSACTION --INIT--> INITIALIZING   (an unknown outcome)
    IN_TRANSACTION | COMMITTING_TRANSACTION | ABORTABLE_ERROR | INITIALIZING
        --ABORTABLE_ERROR--> ABORTABLE_ERROR
    any state --FATAL_ERROR--> FATAL_ERROR (only close() is left)

Errors are classified as Java classifies them, in one table,
:data:`ANSWERS`, of (API, error code) -> :class:`Outcome`. Fatal: the producer was fenced
(PRODUCER_FENCED, and INVALID_PRODUCER_EPOCH from the coordinator, which older
coordinators send for the same reason), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_TXN_STATE and
unexpected coordinator answers. Abortable: a failed batch (any other
reason, INVALID_PRODUCER_EPOCH from a partition leader included: KIP-588, the
coordinator timed the transaction out), topic or group authorization,
TRANSACTION_ABORTABLE, a group membership mismatch on TxnOffsetCommit.
UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_ID_MAPPING are abortable when the
coordinator can bump the epoch (InitProducerId v3+) and fatal otherwise.
Retriable answers are retried: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE
after finding the coordinator again, CONCURRENT_TRANSACTIONS and
COORDINATOR_LOAD_IN_PROGRESS as they are.

After an abortable error caused by a failed batch, the abort is followed by
InitProducerId with the current producer id and epoch (KIP-360), which bumps
the epoch: sequence numbers start again from 0 and the coordinator fences
anything still in flight under the old epoch.

A commit or abort that the caller stopped waiting for (a timeout) stays
pending (:attr:`TransactionManager.pending`): calling the same operation
again waits for the same EndTxn, as Java does, and no other operation may
start meanwhile, except :meth:`TransactionManager.begin_init`: it abandons
the pending EndTxn (closing its connection) and sends the InitProducerId of a
new producer, which bumps the epoch, so that whether or not the late EndTxn
lands, it cannot touch a later transaction (the coordinator completes or
aborts the old one before answering, and fences the old epoch).

No I/O here: :mod:`kafkette.producer.txn_runner` sends the requests this
class builds and feeds it the answers.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kafkette.errors import (
    ClusterAuthorizationFailedError,
    CommitFailedError,
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnsupportedForMessageFormatError,
    UnsupportedVersionError,
    error_for_code,
    make_error,
)
from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafkette.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkette.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.producer")

TP = tuple[str, int]
"""A topic-partition as the accumulator names it."""

EPOCH_BUMP_INIT_VERSION = 3
"""InitProducerId takes the current producer id and epoch from v3 (KIP-360)."""
GROUP_METADATA_COMMIT_VERSION = 3
"""TxnOffsetCommit carries the member's generation and ids from v3 (KIP-447)."""
CLIENT_ADD_PARTITIONS_MAX_VERSION = 3
"""AddPartitionsToTxn v4+ is the brokers' batched form; clients send v3 at most."""
CLIENT_END_TXN_MAX_VERSION = 4
"""EndTxn v5 belongs to transactions version 2 (KIP-890), where EndTxn bumps the epoch."""


class ProducerTxnState(enum.Enum):
    """States of a transactional producer (Java's TransactionManager.State)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TxnEvent(enum.Enum):
    """What happens to a transactional producer; :data:`TRANSITIONS` says where it leads."""

    INIT = "INIT"
    """``init_transactions`` (also after a commit or abort of unknown outcome)."""
    INITIALIZED = "INITIALIZED"
    """InitProducerId gave a producer id and epoch."""
    BEGIN = "BEGIN"
    COMMIT = "COMMIT"
    ABORT = "ABORT"
    ENDED = "ENDED"
    """The transaction ended (EndTxn, or nothing the coordinator knew of)."""
    ENDED_BUMP_EPOCH = "ENDED_BUMP_EPOCH"
    """The abort ended and the epoch must be bumped before the next transaction."""
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = ProducerTxnState
E = TxnEvent

TRANSITIONS: Mapping[tuple[ProducerTxnState, TxnEvent], ProducerTxnState] = {
    (S.UNINITIALIZED, E.INIT): S.INITIALIZING,
    # COMMITTING_TRANSACTION: re-initialising after a commit whose outcome is
    # unknown (our addition; Java allows it from ABORTING_TRANSACTION only)
    (S.COMMITTING_TRANSACTION, E.INIT): S.INITIALIZING,
    (S.ABORTING_TRANSACTION, E.INIT): S.INITIALIZING,
    (S.INITIALIZING, E.INITIALIZED): S.READY,
    (S.READY, E.BEGIN): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, E.COMMIT): S.COMMITTING_TRANSACTION,
    (S.IN_TRANSACTION, E.ABORT): S.ABORTING_TRANSACTION,
    (S.ABORTABLE_ERROR, E.ABORT): S.ABORTING_TRANSACTION,
    (S.COMMITTING_TRANSACTION, E.ENDED): S.READY,
    (S.ABORTING_TRANSACTION, E.ENDED): S.READY,
    (S.ABORTING_TRANSACTION, E.ENDED_BUMP_EPOCH): S.INITIALIZING,
    (S.IN_TRANSACTION, E.ABORTABLE_ERROR): S.ABORTABLE_ERROR,
    (S.COMMITTING_TRANSACTION, E.ABORTABLE_ERROR): S.ABORTABLE_ERROR,
    (S.ABORTABLE_ERROR, E.ABORTABLE_ERROR): S.ABORTABLE_ERROR,
    (S.INITIALIZING, E.ABORTABLE_ERROR): S.ABORTABLE_ERROR,
    **{(state, E.FATAL_ERROR): S.FATAL_ERROR for state in ProducerTxnState},
}
"""(state, event) -> next state; a pair not listed is refused."""


class TransactionAbortedError(KafkaError):
    """A record failed because its transaction was aborted (Java's TransactionAbortedException)."""

    name = "TRANSACTION_ABORTED"
    description = "Failing batch since transaction was aborted."


class Action(enum.Enum):
    """What the I/O layer does after a coordinator answer."""

    DONE = "done"
    """The request succeeded: go on."""
    RETRY = "retry"
    """Send the same request again after the backoff."""
    FIND_COORDINATOR = "find_coordinator"
    """Forget the coordinator, find it again, then retry."""
    FAILED = "failed"
    """The request failed; the error is in the reply (and the state changed)."""


@attrs.frozen(slots=True)
class Reply:
    """The manager's reading of one answer."""

    action: Action
    error: BaseException | None = None


_DONE = Reply(Action.DONE)
_RETRY = Reply(Action.RETRY)
_FIND = Reply(Action.FIND_COORDINATOR)

_FATAL_BATCH_ERRORS = (
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    ProducerFencedError,
    UnsupportedVersionError,
)


class TxnApi(enum.Enum):
    """The coordinator requests whose answers :data:`ANSWERS` reads."""

    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS_TO_TXN = "AddPartitionsToTxn"
    ADD_OFFSETS_TO_TXN = "AddOffsetsToTxn"
    TXN_OFFSET_COMMIT = "TxnOffsetCommit"
    END_TXN = "EndTxn"


class Outcome(enum.Enum):
    """What an error code in a coordinator answer means for the producer."""

    OK = "ok"
    FIND_COORDINATOR = "find_coordinator"
    """The coordinator moved: find it again, then retry."""
    RETRY = "retry"
    FENCED = "fenced"
    """A newer producer with the same transactional id: fatal (ProducerFencedError)."""
    FATAL = "fatal"
    ABORTABLE = "abortable"
    ABORTABLE_IF_BUMP = "abortable_if_bump"
    """Abortable when InitProducerId can bump the epoch (KIP-360), fatal otherwise."""
    TOPIC_UNAUTHORIZED = "topic_unauthorized"
    """Abortable, naming every unauthorized topic of the request."""
    GROUP_UNAUTHORIZED = "group_unauthorized"
    """Abortable, naming the group."""
    COMMIT_FAILED = "commit_failed"
    """The consumer's group metadata is stale: abortable with CommitFailedError."""
    PARTITION_FAILED = "partition_failed"
    """This partition could not be added: abortable, with the other failed ones."""
    UNEXPECTED = "unexpected"
    """No answer the client expects: fatal."""


def _codes(outcome: Outcome, *errors: type[KafkaError]) -> dict[int, Outcome]:
    codes: dict[int, Outcome] = {}
    for error in errors:
        assert error.code is not None
        codes[error.code] = outcome
    return codes


_COORDINATOR_MOVED = _codes(
    Outcome.FIND_COORDINATOR, NotCoordinatorError, CoordinatorNotAvailableError
)
_PRODUCER_FENCED = _codes(Outcome.FENCED, InvalidProducerEpochError, ProducerFencedError)
_EPOCH_BUMP_NEEDED = _codes(
    Outcome.ABORTABLE_IF_BUMP, UnknownProducerIdError, InvalidProducerIdMappingError
)
_TRANSACTION_ABORTABLE = _codes(Outcome.ABORTABLE, TransactionAbortableError)

_BY_API: Mapping[TxnApi, Mapping[int, Outcome]] = {
    TxnApi.INIT_PRODUCER_ID: {
        **_COORDINATOR_MOVED,
        **_PRODUCER_FENCED,
        **_TRANSACTION_ABORTABLE,
        **_codes(
            Outcome.FATAL, TransactionalIdAuthorizationFailedError, ClusterAuthorizationFailedError
        ),
    },
    TxnApi.ADD_PARTITIONS_TO_TXN: {
        **_COORDINATOR_MOVED,
        **_PRODUCER_FENCED,
        **_EPOCH_BUMP_NEEDED,
        **_TRANSACTION_ABORTABLE,
        **_codes(Outcome.FATAL, TransactionalIdAuthorizationFailedError, InvalidTxnStateError),
        **_codes(Outcome.TOPIC_UNAUTHORIZED, TopicAuthorizationFailedError),
    },
    TxnApi.ADD_OFFSETS_TO_TXN: {
        **_COORDINATOR_MOVED,
        **_PRODUCER_FENCED,
        **_EPOCH_BUMP_NEEDED,
        **_TRANSACTION_ABORTABLE,
        **_codes(Outcome.FATAL, TransactionalIdAuthorizationFailedError),
        **_codes(Outcome.GROUP_UNAUTHORIZED, GroupAuthorizationFailedError),
    },
    TxnApi.TXN_OFFSET_COMMIT: {
        **_COORDINATOR_MOVED,
        **_PRODUCER_FENCED,
        **_TRANSACTION_ABORTABLE,
        # TxnOffsetCommit goes to the group coordinator, which may be the one timing out
        **_codes(Outcome.FIND_COORDINATOR, RequestTimedOutError),
        **_codes(Outcome.GROUP_UNAUTHORIZED, GroupAuthorizationFailedError),
        **_codes(Outcome.ABORTABLE, FencedInstanceIdError),
        **_codes(Outcome.COMMIT_FAILED, UnknownMemberIdError, IllegalGenerationError),
        **_codes(
            Outcome.FATAL, TransactionalIdAuthorizationFailedError, UnsupportedForMessageFormatError
        ),
    },
    TxnApi.END_TXN: {
        **_COORDINATOR_MOVED,
        **_PRODUCER_FENCED,
        **_EPOCH_BUMP_NEEDED,
        **_TRANSACTION_ABORTABLE,
        **_codes(Outcome.FATAL, TransactionalIdAuthorizationFailedError, InvalidTxnStateError),
    },
}

ANSWERS: Mapping[tuple[TxnApi, int], Outcome] = {
    (api, code): outcome for api, codes in _BY_API.items() for code, outcome in codes.items()
}
"""(API, error code) -> outcome, for the codes an API treats in its own way; other
codes are :func:`outcome_for`'s: retriable ones are retried, the rest are
:data:`UNLISTED` for the API."""

UNLISTED: Mapping[TxnApi, Outcome] = {
    TxnApi.INIT_PRODUCER_ID: Outcome.UNEXPECTED,
    TxnApi.ADD_PARTITIONS_TO_TXN: Outcome.PARTITION_FAILED,
    TxnApi.ADD_OFFSETS_TO_TXN: Outcome.UNEXPECTED,
    TxnApi.TXN_OFFSET_COMMIT: Outcome.UNEXPECTED,
    TxnApi.END_TXN: Outcome.UNEXPECTED,
}


def outcome_for(api: TxnApi, code: int) -> Outcome:
    """What error ``code`` in an answer to ``api`` means."""
    if code == 0:
        return Outcome.OK
    listed = ANSWERS.get((api, code))
    if listed is not None:
        return listed
    error_class = error_for_code(code)
    assert error_class is not None
    return Outcome.RETRY if error_class.retriable else UNLISTED[api]


@attrs.define(slots=True)
class Pending:
    """A commit, abort or init the caller may have stopped waiting for."""

    state: ProducerTxnState
    operation: str
    handle: Any = None
    """The I/O layer's handle on the running operation (its result)."""
    acked: bool = False
    """The caller saw the outcome: the next operation may start."""


class TransactionManager:
    """State, producer id and epoch, and partitions of one transactional producer."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = ProducerTxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.producer_id = -1
        self.epoch = -1
        self.partitions: set[TP] = set()
        """Partitions the coordinator added to the current transaction."""
        self.new_partitions: set[TP] = set()
        """Partitions written to, not yet sent in an AddPartitionsToTxn."""
        self.adding: set[TP] = set()
        """Partitions of the AddPartitionsToTxn in flight."""
        self.noted: set[TP] = set()
        """Partitions :meth:`add_partition` was given in the current transaction, while
        they are in ``partitions``, ``new_partitions`` or ``adding`` (a subset of those:
        emptied whenever one may lose a partition). The producers' C send appends a
        record to one of them without the general path's ``add_partition``, which would
        do nothing (``RouteState.transaction`` is this set, never replaced)."""
        self.transaction_started = False
        """The coordinator knows of the transaction (partitions or offsets were added)."""
        self.epoch_bump_required = False
        self.bump_supported = False
        """The coordinator takes InitProducerId v3+ (KIP-360 epoch bumps)."""
        self.pending: Pending | None = None
        self._partitions_lock = threading.Lock()  # the sync producer adds from its caller's thread
        self._bumping = False
        self._lost_mapping = False
        self.first_add_in_transaction = True

    # ---- state

    def fire(self, event: TxnEvent, error: BaseException | None = None) -> ProducerTxnState:
        """Move along ``(state, event)`` or raise :class:`IllegalStateError` (a bug or a misuse).

        ``error`` is the reason for ABORTABLE_ERROR and FATAL_ERROR.
        """
        target = TRANSITIONS.get((self.state, event))
        if target is None:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: invalid transition from "
                f"{self.state.value} on {event.value}"
            )
        logger.debug(
            "transactional id %r: %s -(%s)-> %s",
            self.transactional_id,
            self.state.value,
            event.value,
            target.value,
        )
        self.state = target
        if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            assert error is not None
            self.last_error = error
        else:
            self.last_error = None
        return target

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def has_error(self) -> bool:
        return self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    @property
    def has_fatal_error(self) -> bool:
        return self.state is S.FATAL_ERROR

    @property
    def is_completing(self) -> bool:
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)

    @property
    def has_ongoing_transaction(self) -> bool:
        """A transaction is open or ending (close() aborts an open one)."""
        return self.state in (
            S.IN_TRANSACTION,
            S.COMMITTING_TRANSACTION,
            S.ABORTING_TRANSACTION,
            S.ABORTABLE_ERROR,
        ) or (self.state is S.INITIALIZING and self._bumping)

    def fatal(self, error: BaseException) -> Reply:
        """Enter FATAL_ERROR with ``error``."""
        if self.state is not S.FATAL_ERROR:
            logger.error("transactional id %r: fatal error: %s", self.transactional_id, error)
            self.fire(E.FATAL_ERROR, error)
        return Reply(Action.FAILED, self.last_error)

    def abortable(self, error: BaseException) -> Reply:
        """Enter ABORTABLE_ERROR with ``error`` (not while aborting, nor after a fatal error)."""
        if self.state is S.FATAL_ERROR:
            return Reply(Action.FAILED, self.last_error)
        if self.state is S.ABORTING_TRANSACTION:
            logger.debug("already aborting; not recording %s", error)
            return Reply(Action.FAILED, error)
        logger.info("transactional id %r: abortable error: %s", self.transactional_id, error)
        self.fire(E.ABORTABLE_ERROR, error)
        return Reply(Action.FAILED, error)

    def _abortable_if_bump(self, error: BaseException) -> Reply:
        if self.bump_supported:
            self.epoch_bump_required = True
            return self.abortable(error)
        return self.fatal(error)

    def _fenced(self, what: str) -> Reply:
        return self.fatal(
            ProducerFencedError(
                f"{what}: transactional id {self.transactional_id!r}, producer id "
                f"{self.producer_id} epoch {self.epoch}: fenced by a newer producer "
                f"with the same transactional id"
            )
        )

    def _settle(
        self,
        api: TxnApi,
        code: int,
        *,
        fatal_context: str | None = None,
        unexpected_context: str | None = None,
        unauthorized_context: str = "",
    ) -> Reply:
        """The reply to a whole answer's ``code``, changing the state as it says."""
        outcome = outcome_for(api, code)
        what = api.value
        if outcome is Outcome.OK:
            return _DONE
        if outcome is Outcome.FIND_COORDINATOR:
            return _FIND
        if outcome is Outcome.RETRY:
            return _RETRY
        if outcome is Outcome.FENCED:
            return self._fenced(what)
        if outcome is Outcome.FATAL:
            return self.fatal(make_error(code, fatal_context or what))
        if outcome is Outcome.ABORTABLE:
            return self.abortable(make_error(code, what))
        if outcome is Outcome.ABORTABLE_IF_BUMP:
            return self._abortable_if_bump(make_error(code, what))
        if outcome is Outcome.GROUP_UNAUTHORIZED:
            return self.abortable(make_error(code, unauthorized_context))
        if outcome is Outcome.COMMIT_FAILED:
            return self.abortable(
                CommitFailedError(
                    "transactional offset commit failed: the consumer group metadata "
                    f"does not match ({make_error(code).name})"
                )
            )
        return self.fatal(make_error(code, unexpected_context or f"unexpected error in {what}"))

    def error_for_call(self, operation: str) -> BaseException:
        """The error a call made in an error state raises (a fresh instance, as Java does)."""
        last = self.last_error
        assert last is not None
        if isinstance(last, ProducerFencedError):
            return ProducerFencedError(
                f"transactional id {self.transactional_id!r} with producer id "
                f"{self.producer_id} epoch {self.epoch} has been fenced by another producer"
            )
        state = "a fatal" if self.state is S.FATAL_ERROR else "an abortable"
        code = getattr(last, "code", None)
        detail = f"cannot {operation}: the producer is in {state} error state ({last})"
        if isinstance(code, int) and error_for_code(code) is type(last):
            return make_error(code, detail)
        fresh = KafkaError(detail)
        fresh.__cause__ = last
        return fresh

    def _fail_if_error(self, operation: str) -> None:
        if self.has_error:
            raise self.error_for_call(operation)

    def _fail_if_pending(self, operation: str) -> None:
        pending = self.pending
        if pending is None:
            return
        if pending.acked:
            self.pending = None
            return
        raise IllegalStateError(
            f"cannot {operation}: the previous {pending.operation} timed out and must be "
            f"retried (or call init_transactions)"
        )

    def cached(self, state: ProducerTxnState, operation: str) -> Pending | None:
        """The pending run of ``operation`` to wait for again, or None to start one.

        Raises :class:`IllegalStateError` when another operation is pending.
        """
        pending = self.pending
        if pending is None:
            return None
        if pending.acked:
            self.pending = None
            return None
        if pending.state is not state:
            raise IllegalStateError(
                f"cannot {operation}: the previous {pending.operation} timed out and must be "
                f"retried"
            )
        return pending

    # ---- user calls

    def begin_init(self) -> bool:
        """``init_transactions``: enter INITIALIZING; True when this re-initialises after
        a commit or abort whose outcome is unknown.

        The InitProducerId is the one a new producer sends (no producer id or
        epoch): the coordinator completes the old transaction (aborting it if its
        EndTxn never arrived) and bumps the epoch, so a late EndTxn of the old
        epoch is fenced. Sending the current id and epoch instead (KIP-360) would
        get PRODUCER_FENCED on the retry after the coordinator aborted an open
        transaction. The caller also drops the coordinator connection, where the
        abandoned EndTxn may still be queued.
        """
        pending = self.pending
        if (
            pending is not None
            and not pending.acked
            and pending.state is not S.INITIALIZING
            and self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)
        ):
            logger.info(
                "transactional id %r: re-initialising after a %s of unknown outcome",
                self.transactional_id,
                pending.operation,
            )
            self.pending = None
            self.fire(E.INIT)
            self._bumping = True
            return True
        self._fail_if_error("initialize transactions")
        self.fire(E.INIT)
        self._bumping = False
        return False

    def init_request(self, *, bump: bool) -> InitProducerIdRequest:
        """InitProducerId for a first id (``bump=False``) or an epoch bump."""
        return InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else -1,
            producer_epoch=self.epoch if bump else -1,
        )

    def begin_transaction(self) -> None:
        """``begin_transaction``: READY -> IN_TRANSACTION (no request: the first
        partition or offsets added start the transaction on the coordinator)."""
        self._fail_if_pending("begin a transaction")
        self._fail_if_error("begin a transaction")
        if self.state is not S.READY:
            raise IllegalStateError(self._state_message("begin a transaction"))
        self.fire(E.BEGIN)
        self.first_add_in_transaction = True

    def check_send(self) -> None:
        """Raise unless a record may be sent now (Java's failIfNotReadyForSend)."""
        if self.has_error:
            raise self.error_for_call("send")
        if not self.has_producer_id:
            raise IllegalStateError(
                "cannot send before init_transactions() completes when transactions are enabled"
            )
        if self.state is not S.IN_TRANSACTION:
            raise IllegalStateError(self._state_message("send"))

    def add_partition(self, tp: TP) -> bool:
        """Note that ``tp`` is written to; True if it must be added to the transaction."""
        if tp in self.partitions or tp in self.new_partitions or tp in self.adding:
            self.noted.add(tp)
            return False
        with self._partitions_lock:
            self.new_partitions.add(tp)
            self.noted.add(tp)
        return True

    def send_allowed(self, tp: TP) -> bool:
        """Whether batches of ``tp`` may be sent (the coordinator added it)."""
        return self.state is not S.FATAL_ERROR and tp in self.partitions

    def begin_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``send_offsets_to_transaction``: checks, and the offsets to commit."""
        check_group_metadata(group_metadata)
        self._fail_if_pending("send offsets to the transaction")
        self._fail_if_error("send offsets to the transaction")
        if self.state is not S.IN_TRANSACTION:
            raise IllegalStateError(self._state_message("send offsets to the transaction"))
        return {
            tp: value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            for tp, value in offsets.items()
        }

    def begin_commit(self) -> None:
        """``commit_transaction``: IN_TRANSACTION -> COMMITTING_TRANSACTION."""
        self._fail_if_error("commit the transaction")
        if self.state is not S.IN_TRANSACTION:
            raise IllegalStateError(self._state_message("commit a transaction"))
        self.fire(E.COMMIT)

    def begin_abort(self) -> None:
        """``abort_transaction``: IN_TRANSACTION or ABORTABLE_ERROR -> ABORTING_TRANSACTION."""
        if self.state is not S.ABORTABLE_ERROR:
            self._fail_if_error("abort the transaction")
        if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR):
            raise IllegalStateError(self._state_message("abort a transaction"))
        self._lost_mapping = isinstance(self.last_error, InvalidProducerIdMappingError)
        self.fire(E.ABORT)
        self.new_partitions.clear()
        self.noted.clear()

    def _state_message(self, operation: str) -> str:
        if self.state is S.UNINITIALIZED:
            return f"cannot {operation}: call init_transactions() first"
        if self.state is S.READY:
            return f"cannot {operation}: no transaction is open (call begin_transaction())"
        if self.state is S.IN_TRANSACTION:
            return f"cannot {operation}: a transaction is already open"
        return f"cannot {operation} in state {self.state.value}"

    # ---- requests and answers: InitProducerId

    def on_init_producer_id(
        self, code: int, producer_id: int, epoch: int, *, version: int, bump: bool
    ) -> Reply:
        """The coordinator's answer to InitProducerId."""
        if code == 0:
            self.fire(E.INITIALIZED)
            self.producer_id = producer_id
            self.epoch = epoch
            self.bump_supported = version >= EPOCH_BUMP_INIT_VERSION
            self._bumping = False
            self.epoch_bump_required = False
            self._forget_transaction()  # after a re-init, the old one is the coordinator's
            logger.info(
                "transactional id %r: producer id %d epoch %d",
                self.transactional_id,
                producer_id,
                epoch,
            )
            return _DONE
        return self._settle(
            TxnApi.INIT_PRODUCER_ID,
            code,
            fatal_context=f"transactional id {self.transactional_id!r}",
        )

    # ---- AddPartitionsToTxn

    def take_partitions(self, version: int) -> AddPartitionsToTxnRequest | None:
        """The AddPartitionsToTxn for the partitions written to since the last one."""
        if (
            not self.new_partitions
            or self.adding
            or self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION)
        ):
            return None
        with self._partitions_lock:
            self.adding = self.new_partitions
            self.new_partitions = set()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.adding):
            by_topic.setdefault(topic, []).append(partition)
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in by_topic.items()],
        )

    def on_add_partitions(self, codes: Mapping[TP, int]) -> Reply:
        """The answer to AddPartitionsToTxn: each partition's error code."""
        adding = self.adding
        retry: Reply | None = None
        unauthorized: list[str] = []
        failed: dict[TP, int] = {}
        for tp in sorted(adding):
            code = codes.get(tp)
            if code is None:
                failed[tp] = OperationNotAttemptedError.code
                continue
            outcome = outcome_for(TxnApi.ADD_PARTITIONS_TO_TXN, code)
            if outcome is Outcome.OK:
                continue
            if outcome in (Outcome.FIND_COORDINATOR, Outcome.RETRY):
                retry = _FIND if outcome is Outcome.FIND_COORDINATOR else _RETRY
                break
            if outcome is Outcome.TOPIC_UNAUTHORIZED:
                unauthorized.append(tp[0])
            elif outcome is Outcome.PARTITION_FAILED:
                failed[tp] = code
            else:
                self.adding = set()
                self.noted.clear()
                return self._settle(
                    TxnApi.ADD_PARTITIONS_TO_TXN,
                    code,
                    fatal_context=f"AddPartitionsToTxn {tp[0]}-{tp[1]}",
                )
        if retry is not None:
            self.requeue_partitions()
            if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                return retry
            return Reply(Action.FAILED, self.last_error)
        self.adding = set()
        if unauthorized or failed:
            self.noted.clear()  # their partitions are in none of the sets now
        if unauthorized:
            return self.abortable(
                TopicAuthorizationFailedError(", ".join(sorted(set(unauthorized))))
            )
        if failed:
            detail = ", ".join(f"{t}-{p}: {make_error(c).name}" for (t, p), c in failed.items())
            return self.abortable(
                KafkaError(f"could not add partitions to the transaction: {detail}")
            )
        self.partitions |= adding
        self.transaction_started = True
        self.first_add_in_transaction = False
        return _DONE

    def requeue_partitions(self) -> None:
        """The AddPartitionsToTxn in flight got no usable answer: add its partitions
        again with the next one."""
        with self._partitions_lock:
            self.new_partitions |= self.adding
            self.adding = set()

    def retry_backoff_ms(self, code: int, default_ms: float) -> float:
        """Java retries a first AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS
        after 20 ms: the previous transaction is usually just finishing."""
        if code == ConcurrentTransactionsError.code and self.first_add_in_transaction:
            return min(20.0, default_ms)
        return default_ms

    # ---- offsets: AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator

    def add_offsets_request(self, group_id: str) -> AddOffsetsToTxnRequest:
        return AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            group_id=group_id,
        )

    def on_add_offsets(self, code: int, group_id: str) -> Reply:
        """The answer to AddOffsetsToTxn."""
        if code == 0:
            self.transaction_started = True
            return _DONE
        return self._settle(
            TxnApi.ADD_OFFSETS_TO_TXN,
            code,
            fatal_context=f"transactional id {self.transactional_id!r}",
            unauthorized_context=f"group {group_id!r}",
        )

    def txn_offset_commit_request(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata,
        version: int,
    ) -> TxnOffsetCommitRequest:
        """TxnOffsetCommit of ``offsets`` (those not committed yet) for the group."""
        if version < GROUP_METADATA_COMMIT_VERSION and (
            group_metadata.generation_id > 0
            or group_metadata.member_id
            or group_metadata.group_instance_id is not None
        ):
            raise UnsupportedVersionError(
                f"the group coordinator's TxnOffsetCommit v{version} cannot carry the "
                f"consumer's group metadata (v{GROUP_METADATA_COMMIT_VERSION}+ needed)"
            )
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, commit in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=commit.offset,
                    committed_leader_epoch=-1
                    if commit.leader_epoch is None
                    else commit.leader_epoch,
                    committed_metadata=commit.metadata,
                )
            )
        return TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group_metadata.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            generation_id=group_metadata.generation_id,
            member_id=group_metadata.member_id,
            group_instance_id=group_metadata.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()],
        )

    def on_txn_offset_commit(
        self, codes: Mapping[TopicPartition, int], pending: dict[TopicPartition, OffsetAndMetadata]
    ) -> Reply:
        """The answer to TxnOffsetCommit; committed partitions leave ``pending``.

        FIND_COORDINATOR here means the *group* coordinator.
        """
        action: Reply = _DONE
        for tp in sorted(pending):
            code = codes.get(tp)
            if code is None:
                action = _RETRY if action is _DONE else action
                continue
            if code == 0:
                del pending[tp]
                continue
            outcome = outcome_for(TxnApi.TXN_OFFSET_COMMIT, code)
            if outcome is Outcome.FIND_COORDINATOR:
                action = _FIND
            elif outcome is Outcome.RETRY:  # CONCURRENT_TRANSACTIONS (KIP-890 verification)...
                action = _RETRY if action is _DONE else action
            else:
                return self._settle(
                    TxnApi.TXN_OFFSET_COMMIT,
                    code,
                    unexpected_context=f"unexpected error in TxnOffsetCommit for {tp}",
                    unauthorized_context=f"TxnOffsetCommit for {tp}",
                )
        if not pending:
            return _DONE
        return action if action is not _DONE else _RETRY

    # ---- EndTxn

    def end_txn_request(self) -> EndTxnRequest | None:
        """The EndTxn ending the transaction, or None when the coordinator never heard of it
        (no partition or offsets were added) or must not be asked (the producer id
        mapping is gone: only an epoch bump helps)."""
        if not self.transaction_started or isinstance(
            self.last_error, InvalidProducerIdMappingError
        ):
            return None
        return EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=self.state is S.COMMITTING_TRANSACTION,
        )

    def on_end_txn(self, code: int) -> Reply:
        """The answer to EndTxn."""
        return self._settle(TxnApi.END_TXN, code)

    def needs_epoch_bump(self) -> bool:
        """After an abort: whether InitProducerId must bump the epoch before READY."""
        return self.epoch_bump_required and self.state is S.ABORTING_TRANSACTION

    def complete(self) -> None:
        """The transaction ended: READY (or INITIALIZING for the epoch bump)."""
        bump = self.needs_epoch_bump()
        self.fire(E.ENDED_BUMP_EPOCH if bump else E.ENDED)
        self._bumping = bump
        self._forget_transaction()

    def _forget_transaction(self) -> None:
        self.transaction_started = False
        with self._partitions_lock:
            self.partitions.clear()
            self.new_partitions.clear()
            self.adding = set()
            self.noted.clear()

    # ---- produce results

    def on_batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed: fatal for fencing, authorization and
        unsupported versions, abortable (with an epoch bump where possible) otherwise."""
        if isinstance(error, _FATAL_BATCH_ERRORS):
            self.fatal(error)
            return
        if self.state is S.FATAL_ERROR or isinstance(error, TransactionAbortedError):
            return
        if self.bump_supported and not self.is_completing:
            self.epoch_bump_required = True
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            self.abortable(error)


def check_group_metadata(group_metadata: ConsumerGroupMetadata) -> None:
    """Java's throwIfInvalidGroupMetadata: a generation needs a member id."""
    if not isinstance(group_metadata, ConsumerGroupMetadata):
        raise TypeError(
            f"group_metadata must be a ConsumerGroupMetadata (consumer.group_metadata()), "
            f"not {type(group_metadata).__name__}"
        )
    if group_metadata.generation_id > 0 and not group_metadata.member_id:
        raise ValueError(f"group metadata {group_metadata!r} has a generation but no member id")


def partition_codes(results: Iterable[Any]) -> dict[TP, int]:
    """AddPartitionsToTxn v0-3 topic results -> {(topic, partition): error code}."""
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in results
        for p in topic.results_by_partition
    }


__all__ = [
    "ANSWERS",
    "TRANSITIONS",
    "Action",
    "Outcome",
    "Pending",
    "ProducerTxnState",
    "Reply",
    "TransactionAbortedError",
    "TransactionManager",
    "TxnApi",
    "TxnEvent",
    "check_group_metadata",
    "outcome_for",
]
