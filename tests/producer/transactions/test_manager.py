"""The transactional producer's state machine, without I/O: transitions, requests it
builds, and how each coordinator answer is classified (retry, find the coordinator
again, abortable, fatal), as Java's TransactionManager does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.errors import (
    ClusterAuthorizationFailedError,
    CommitFailedError,
    GroupAuthorizationFailedError,
    IllegalStateError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkette.producer.transactions import (
    ANSWERS,
    TRANSITIONS,
    Action,
    Outcome,
    Pending,
    ProducerTxnState,
    TransactionAbortedError,
    TransactionManager,
    TxnApi,
    TxnEvent,
    outcome_for,
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

S = ProducerTxnState
NONE, NOT_COORDINATOR, NOT_AVAILABLE, LOADING, CONCURRENT = 0, 16, 15, 14, 51
INVALID_EPOCH, FENCED, UNKNOWN_PID, INVALID_MAPPING, ABORTABLE = 47, 90, 59, 49, 120


def state_of(manager: TransactionManager) -> ProducerTxnState:
    """The state, read through a call (mypy narrows ``manager.state`` across calls)."""
    return manager.state


def ready(*, version: int = 4) -> TransactionManager:
    manager = TransactionManager("tx", 60_000)
    assert manager.begin_init() is False
    assert manager.on_init_producer_id(0, 7, 3, version=version, bump=False).action is Action.DONE
    return manager


def in_transaction(*partitions: tuple[str, int]) -> TransactionManager:
    manager = ready()
    manager.begin_transaction()
    for tp in partitions:
        manager.add_partition(tp)
    if partitions:
        assert manager.take_partitions(3) is not None
        assert manager.on_add_partitions(dict.fromkeys(partitions, NONE)).action is Action.DONE
    return manager


def test_happy_path_builds_kafkas_requests() -> None:
    """init -> begin -> partitions added -> commit: each request carries the id, producer
    id and epoch; the transaction ends READY with no partitions left."""
    manager = TransactionManager("tx", 45_000)
    assert state_of(manager) is S.UNINITIALIZED
    assert manager.begin_init() is False
    assert state_of(manager) is S.INITIALIZING
    assert manager.init_request(bump=False) == InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=45_000, producer_id=-1, producer_epoch=-1
    )
    assert manager.on_init_producer_id(0, 7, 3, version=4, bump=False).action is Action.DONE
    assert (manager.state, manager.producer_id, manager.epoch) == (S.READY, 7, 3)
    assert manager.bump_supported

    manager.begin_transaction()
    assert manager.add_partition(("b", 1)) is True
    assert manager.add_partition(("a", 0)) is True
    assert manager.add_partition(("a", 0)) is False
    assert not manager.send_allowed(("a", 0))
    request = manager.take_partitions(3)
    assert request == AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=3,
        v3_and_below_topics=[AddPartitionsToTxnTopic("a", [0]), AddPartitionsToTxnTopic("b", [1])],
    )
    assert manager.take_partitions(3) is None  # one at a time
    assert manager.add_partition(("a", 0)) is False  # being added
    reply = manager.on_add_partitions({("a", 0): NONE, ("b", 1): NONE})
    assert reply.action is Action.DONE
    assert manager.send_allowed(("a", 0)) and manager.send_allowed(("b", 1))
    assert manager.transaction_started

    manager.begin_commit()
    assert manager.state is S.COMMITTING_TRANSACTION
    assert manager.end_txn_request() == EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=3, committed=True
    )
    assert manager.on_end_txn(NONE).action is Action.DONE
    manager.complete()
    assert state_of(manager) is S.READY
    assert manager.partitions == set() and not manager.transaction_started


def test_no_end_txn_for_a_transaction_the_coordinator_never_saw() -> None:
    """Nothing written and no offsets: commit and abort need no EndTxn (as Java)."""
    manager = ready()
    manager.begin_transaction()
    manager.begin_abort()
    assert manager.end_txn_request() is None
    manager.complete()
    assert manager.state is S.READY


def test_abort_sends_end_txn_with_committed_false() -> None:
    manager = in_transaction(("t", 0))
    manager.begin_abort()
    assert manager.end_txn_request() == EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=3, committed=False
    )


def test_sends_are_refused_outside_a_transaction() -> None:
    """Java's failIfNotReadyForSend: IllegalStateError before init and between transactions."""
    manager = TransactionManager("tx", 60_000)
    with pytest.raises(IllegalStateError, match="init_transactions"):
        manager.check_send()
    manager = ready()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        manager.check_send()
    manager.begin_transaction()
    manager.check_send()
    with pytest.raises(IllegalStateError, match="already open"):
        manager.begin_transaction()


