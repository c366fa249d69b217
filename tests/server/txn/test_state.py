"""The transaction state machine without I/O: every transition and error, and random
request sequences keeping Kafka's invariants."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.server.txn.state import (
    NO_ERROR,
    VALID_PREVIOUS_STATES,
    CoordinatorTxnState,
    IllegalTransition,
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

S = CoordinatorTxnState
CONCURRENT_TRANSACTIONS = 51
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
PRODUCER_FENCED = 90
T0 = 1_000_000


def meta(state: CoordinatorTxnState, *, producer_epoch: int = 3) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="tx",
        producer_id=10,
        producer_epoch=producer_epoch,
        timeout_ms=1_000,
        state=state,
        partitions=frozenset({("t", 0)}) if state not in (S.EMPTY, S.DEAD) else frozenset(),
        txn_start_ms=T0 if state not in (S.EMPTY, S.DEAD) else -1,
        last_update_ms=T0,
    )


def ids() -> itertools.count[int]:
    return itertools.count(100)


def test_valid_previous_states_are_kafkas() -> None:
    """The table of Kafka's TransactionState.validPreviousStates."""
    assert {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    } == VALID_PREVIOUS_STATES
    assert [s.display_name for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert (
        CoordinatorTxnState.from_name("Ongoing") == S.ONGOING
        and CoordinatorTxnState.from_name("ongoing") is None
    )


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.EMPTY, (S.EMPTY, 10, 4)),
        (S.COMPLETE_COMMIT, (S.EMPTY, 10, 4)),
        (S.COMPLETE_ABORT, (S.EMPTY, 10, 4)),
        (S.ONGOING, (S.PREPARE_EPOCH_FENCE, 10, 4)),
        (S.PREPARE_COMMIT, CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, CONCURRENT_TRANSACTIONS),
    ],
)
def test_init_producer_id_in_each_state(
    state: CoordinatorTxnState, expected: tuple[CoordinatorTxnState, int, int] | int
) -> None:
    """InitProducerId bumps the epoch when no transaction is open, fences an open one, and
    asks to retry while markers are being written."""
    outcome = prepare_init(
        meta(state),
        timeout_ms=5_000,
        expected=None,
        now_ms=T0 + 1,
        allocate_producer_id=ids().__next__,
    )
    if isinstance(expected, int):
        assert outcome == expected
        return
    assert not isinstance(outcome, int)
    assert (outcome.state, outcome.producer_id, outcome.producer_epoch) == expected
    if outcome.state == S.EMPTY:
        assert outcome.partitions == frozenset() and outcome.txn_start_ms == -1
        assert (outcome.timeout_ms, outcome.last_update_ms) == (5_000, T0 + 1)
        assert outcome.last_producer_epoch == -1
    else:
        assert outcome.partitions == frozenset({("t", 0)}) and outcome.timeout_ms == 1_000


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_init_in_a_transient_state_is_a_bug(state: CoordinatorTxnState) -> None:
    with pytest.raises(IllegalTransition):
        prepare_init(
            meta(state), timeout_ms=1, expected=None, now_ms=T0, allocate_producer_id=ids().__next__
        )


