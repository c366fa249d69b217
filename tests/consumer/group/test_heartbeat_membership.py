"""The consumer-protocol member's state machine without I/O: the heartbeats it builds,
how it reads answers, and every sequence of operations against its transition table."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.consumer.group.heartbeat_membership import (
    HEARTBEAT_TRANSITIONS,
    AnswerKind,
    HeartbeatMembership,
    HeartbeatState,
)
from kafkette.errors import GroupAuthorizationFailedError, IllegalStateError

S = HeartbeatState
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
NOT_COORDINATOR, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_AUTHORIZATION_FAILED = (
    16,
    25,
    110,
    30,
)


def joined(instance_id: str | None = None) -> HeartbeatMembership:
    m = HeartbeatMembership("g", instance_id=instance_id, member_id="m")
    m.subscribe(("a", "b"), None)
    return m


def test_join_heartbeat_has_epoch_zero_topics_and_no_partitions() -> None:
    m = joined()
    request = m.heartbeat_request()
    assert (request.group_id, request.member_id, request.member_epoch) == ("g", "m", 0)
    assert request.subscribed_topic_names == ["a", "b"]
    assert request.subscribed_topic_regex is None
    assert request.topic_partitions == []
    assert request.rebalance_timeout_ms == 300_000
    assert m.state is S.JOINING


def test_regex_subscription_is_sent_as_subscribed_topic_regex() -> None:
    m = HeartbeatMembership("g", member_id="m")
    m.subscribe((), "orders-.*")
    request = m.heartbeat_request()
    assert (request.subscribed_topic_names, request.subscribed_topic_regex) == ([], "orders-.*")


def test_assignment_reconciled_then_acknowledged() -> None:
    """An answer assigning partitions makes the member RECONCILING; once reconciled it
    heartbeats at once with what it owns, and the next answer leaves it STABLE at the
    interval the broker gave."""
    m = joined()
    m.heartbeat_request()
    kind = m.on_answer(0, None, 1, 700, {T1: frozenset({0, 1})})
    assert (kind, m.state, m.member_epoch, m.heartbeat_interval_ms) == (
        AnswerKind.OK,
        S.RECONCILING,
        1,
        700,
    )
    m.reconciled({T1: frozenset({0, 1})})
    assert (m.state, m.send_now) == (S.ACKNOWLEDGING, True)
    assert m.next_heartbeat_ms(1000) == 1000
    request = m.heartbeat_request()
    assert [(tp.topic_id, tp.partitions) for tp in request.topic_partitions or []] == [(T1, [0, 1])]
    assert request.member_epoch == 1
    m.on_answer(0, None, 1, 700, {T1: frozenset({0, 1})})
    assert m.state is S.STABLE
    assert m.next_heartbeat_ms(1000) == 1700


def test_revocation_then_new_epoch() -> None:
    """A smaller assignment is a revocation: reconcile to it, acknowledge, get the new epoch."""
    m = joined()
    m.on_answer(0, None, 1, 500, {T1: frozenset({0, 1}), T2: frozenset({0})})
    m.reconciled({T1: frozenset({0, 1}), T2: frozenset({0})})
    m.on_answer(0, None, 1, 500, {T1: frozenset({0})})
    assert m.state is S.RECONCILING
    assert m.target == {T1: frozenset({0})}
    m.reconciled({T1: frozenset({0})})
    assert m.owned == {T1: frozenset({0})}
    m.on_answer(0, None, 2, 500, None)
    assert (m.state, m.member_epoch) == (S.STABLE, 2)


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH])
def test_fenced_member_rejoins_with_epoch_zero(code: int) -> None:
    m = joined()
    m.on_answer(0, None, 3, 500, {T1: frozenset({0})})
    m.reconciled({T1: frozenset({0})})
    assert m.on_answer(code, "fenced", 0, 0, None) is AnswerKind.FENCED
    assert m.state is S.FENCED
    m.lost()
    request = m.heartbeat_request()
    assert (m.state, request.member_epoch, request.topic_partitions) == (S.JOINING, 0, [])
    assert request.member_id == "m"


def test_coordinator_errors_retry_and_fatal_errors_stick() -> None:
    m = joined()
    assert m.on_answer(NOT_COORDINATOR, None, 0, 0, None) is AnswerKind.FIND_COORDINATOR
    assert m.state is S.JOINING
    assert m.on_answer(GROUP_AUTHORIZATION_FAILED, "no", 0, 0, None) is AnswerKind.FATAL
    assert m.state.value == "FATAL"
    assert isinstance(m.fatal_error, GroupAuthorizationFailedError)


@pytest.mark.parametrize(("instance_id", "epoch"), [(None, -1), ("i-1", -2)])
def test_leave_epoch(instance_id: str | None, epoch: int) -> None:
    m = joined(instance_id)
    m.on_answer(0, None, 1, 500, None)
    m.start_leaving()
    request = m.heartbeat_request()
    assert (request.member_epoch, request.instance_id) == (epoch, instance_id)
    m.left()
    assert (m.state, m.member_epoch, m.owned) == (S.UNSUBSCRIBED, 0, {})


# -- every sequence against the table ----------------------------------------------------

ASSIGNMENTS = st.dictionaries(
    st.sampled_from([T1, T2]), st.frozensets(st.integers(0, 3), max_size=3), max_size=2
)
CODES = st.sampled_from([0, 0, 0, NOT_COORDINATOR, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, 14])

Op = Callable[[HeartbeatMembership], object]
MOVES = {(state, target) for (state, _), target in HEARTBEAT_TRANSITIONS.items()} | {
    (state, S.RECONCILING) for state in (S.JOINING, S.STABLE, S.ACKNOWLEDGING)
}
"""Every move the table allows, and an answer's move to RECONCILING."""


def op_strategy() -> st.SearchStrategy[tuple[str, Op]]:
    return st.one_of(
        st.just(("subscribe", lambda m: m.subscribe(("a",), None))),
        st.builds(
            lambda code, epoch, a: (
                "answer",
                lambda m: m.on_answer(code, None, epoch, 100, a),
            ),
            CODES,
            st.integers(1, 5),
            st.none() | ASSIGNMENTS,
        ),
        st.just(("reconciled", lambda m: m.reconciled(m.target or {}))),
        st.just(("lost", lambda m: m.lost())),
        st.just(("leave", lambda m: m.start_leaving())),
        st.just(("left", lambda m: m.left())),
        st.just(("request", lambda m: m.heartbeat_request())),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(op_strategy(), max_size=30))
def test_every_sequence_follows_the_table(ops: list[tuple[str, Op]]) -> None:
    """Each operation either moves along the table or raises IllegalStateError with the
    state unchanged; a member out of the group owns nothing at epoch 0, a leaving one
    sends epoch -1, and a heartbeat always reports exactly what the member owns."""
    m = HeartbeatMembership("g", member_id="m")
    for _name, op in ops:
        before = m.state
        try:
            op(m)
        except IllegalStateError:
            assert m.state is before
            continue
        assert m.state is before or (before, m.state) in MOVES
        if m.state is S.UNSUBSCRIBED:
            assert (m.member_epoch, m.owned, m.target) == (0, {}, None)
        if m.state is not S.FATAL and m.state is not S.UNSUBSCRIBED:
            request = m.heartbeat_request()
            if m.state is S.LEAVING:
                assert request.member_epoch == -1
            else:
                assert request.member_epoch == m.member_epoch
                assert {
                    tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions or []
                } == m.owned
            if m.state is S.JOINING and m.member_epoch == 0:
                assert m.owned == {}