@pytest.mark.parametrize(
    ("code", "action", "state", "error"),
    [
        (NOT_COORDINATOR, Action.FIND_COORDINATOR, S.INITIALIZING, None),
        (NOT_AVAILABLE, Action.FIND_COORDINATOR, S.INITIALIZING, None),
        (LOADING, Action.RETRY, S.INITIALIZING, None),
        (CONCURRENT, Action.RETRY, S.INITIALIZING, None),
        (INVALID_EPOCH, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (FENCED, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (53, Action.FAILED, S.FATAL_ERROR, TransactionalIdAuthorizationFailedError),
        (31, Action.FAILED, S.FATAL_ERROR, ClusterAuthorizationFailedError),
        (ABORTABLE, Action.FAILED, S.ABORTABLE_ERROR, TransactionAbortableError),
        (50, Action.FAILED, S.FATAL_ERROR, KafkaError),  # INVALID_TRANSACTION_TIMEOUT
    ],
)
def test_init_producer_id_answers(
    code: int, action: Action, state: ProducerTxnState, error: type[BaseException] | None
) -> None:
    """InitProducerId: retriable codes retry, fencing is fatal (INVALID_PRODUCER_EPOCH too),
    authorization fatal, TRANSACTION_ABORTABLE abortable, anything else fatal."""
    manager = TransactionManager("tx", 60_000)
    manager.begin_init()
    reply = manager.on_init_producer_id(code, -1, -1, version=4, bump=False)
    assert reply.action is action
    assert manager.state is state
    if error is None:
        assert reply.error is None
    else:
        assert isinstance(reply.error, error)
        assert manager.last_error is reply.error


@pytest.mark.parametrize(
    ("code", "action", "state", "error"),
    [
        (NOT_COORDINATOR, Action.FIND_COORDINATOR, S.IN_TRANSACTION, None),
        (CONCURRENT, Action.RETRY, S.IN_TRANSACTION, None),
        (LOADING, Action.RETRY, S.IN_TRANSACTION, None),
        (INVALID_EPOCH, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (FENCED, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (53, Action.FAILED, S.FATAL_ERROR, TransactionalIdAuthorizationFailedError),
        (48, Action.FAILED, S.FATAL_ERROR, InvalidTxnStateError),
        (29, Action.FAILED, S.ABORTABLE_ERROR, TopicAuthorizationFailedError),
        (UNKNOWN_PID, Action.FAILED, S.ABORTABLE_ERROR, UnknownProducerIdError),
        (ABORTABLE, Action.FAILED, S.ABORTABLE_ERROR, TransactionAbortableError),
        (55, Action.FAILED, S.ABORTABLE_ERROR, KafkaError),  # OPERATION_NOT_ATTEMPTED
    ],
)
def test_add_partitions_answers(
    code: int, action: Action, state: ProducerTxnState, error: type[BaseException] | None
) -> None:
    """AddPartitionsToTxn, per partition, as Java's AddPartitionsToTxnHandler."""
    manager = ready()
    manager.begin_transaction()
    manager.add_partition(("t", 0))
    manager.add_partition(("t", 1))
    manager.take_partitions(3)
    reply = manager.on_add_partitions({("t", 0): NONE, ("t", 1): code})
    assert reply.action is action
    assert manager.state is state
    assert manager.adding == set()
    if error is None:
        # the whole request is sent again: both partitions wait
        assert manager.new_partitions == {("t", 0), ("t", 1)}
        assert manager.partitions == set()
    else:
        assert isinstance(reply.error, error)
        assert not manager.send_allowed(("t", 0))


def test_unknown_producer_id_is_fatal_without_epoch_bumps() -> None:
    """UNKNOWN_PRODUCER_ID is abortable only when InitProducerId v3+ can bump the epoch."""
    manager = ready(version=2)
    assert not manager.bump_supported
    manager.begin_transaction()
    manager.add_partition(("t", 0))
    manager.take_partitions(3)
    reply = manager.on_add_partitions({("t", 0): UNKNOWN_PID})
    assert manager.state is S.FATAL_ERROR
    assert isinstance(reply.error, UnknownProducerIdError)


def test_concurrent_transactions_on_first_add_retries_fast() -> None:
    """Java retries the first AddPartitionsToTxn of a transaction after 20 ms."""
    manager = in_transaction()
    assert manager.retry_backoff_ms(CONCURRENT, 100) == 20
    assert manager.retry_backoff_ms(LOADING, 100) == 100
    manager.add_partition(("t", 0))
    manager.take_partitions(3)
    manager.on_add_partitions({("t", 0): NONE})
    assert manager.retry_backoff_ms(CONCURRENT, 100) == 100


@pytest.mark.parametrize(
    ("code", "action", "state", "error"),
    [
        (NOT_AVAILABLE, Action.FIND_COORDINATOR, S.COMMITTING_TRANSACTION, None),
        (CONCURRENT, Action.RETRY, S.COMMITTING_TRANSACTION, None),
        (INVALID_EPOCH, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (FENCED, Action.FAILED, S.FATAL_ERROR, ProducerFencedError),
        (48, Action.FAILED, S.FATAL_ERROR, InvalidTxnStateError),
        (INVALID_MAPPING, Action.FAILED, S.ABORTABLE_ERROR, KafkaError),
        (ABORTABLE, Action.FAILED, S.ABORTABLE_ERROR, TransactionAbortableError),
        (42, Action.FAILED, S.FATAL_ERROR, KafkaError),  # INVALID_REQUEST: unexpected
    ],
)
def test_end_txn_answers(
    code: int, action: Action, state: ProducerTxnState, error: type[BaseException] | None
) -> None:
    manager = in_transaction(("t", 0))
    manager.begin_commit()
    reply = manager.on_end_txn(code)
    assert reply.action is action
    assert manager.state is state
    if error is not None:
        assert isinstance(reply.error, error)


def test_fenced_producer_raises_producer_fenced_on_every_call() -> None:
    """After fencing only close() is left: each call raises a fresh ProducerFencedError."""
    manager = in_transaction(("t", 0))
    manager.begin_commit()
    manager.on_end_txn(FENCED)
    for call in (manager.check_send, manager.begin_transaction, manager.begin_abort):
        with pytest.raises(ProducerFencedError, match="fenced"):
            call()
    with pytest.raises(ProducerFencedError):
        manager.begin_init()


def test_failed_batch_makes_the_transaction_abortable_and_the_abort_bumps_the_epoch() -> None:
    """A failed batch: commit is refused with the batch's error; the abort is followed by
    InitProducerId with the current id and epoch (KIP-360), then READY at the new epoch."""
    manager = in_transaction(("t", 0))
    error = OutOfOrderSequenceNumberError("t-0")
    manager.on_batch_failed(error)
    assert manager.state is S.ABORTABLE_ERROR and manager.last_error is error
    assert manager.epoch_bump_required
    with pytest.raises(OutOfOrderSequenceNumberError, match="cannot commit"):
        manager.begin_commit()
    with pytest.raises(OutOfOrderSequenceNumberError, match="cannot send"):
        manager.check_send()
    manager.begin_abort()
    assert manager.end_txn_request() == EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=3, committed=False
    )
    manager.on_end_txn(NONE)
    manager.complete()
    assert state_of(manager) is S.INITIALIZING
    assert manager.init_request(bump=True) == InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000, producer_id=7, producer_epoch=3
    )
    manager.on_init_producer_id(0, 7, 4, version=4, bump=True)
    assert (manager.state, manager.epoch, manager.epoch_bump_required) == (S.READY, 4, False)


def test_failed_batch_without_a_client_error_code_is_abortable_too() -> None:
    """A delivery timeout (a client-side error) fails the transaction the same way."""
    manager = in_transaction(("t", 0))
    manager.on_batch_failed(KafkaTimeoutError("expired"))
    assert manager.state is S.ABORTABLE_ERROR
    with pytest.raises(KafkaError, match="abortable error state"):
        manager.begin_commit()


@pytest.mark.parametrize(
    "error",
    [
        ProducerFencedError("p"),
        TransactionalIdAuthorizationFailedError("t"),
        ClusterAuthorizationFailedError("c"),
        UnsupportedVersionError("v"),
    ],
)
def test_fatal_batch_errors(error: KafkaError) -> None:
    manager = in_transaction(("t", 0))
    manager.on_batch_failed(error)
    assert manager.state is S.FATAL_ERROR and manager.last_error is error
    assert not manager.send_allowed(("t", 0))


def test_failures_while_aborting_do_not_change_the_state() -> None:
    """In-flight batches failing during an abort (their transaction is lost anyway)."""
    manager = in_transaction(("t", 0))
    manager.begin_abort()
    manager.on_batch_failed(TransactionAbortedError())
    manager.on_batch_failed(OutOfOrderSequenceNumberError("t-0"))
    assert manager.state is S.ABORTING_TRANSACTION


def test_a_pending_commit_blocks_other_operations_until_acked() -> None:
    """A commit whose caller timed out: the same call waits again, others are refused."""
    manager = in_transaction(("t", 0))
    manager.begin_commit()
    handle = object()
    manager.pending = Pending(S.COMMITTING_TRANSACTION, "commit_transaction", handle)
    cached = manager.cached(S.COMMITTING_TRANSACTION, "commit_transaction")
    assert cached is not None and cached.handle is handle
    with pytest.raises(IllegalStateError, match="previous commit_transaction timed out"):
        manager.cached(S.ABORTING_TRANSACTION, "abort_transaction")
    with pytest.raises(IllegalStateError, match="previous commit_transaction timed out"):
        manager.begin_offsets({}, ConsumerGroupMetadata("g"))
    manager.on_end_txn(NONE)
    manager.complete()
    with pytest.raises(IllegalStateError, match="previous commit_transaction timed out"):
        manager.begin_transaction()
    manager.pending.acked = True
    manager.begin_transaction()
    assert manager.pending is None


def test_reinit_after_a_commit_of_unknown_outcome_bumps_the_epoch() -> None:
    """init_transactions after a timed-out commit: allowed (True: a re-init); the new
    epoch fences a late EndTxn, and the old transaction's partitions are forgotten."""
    manager = in_transaction(("t", 0))
    manager.begin_commit()
    manager.pending = Pending(S.COMMITTING_TRANSACTION, "commit_transaction", object())
    assert manager.begin_init() is True
    assert manager.state is S.INITIALIZING and manager.pending is None
    assert manager.has_ongoing_transaction
    manager.on_init_producer_id(0, 7, 5, version=4, bump=False)
    assert (manager.state, manager.epoch) == (S.READY, 5)
    assert manager.partitions == set() and not manager.transaction_started
    assert not manager.send_allowed(("t", 0))


def test_offsets_requests() -> None:
    """AddOffsetsToTxn names the group; TxnOffsetCommit v3 carries the member's metadata."""
    manager = in_transaction()
    group = ConsumerGroupMetadata("g", 5, "member-1", "instance-1")
    commits = manager.begin_offsets(
        {TopicPartition("t", 1): 10, TopicPartition("t", 0): OffsetAndMetadata(4, "m", 2)}, group
    )
    assert commits == {
        TopicPartition("t", 1): OffsetAndMetadata(10),
        TopicPartition("t", 0): OffsetAndMetadata(4, "m", 2),
    }
    assert manager.add_offsets_request("g") == AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=3, group_id="g"
    )
    assert manager.on_add_offsets(NONE, "g").action is Action.DONE
    assert manager.transaction_started
    assert manager.txn_offset_commit_request(commits, group, 3) == TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=7,
        producer_epoch=3,
        generation_id=5,
        member_id="member-1",
        group_instance_id="instance-1",
        topics=[
            TxnOffsetCommitRequestTopic(
                "t",
                [
                    TxnOffsetCommitRequestPartition(0, 4, 2, "m"),
                    TxnOffsetCommitRequestPartition(1, 10, -1, ""),
                ],
            )
        ],
    )
    with pytest.raises(UnsupportedVersionError):
        manager.txn_offset_commit_request(commits, group, 2)
    assert manager.txn_offset_commit_request(commits, ConsumerGroupMetadata("g"), 2).topics


def test_txn_offset_commit_answers() -> None:
    """Committed partitions leave the pending set; the rest are retried; a member that the
    group no longer knows makes the transaction abortable with CommitFailedError."""
    manager = in_transaction()
    pending = {
        TopicPartition("t", 0): OffsetAndMetadata(1),
        TopicPartition("t", 1): OffsetAndMetadata(2),
    }
    reply = manager.on_txn_offset_commit(
        {TopicPartition("t", 0): 0, TopicPartition("t", 1): 14}, pending
    )
    assert reply.action is Action.RETRY and list(pending) == [TopicPartition("t", 1)]
    reply = manager.on_txn_offset_commit({TopicPartition("t", 1): NOT_COORDINATOR}, pending)
    assert reply.action is Action.FIND_COORDINATOR
    reply = manager.on_txn_offset_commit({TopicPartition("t", 1): 25}, pending)  # UNKNOWN_MEMBER_ID
    assert reply.action is Action.FAILED and isinstance(reply.error, CommitFailedError)
    assert manager.state is S.ABORTABLE_ERROR


def test_group_authorization_on_add_offsets_is_abortable() -> None:
    manager = in_transaction()
    reply = manager.on_add_offsets(30, "g")
    assert isinstance(reply.error, GroupAuthorizationFailedError)
    assert manager.state is S.ABORTABLE_ERROR


def test_group_metadata_is_checked() -> None:
    """Java's throwIfInvalidGroupMetadata: a generation without a member id is refused."""
    manager = in_transaction()
    with pytest.raises(ValueError, match="no member id"):
        manager.begin_offsets({}, ConsumerGroupMetadata("g", 3, ""))
    with pytest.raises(TypeError):
        manager.begin_offsets({}, "g")  # type: ignore[arg-type]


# ---- every (state, event) pair

EVENTS: dict[str, Any] = {
    "init": lambda m: m.begin_init(),
    "init_ok": lambda m: m.on_init_producer_id(0, 1, 0, version=4, bump=False),
    "begin": lambda m: m.begin_transaction(),
    "commit": lambda m: m.begin_commit(),
    "abort": lambda m: m.begin_abort(),
    "end_ok": lambda m: (m.on_end_txn(0), m.complete()),
    "end_fenced": lambda m: m.on_end_txn(FENCED),
    "end_abortable": lambda m: m.on_end_txn(ABORTABLE),
    "batch_failed": lambda m: m.on_batch_failed(OutOfOrderSequenceNumberError("t-0")),
    "batch_fenced": lambda m: m.on_batch_failed(ProducerFencedError("t-0")),
    "add": lambda m: m.add_partition(("t", 0)),
    "add_ok": lambda m: (m.take_partitions(3), m.on_add_partitions({("t", 0): 0})),
    "send": lambda m: m.check_send(),
}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(sorted(EVENTS)), max_size=30))
def test_any_sequence_of_events_follows_the_transition_table(events: list[str]) -> None:
    """Every event either follows TRANSITIONS or is refused (IllegalStateError or the
    error state's error) leaving the state as it was; FATAL_ERROR is never left."""
    manager = TransactionManager("tx", 60_000)
    for event in events:
        before = manager.state
        try:
            EVENTS[event](manager)
        except (IllegalStateError, KafkaError):
            assert manager.state is before
            continue
        after = manager.state
        if after is not before:
            assert after in {TRANSITIONS.get((before, e)) for e in TxnEvent}, (before, event)
        if before is S.FATAL_ERROR:
            assert after is S.FATAL_ERROR
        if after in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            assert manager.last_error is not None
        else:
            assert manager.last_error is None