def test_first_init_starts_at_epoch_zero() -> None:
    fresh = new_metadata("tx", 7, 1_000, T0)
    outcome = prepare_init(
        fresh, timeout_ms=1_000, expected=None, now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(outcome, int)
    assert (outcome.producer_id, outcome.producer_epoch, outcome.state) == (7, 0, S.EMPTY)
    # KIP-360: a producer recovering with an id the coordinator never gave is told the new one.
    resumed = prepare_init(
        fresh, timeout_ms=1_000, expected=(3, 5), now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(resumed, int)
    assert (resumed.producer_id, resumed.producer_epoch) == (7, 0)


def test_init_with_expected_producer() -> None:
    """KIP-360: the current epoch is bumped (and remembered), the previous one is a retry,
    anything else is fenced; an exhausted epoch rotates the producer id."""
    current = meta(S.COMPLETE_COMMIT)
    bump = prepare_init(
        current, timeout_ms=1, expected=(10, 3), now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(bump, int)
    assert (bump.producer_epoch, bump.last_producer_epoch) == (4, 3)
    retry = prepare_init(
        bump, timeout_ms=1, expected=(10, 3), now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(retry, int)
    assert (retry.producer_id, retry.producer_epoch) == (10, 4)
    assert (
        prepare_init(
            bump, timeout_ms=1, expected=(10, 2), now_ms=T0, allocate_producer_id=ids().__next__
        )
        == PRODUCER_FENCED
    )
    assert (
        prepare_init(
            bump, timeout_ms=1, expected=(11, 4), now_ms=T0, allocate_producer_id=ids().__next__
        )
        == PRODUCER_FENCED
    )
    worn = meta(S.EMPTY, producer_epoch=32766)
    rotated = prepare_init(
        worn, timeout_ms=1, expected=(10, 32766), now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(rotated, int)
    assert (rotated.producer_id, rotated.producer_epoch) == (100, 0)
    assert (rotated.last_producer_id, rotated.last_producer_epoch) == (10, 32766)
    plain = prepare_init(
        worn, timeout_ms=1, expected=None, now_ms=T0, allocate_producer_id=ids().__next__
    )
    assert not isinstance(plain, int)
    assert (plain.producer_id, plain.producer_epoch, plain.last_producer_epoch) == (100, 0, -1)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.EMPTY, S.ONGOING),
        (S.COMPLETE_COMMIT, S.ONGOING),
        (S.COMPLETE_ABORT, S.ONGOING),
        (S.ONGOING, S.ONGOING),
        (S.PREPARE_COMMIT, CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, CONCURRENT_TRANSACTIONS),
    ],
)
def test_add_partitions_in_each_state(
    state: CoordinatorTxnState, expected: CoordinatorTxnState | int
) -> None:
    """Partitions join an Ongoing transaction (starting it, and its clock, if needed)."""
    outcome = prepare_add_partitions(meta(state), 10, 3, [("t", 1)], T0 + 5)
    if not isinstance(expected, CoordinatorTxnState):
        assert outcome == expected
        return
    assert not isinstance(outcome, int)
    assert outcome.state == expected
    before = meta(state).partitions
    assert outcome.partitions == before | {("t", 1)}
    assert outcome.txn_start_ms == (T0 if state == S.ONGOING else T0 + 5)


def test_add_partitions_errors() -> None:
    ongoing = meta(S.ONGOING)
    assert prepare_add_partitions(None, 10, 3, [("t", 0)], T0) == INVALID_PRODUCER_ID_MAPPING
    assert prepare_add_partitions(ongoing, 11, 3, [("t", 0)], T0) == INVALID_PRODUCER_ID_MAPPING
    assert prepare_add_partitions(ongoing, 10, 2, [("t", 0)], T0) == PRODUCER_FENCED
    assert prepare_add_partitions(ongoing, 10, 4, [("t", 0)], T0) == PRODUCER_FENCED
    assert prepare_add_partitions(ongoing, 10, 3, [("t", 0)], T0) == NO_ERROR  # already in


@pytest.mark.parametrize(
    ("state", "commit", "expected"),
    [
        (S.ONGOING, True, S.PREPARE_COMMIT),
        (S.ONGOING, False, S.PREPARE_ABORT),
        (S.COMPLETE_COMMIT, True, NO_ERROR),
        (S.COMPLETE_COMMIT, False, INVALID_TXN_STATE),
        (S.COMPLETE_ABORT, False, NO_ERROR),
        (S.COMPLETE_ABORT, True, INVALID_TXN_STATE),
        (S.PREPARE_COMMIT, True, CONCURRENT_TRANSACTIONS),
        (S.PREPARE_COMMIT, False, INVALID_TXN_STATE),
        (S.PREPARE_ABORT, False, CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, True, INVALID_TXN_STATE),
        (S.EMPTY, True, INVALID_TXN_STATE),
        (S.EMPTY, False, INVALID_TXN_STATE),
    ],
)
def test_end_txn_in_each_state(
    state: CoordinatorTxnState, commit: bool, expected: CoordinatorTxnState | int
) -> None:
    outcome = prepare_end(meta(state), 10, 3, commit, T0 + 1)
    if not isinstance(expected, CoordinatorTxnState):
        assert outcome == expected
    else:
        assert not isinstance(outcome, int)
        assert (outcome.state, outcome.partitions) == (expected, frozenset({("t", 0)}))


def test_end_txn_producer_checks() -> None:
    ongoing = meta(S.ONGOING)
    assert prepare_end(None, 10, 3, True, T0) == INVALID_PRODUCER_ID_MAPPING
    assert prepare_end(ongoing, 9, 3, True, T0) == INVALID_PRODUCER_ID_MAPPING
    assert prepare_end(ongoing, 10, 2, True, T0) == PRODUCER_FENCED
    assert prepare_end(ongoing, 10, 4, True, T0) == PRODUCER_FENCED
    # The coordinator's own abort carries the bumped epoch.
    fence = prepare_fence(ongoing, T0)
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == (
        S.PREPARE_EPOCH_FENCE,
        4,
        -1,
    )
    abort = prepare_end(fence, 10, 4, False, T0, from_client=False)
    assert not isinstance(abort, int)
    assert (abort.state, abort.producer_epoch) == (S.PREPARE_ABORT, 4)
    with pytest.raises(IllegalTransition):
        prepare_end(fence, 10, 4, True, T0, from_client=False)


def test_complete_dead_timeout_and_expiry() -> None:
    done = prepare_complete(meta(S.PREPARE_COMMIT), T0 + 9)
    assert (done.state, done.partitions, done.last_update_ms) == (
        S.COMPLETE_COMMIT,
        frozenset(),
        T0 + 9,
    )
    assert prepare_complete(meta(S.PREPARE_ABORT), T0).state == S.COMPLETE_ABORT
    with pytest.raises(IllegalTransition):
        prepare_complete(meta(S.ONGOING), T0)
    assert prepare_dead(meta(S.EMPTY), T0).state == S.DEAD
    with pytest.raises(IllegalTransition):
        prepare_dead(meta(S.ONGOING), T0)
    with pytest.raises(IllegalTransition):
        prepare_fence(meta(S.EMPTY), T0)
    assert not timed_out(meta(S.ONGOING), T0 + 1_000)
    assert timed_out(meta(S.ONGOING), T0 + 1_001)
    assert not timed_out(meta(S.PREPARE_COMMIT), T0 + 10_000)
    assert expired(meta(S.COMPLETE_ABORT), T0 + 50, 50)
    assert not expired(meta(S.COMPLETE_ABORT), T0 + 49, 50)
    assert not expired(meta(S.ONGOING), T0 + 10_000, 50)


OPS = st.sampled_from(["init", "init_expected", "add", "commit", "abort", "stale", "timeout"])


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=25))
def test_random_requests_keep_kafkas_invariants(ops: list[str]) -> None:
    """Any sequence of requests (run to completion, as the coordinator does) passes only
    through valid transitions, never lowers an epoch of the same producer id, keeps
    partitions exactly while a transaction is open, and never lets a stale epoch in."""
    allocate = ids().__next__
    now = T0
    current = new_metadata("tx", 1, 1_000, now)
    known_epoch = -1

    def step(new: TransactionMetadata) -> None:
        nonlocal current
        assert current.state in VALID_PREVIOUS_STATES[new.state]
        if new.producer_id == current.producer_id:
            assert new.producer_epoch >= current.producer_epoch
        if new.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            assert new.partitions == frozenset()
        if new.state == S.ONGOING:
            assert new.partitions and new.txn_start_ms >= 0
        current = new

    def finish(prepared: TransactionMetadata) -> None:
        step(prepared)
        step(prepare_complete(prepared, now))

    for op in ops:
        now += 10
        pid, epoch = current.producer_id, current.producer_epoch
        if op in ("init", "init_expected"):
            expected = (pid, known_epoch) if op == "init_expected" and known_epoch >= 0 else None
            outcome = prepare_init(
                current,
                timeout_ms=1_000,
                expected=expected,
                now_ms=now,
                allocate_producer_id=allocate,
            )
            if isinstance(outcome, int):
                assert outcome in (PRODUCER_FENCED, CONCURRENT_TRANSACTIONS)
                continue
            if outcome.state == S.PREPARE_EPOCH_FENCE:
                step(outcome)
                aborted = prepare_end(
                    outcome,
                    outcome.producer_id,
                    outcome.producer_epoch,
                    False,
                    now,
                    from_client=False,
                )
                assert not isinstance(aborted, int)
                finish(aborted)
            else:
                step(outcome)
                known_epoch = outcome.producer_epoch
        elif op == "add":
            outcome = prepare_add_partitions(current, pid, known_epoch, [("t", len(ops) % 3)], now)
            if isinstance(outcome, int):
                assert outcome in (NO_ERROR, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING)
                if known_epoch == epoch and current.producer_id == pid:
                    assert outcome == NO_ERROR
            else:
                assert known_epoch == epoch
                step(outcome)
        elif op in ("commit", "abort"):
            outcome = prepare_end(current, pid, known_epoch, op == "commit", now)
            if isinstance(outcome, int):
                assert outcome in (NO_ERROR, INVALID_TXN_STATE, PRODUCER_FENCED)
            else:
                assert known_epoch == epoch
                finish(outcome)
        elif op == "stale" and epoch > 0:
            assert prepare_end(current, pid, epoch - 1, True, now) == PRODUCER_FENCED
            assert (
                prepare_add_partitions(current, pid, epoch - 1, [("t", 0)], now) == PRODUCER_FENCED
            )
        elif op == "timeout" and current.state == S.ONGOING:
            now = current.txn_start_ms + current.timeout_ms + 1
            assert timed_out(current, now)
            fence = prepare_fence(current, now)
            step(fence)
            aborted = prepare_end(
                fence, fence.producer_id, fence.producer_epoch, False, now, from_client=False
            )
            assert not isinstance(aborted, int)
            finish(aborted)
            assert current.producer_epoch == epoch + 1
