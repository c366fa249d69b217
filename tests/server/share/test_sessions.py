"""Share sessions: opened at epoch 0, followed epoch by epoch, ended at -1."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.errors import (
    InvalidRequestError,
    InvalidShareSessionEpochError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)
from kafkette.server.share.sessions import FINAL_EPOCH, ShareSessions, next_epoch

T = uuid.UUID(int=5)
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def test_a_session_opens_follows_its_epochs_and_tracks_partitions() -> None:
    sessions = ShareSessions()
    session = sessions.fetch("g", "m", 0, fetch=[P0, P1])
    assert (session.epoch, list(session.partitions)) == (1, [P0, P1])
    session = sessions.fetch("g", "m", 1, fetch=[P2, P0], forget=[P1], has_acknowledgements=True)
    assert (session.epoch, list(session.partitions)) == (2, [P0, P2])
    assert sessions.acknowledge("g", "m", 2).epoch == 3
    with pytest.raises(InvalidShareSessionEpochError, match=r"epoch 2 .* not the expected 3"):
        sessions.fetch("g", "m", 2)
    assert sessions.fetch("g", "m", FINAL_EPOCH, has_acknowledgements=True).epoch == 3
    assert sessions.release("g", "m") == [P0, P2]
    assert sessions.get("g", "m") is None and len(sessions) == 0


def test_epoch_zero_replaces_a_session_and_carries_no_acknowledgements() -> None:
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, fetch=[P0])
    sessions.fetch("g", "m", 1)
    with pytest.raises(InvalidRequestError, match="Acknowledge data present in Initial Fetch"):
        sessions.fetch("g", "m", 0, has_acknowledgements=True)
    session = sessions.fetch("g", "m", 0, fetch=[P1])
    assert (session.epoch, list(session.partitions), len(sessions)) == (1, [P1], 1)


def test_missing_sessions_and_the_session_limit() -> None:
    sessions = ShareSessions(max_sessions=1)
    for call in (
        lambda: sessions.fetch("g", "m", 3),
        lambda: sessions.fetch("g", "m", FINAL_EPOCH),
        lambda: sessions.acknowledge("g", "m", 1),
        lambda: sessions.release("g", "m"),
    ):
        with pytest.raises(ShareSessionNotFoundError):
            call()
    sessions.fetch("g", "a", 0)
    with pytest.raises(ShareSessionLimitReachedError, match="limit of 1 share sessions"):
        sessions.fetch("g", "b", 0)
    assert sessions.fetch("g", "a", 0).epoch == 1  # replacing its own session is no new one
    with pytest.raises(InvalidShareSessionEpochError, match="cannot open"):
        sessions.acknowledge("g", "a", 0)


def test_a_closed_connection_ends_its_sessions() -> None:
    sessions = ShareSessions()
    sessions.fetch("g", "a", 0, fetch=[P0], connection_id="c1")
    sessions.fetch("g", "b", 0, fetch=[P1], connection_id="c2")
    gone = sessions.disconnect("c1")
    assert [(s.member_id, list(s.partitions)) for s in gone] == [("a", [P0])]
    assert sessions.get("g", "b") is not None and sessions.disconnect("c1") == []


def test_epochs_wrap_to_one_and_stay_final() -> None:
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(-2, 4), st.booleans()), max_size=30))
def test_any_epochs_give_the_current_session_or_a_session_error(
    calls: list[tuple[str, int, bool]],
) -> None:
    """Against a dict of expected epochs: each call succeeds exactly when Kafka's
    rules say so, and fails with one of the session errors otherwise."""
    sessions, expected = ShareSessions(), dict[str, int]()
    for member, epoch, acknowledging in calls:
        known = expected.get(member)
        ok = (epoch == 0 and not acknowledging) or (
            known is not None and epoch in (FINAL_EPOCH, known)
        )
        try:
            if acknowledging and epoch != 0:
                sessions.acknowledge("g", member, epoch)
            else:
                sessions.fetch("g", member, epoch, has_acknowledgements=acknowledging)
        except (InvalidRequestError, InvalidShareSessionEpochError, ShareSessionNotFoundError):
            assert not ok
            continue
        assert ok
        if epoch == 0:
            expected[member] = 1
        elif epoch != FINAL_EPOCH:
            expected[member] = epoch + 1
        session = sessions.get("g", member)
        assert session is not None and session.epoch == expected[member]