def test_answers_table_per_api() -> None:
    """One table of (API, error) -> outcome: fencing is fatal everywhere, a moved
    coordinator is looked up again, retriable codes not listed are retried, and what
    is left is the API's own (a failed partition, or an unexpected answer)."""
    for api in TxnApi:
        assert outcome_for(api, NONE) is Outcome.OK
        assert outcome_for(api, NOT_COORDINATOR) is Outcome.FIND_COORDINATOR
        assert outcome_for(api, FENCED) is Outcome.FENCED
        assert outcome_for(api, INVALID_EPOCH) is Outcome.FENCED
        assert outcome_for(api, CONCURRENT) is Outcome.RETRY
        assert outcome_for(api, ABORTABLE) is Outcome.ABORTABLE
    assert outcome_for(TxnApi.TXN_OFFSET_COMMIT, 7) is Outcome.FIND_COORDINATOR  # timed out
    assert outcome_for(TxnApi.INIT_PRODUCER_ID, UNKNOWN_PID) is Outcome.UNEXPECTED
    assert outcome_for(TxnApi.END_TXN, UNKNOWN_PID) is Outcome.ABORTABLE_IF_BUMP
    assert outcome_for(TxnApi.ADD_PARTITIONS_TO_TXN, 42) is Outcome.PARTITION_FAILED
    assert outcome_for(TxnApi.ADD_OFFSETS_TO_TXN, 42) is Outcome.UNEXPECTED
    # listed codes are never retriable ones turned into failures
    for (_, code), outcome in ANSWERS.items():
        error = error_for_code(code)
        assert error is not None
        if error.retriable:
            assert outcome in (Outcome.FIND_COORDINATOR, Outcome.RETRY)
