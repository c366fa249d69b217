"""The group member's state machine without I/O: the requests it builds, how each answer
is read (one table per API), and every sequence of events against its transition table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.client.config import ConsumerConfig
from kafkette.consumer.assignors import Assignment, Subscription, encode_assignment
from kafkette.consumer.assignors import encode_subscription as encode_sub
from kafkette.consumer.group.membership import (
    NO_GENERATION,
    TRANSITIONS,
    Answer,
    GroupApi,
    HeartbeatAction,
    HeartbeatPlan,
    MemberEvent,
    Membership,
    MemberState,
    answer_for,
)
from kafkette.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    IllegalStateError,
    InvalidSessionTimeoutError,
    KafkaError,
    RebalanceInProgressError,
)
from kafkette.protocol.messages import (
    HeartbeatRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkette.protocol.messages.join_group_response import JoinGroupResponseMember
from kafkette.protocol.messages.leave_group_request import MemberIdentity
from kafkette.structs import TopicPartition

S, E = MemberState, MemberEvent
A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)
NONE, NOT_COORDINATOR, LOADING, ILLEGAL_GENERATION = 0, 16, 14, 22
UNKNOWN_MEMBER, REBALANCING, MEMBER_ID_REQUIRED, FENCED_INSTANCE = 25, 27, 79, 82


class RecordingMembership(Membership):
    """Remembers each event it accepted, with the state it left."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: list[tuple[MemberState, MemberEvent]] = []

    def fire(self, event: MemberEvent) -> MemberState:
        before = self.state
        target = super().fire(event)
        self.accepted.append((before, event))
        return target


def membership(instance_id: str | None = None) -> RecordingMembership:
    config = ConsumerConfig.from_user(
        bootstrap_servers="memory://unused",
        group_id="g",
        group_instance_id=instance_id,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,
        max_poll_interval_ms=60_000,
    )
    made = Membership.from_config(config, 0.0)
    fields = {name: getattr(made, name) for name in ("assignors", "timers")}
    return RecordingMembership(
        "g",
        instance_id=instance_id,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=60_000,
        **fields,
    )


def joined(code: int = NONE, *, member: str = "m-1", leader: str = "m-1") -> JoinGroupResponse:
    metadata = encode_sub(Subscription(topics=("a",)))
    return JoinGroupResponse(
        error_code=code,
        generation_id=4,
        protocol_name="range",
        leader=leader,
        member_id=member,
        members=[JoinGroupResponseMember(member_id="m-1", metadata=metadata)],
    )


def synced(code: int = NONE) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=code, assignment=encode_assignment(Assignment(partitions=(A0, A1)))
    )


def stable_member() -> RecordingMembership:
    m = membership()
    m.start_join()
    assert m.on_join_group(joined()).answer is Answer.OK
    assert m.on_sync_group(synced(), 4, 0.0).answer is Answer.OK
    assert m.take_join_result() is None
    return m


def test_a_join_from_first_request_to_stable() -> None:
    """JoinGroup names the group, session and rebalance timeouts and one protocol per
    assignor; the answer gives the member id; SyncGroup carries the leader's assignment."""
    m = membership()
    assert (m.state, m.wants_join) == (S.UNJOINED, True)
    m.start_join()
    assert m.state is S.JOINING and not m.rejoin_needed
    protocols = m.join_protocols(Subscription(topics=("a",)))
    request = m.join_request(8, protocols)
    assert (request.group_id, request.member_id, request.protocol_type) == ("g", "", "consumer")
    assert (request.session_timeout_ms, request.rebalance_timeout_ms) == (10_000, 60_000)
    assert request.reason == "joining the group"
    assert [p.name for p in request.protocols] == ["range", "cooperative-sticky"]
    assert m.join_request(0, protocols).rebalance_timeout_ms == -1

    response = joined()
    assert m.on_join_group(response).answer is Answer.OK
    assert (m.member_id, m.protocol_name, m.is_leader) == ("m-1", "range", True)
    assert m.must_assign(response)
    subscriptions = m.member_subscriptions(response)
    assert list(subscriptions) == ["m-1"]
    assignments = m.leader_assignments("range", subscriptions, {"a": 2})
    assert m.sync_request(5, 4, assignments) == SyncGroupRequest(
        group_id="g",
        generation_id=4,
        member_id="m-1",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=assignments,
    )
    assert m.on_sync_group(synced(), 4, 500.0).answer is Answer.OK
    assert (m.state, m.generation_id, m.assignment) == (S.ASSIGNED, 4, (A0, A1))
    assert m.in_generation and m.timers.last_heartbeat_ok_ms == 500.0
    assert m.take_join_result() is None
    assert m.state is S.STABLE and not m.wants_join
    assert m.accepted == [
        (S.UNJOINED, E.JOIN_REQUESTED),
        (S.JOINING, E.SYNCED),
        (S.ASSIGNED, E.ASSIGNMENT_TAKEN),
    ]


@pytest.mark.parametrize(
    ("api", "code", "answer"),
    [
        (GroupApi.JOIN_GROUP, NONE, Answer.OK),
        (GroupApi.JOIN_GROUP, MEMBER_ID_REQUIRED, Answer.TAKE_MEMBER_ID),
        (GroupApi.JOIN_GROUP, UNKNOWN_MEMBER, Answer.LOSE_MEMBER_ID),
        (GroupApi.JOIN_GROUP, ILLEGAL_GENERATION, Answer.LOSE_MEMBER_ID),
        (GroupApi.JOIN_GROUP, REBALANCING, Answer.REJOIN),
        (GroupApi.JOIN_GROUP, NOT_COORDINATOR, Answer.FIND_COORDINATOR),
        (GroupApi.JOIN_GROUP, 15, Answer.FIND_COORDINATOR),
        (GroupApi.JOIN_GROUP, LOADING, Answer.BACKOFF),
        (GroupApi.JOIN_GROUP, FENCED_INSTANCE, Answer.FAILED),
        (GroupApi.JOIN_GROUP, 26, Answer.FAILED),  # INVALID_SESSION_TIMEOUT
        (GroupApi.SYNC_GROUP, UNKNOWN_MEMBER, Answer.LOSE_MEMBER_ID),
        (GroupApi.SYNC_GROUP, ILLEGAL_GENERATION, Answer.LOSE_GENERATION),
        (GroupApi.SYNC_GROUP, REBALANCING, Answer.REJOIN),
        (GroupApi.SYNC_GROUP, LOADING, Answer.BACKOFF),
        (GroupApi.SYNC_GROUP, MEMBER_ID_REQUIRED, Answer.FAILED),
        (GroupApi.HEARTBEAT, REBALANCING, Answer.REJOIN),
        (GroupApi.HEARTBEAT, UNKNOWN_MEMBER, Answer.LOSE_MEMBER_ID),
        (GroupApi.HEARTBEAT, ILLEGAL_GENERATION, Answer.LOSE_GENERATION),
        (GroupApi.HEARTBEAT, FENCED_INSTANCE, Answer.FENCED),
        (GroupApi.HEARTBEAT, NOT_COORDINATOR, Answer.FIND_COORDINATOR),
        (GroupApi.HEARTBEAT, LOADING, Answer.BACKOFF),
    ],
)
def test_answers_table(api: GroupApi, code: int, answer: Answer) -> None:
    """Java's JoinGroupResponseHandler, SyncGroupResponseHandler, HeartbeatResponseHandler."""
    assert answer_for(api, code) is answer


def test_join_answers_change_identity_but_not_state() -> None:
    """MEMBER_ID_REQUIRED takes the id given; UNKNOWN_MEMBER_ID forgets it; still JOINING."""
    m = membership()
    m.start_join()
    assert m.on_join_group(joined(MEMBER_ID_REQUIRED, member="m-9")).answer is (
        Answer.TAKE_MEMBER_ID
    )
    assert (m.state, m.member_id) == (S.JOINING, "m-9")
    reply = m.on_join_group(joined(UNKNOWN_MEMBER))
    assert (reply.answer, m.state, m.member_id) == (Answer.LOSE_MEMBER_ID, S.JOINING, "")
    reply = m.on_join_group(joined(26))
    assert reply.answer is Answer.FAILED and isinstance(reply.error, InvalidSessionTimeoutError)


def test_a_failed_join_is_raised_once_then_the_member_joins_again() -> None:
    m = stable_member()
    m.request_rejoin("test")
    m.start_join()
    error = FencedInstanceIdError("taken")
    m.join_failed(error)
    assert m.state is S.JOIN_FAILED
    with pytest.raises(RebalanceInProgressError):
        m.commit_generation(True)
    assert m.take_join_result() is error
    assert (m.state, m.wants_join, m.fatal_error) == (S.UNJOINED, True, error)
    assert m.generation_id == 4  # the old generation: poll revokes (not loses) its partitions


def test_heartbeats_and_their_answers() -> None:
    m = stable_member()
    assert m.next_heartbeat(1_000.0, 3_000).action is HeartbeatAction.WAIT
    assert m.next_heartbeat(1_000.0, 3_000).wait_ms == 2_000
    assert m.next_heartbeat(3_000.0, 3_000).action is HeartbeatAction.SEND
    assert m.heartbeat_request(4, 4) == HeartbeatRequest(
        group_id="g", generation_id=4, member_id="m-1", group_instance_id=None
    )
    assert m.on_heartbeat(NONE, 3, 3_000.0, 100) is None  # about an older generation
    m.timers.heartbeat_sent(3_000.0)
    assert m.on_heartbeat(REBALANCING, 4, 3_000.0, 100) is Answer.REJOIN
    assert m.rejoin_needed and m.state is S.STABLE
    assert m.on_heartbeat(ILLEGAL_GENERATION, 4, 3_000.0, 100) is Answer.LOSE_GENERATION
    assert (m.state, m.generation_id, m.member_id) == (S.UNJOINED, NO_GENERATION, "m-1")
    assert m.next_heartbeat(3_000.0, 3_000) == HeartbeatPlan(HeartbeatAction.WAIT, 3_000)
    with pytest.raises(CommitFailedError):
        m.commit_generation(True)
    assert m.commit_generation(False) == NO_GENERATION


def test_a_member_that_stops_polling_leaves() -> None:
    m = stable_member()
    m.timers.polled(0.0)
    assert m.next_heartbeat(60_001.0, 3_000).action is HeartbeatAction.LEAVE
    assert m.should_send_leave()
    assert m.leave_request(5, "m-1", "bye") == LeaveGroupRequest(
        group_id="g", members=[MemberIdentity(member_id="m-1", reason="bye")]
    )
    assert m.leave_request(2, "m-1", "bye") == LeaveGroupRequest(group_id="g", member_id="m-1")
    m.left("bye")
    assert (m.state, m.generation_id, m.member_id, m.rejoin_reason) == (
        S.UNJOINED,
        NO_GENERATION,
        "",
        "bye",
    )
    assert not membership("static-1").should_send_leave()


def test_a_generation_lost_before_poll_took_the_assignment() -> None:
    """The assignment still reaches poll, which then finds no generation and joins again."""
    m = membership()
    m.start_join()
    m.on_join_group(joined())
    m.on_sync_group(synced(), 4, 0.0)
    assert m.on_heartbeat(UNKNOWN_MEMBER, 4, 0.0, 100) is Answer.LOSE_MEMBER_ID
    assert m.state is S.ASSIGNED
    assert m.take_join_result() is None
    assert (m.state, m.assignment, m.wants_join) == (S.UNJOINED, (A0, A1), True)


# ---- every sequence of events

Event = Callable[[RecordingMembership], object]

EVENTS: dict[str, tuple[Event, frozenset[MemberEvent]]] = {
    "start_join": (lambda m: m.start_join(), frozenset({E.JOIN_REQUESTED})),
    "join_ok": (lambda m: m.on_join_group(joined()), frozenset()),
    "join_member_id_required": (
        lambda m: m.on_join_group(joined(MEMBER_ID_REQUIRED)),
        frozenset(),
    ),
    "join_unknown_member": (
        lambda m: m.on_join_group(joined(UNKNOWN_MEMBER)),
        frozenset({E.GENERATION_LOST}),
    ),
    "join_rebalancing": (lambda m: m.on_join_group(joined(REBALANCING)), frozenset()),
    "sync_ok": (lambda m: m.on_sync_group(synced(), 4, 0.0), frozenset({E.SYNCED})),
    "sync_illegal_generation": (
        lambda m: m.on_sync_group(synced(ILLEGAL_GENERATION), 4, 0.0),
        frozenset({E.GENERATION_LOST}),
    ),
    "sync_not_coordinator": (
        lambda m: m.on_sync_group(synced(NOT_COORDINATOR), 4, 0.0),
        frozenset(),
    ),
    "join_failed": (lambda m: m.join_failed(KafkaError("x")), frozenset({E.JOIN_FAILED})),
    "take_result": (
        lambda m: m.take_join_result(),
        frozenset({E.ASSIGNMENT_TAKEN, E.FAILURE_TAKEN, E.GENERATION_LOST}),
    ),
    "heartbeat_ok": (lambda m: m.on_heartbeat(NONE, m.generation_id, 0.0, 100), frozenset()),
    "heartbeat_rebalancing": (
        lambda m: m.on_heartbeat(REBALANCING, m.generation_id, 0.0, 100),
        frozenset(),
    ),
    "heartbeat_unknown_member": (
        lambda m: m.on_heartbeat(UNKNOWN_MEMBER, m.generation_id, 0.0, 100),
        frozenset({E.GENERATION_LOST}),
    ),
    "heartbeat_fenced": (
        lambda m: m.on_heartbeat(FENCED_INSTANCE, m.generation_id, 0.0, 100),
        frozenset(),
    ),
    "heartbeat_not_coordinator": (
        lambda m: m.on_heartbeat(NOT_COORDINATOR, m.generation_id, 0.0, 100),
        frozenset(),
    ),
    "next_heartbeat": (lambda m: m.next_heartbeat(0.0, 3_000), frozenset()),
    "commit": (lambda m: m.commit_generation(True), frozenset()),
    "rejoin": (lambda m: m.request_rejoin("test"), frozenset()),
    "revoked": (lambda m: setattr(m, "revoked_for_join", True), frozenset()),
    "leave": (lambda m: m.left("test"), frozenset({E.LEFT})),
}


def facts(m: Membership) -> tuple[object, ...]:
    return (
        m.state,
        m.member_id,
        m.generation_id,
        m.protocol_name,
        m.leader_id,
        m.assignment,
        m.rejoin_needed,
        m.rejoin_reason,
        m.join_error,
        m.fatal_error,
        m.revoked_for_join,
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(sorted(EVENTS)), max_size=40))
def test_any_sequence_of_events_follows_the_transition_table(names: list[str]) -> None:
    """Each call either moves along TRANSITIONS (only with the events that call may fire)
    or is refused with IllegalStateError, leaving every fact of the member as it was."""
    m = membership()
    for name in names:
        call, may_fire = EVENTS[name]
        before = facts(m)
        m.accepted.clear()
        try:
            call(m)
        except IllegalStateError:
            assert facts(m) == before, name
            assert not m.accepted
            continue
        except (RebalanceInProgressError, CommitFailedError):
            assert name == "commit" and facts(m) == before
            continue
        state = before[0]
        for from_state, event in m.accepted:
            assert event in may_fire, (name, event)
            assert from_state is state
            state = TRANSITIONS[(from_state, event)]
        assert m.state is state
        assert (m.state is S.JOIN_FAILED) == (m.join_error is not None)
        if m.state in (S.ASSIGNED, S.STABLE) and m.generation_id != NO_GENERATION:
            assert m.in_generation and m.commit_generation(True) == m.generation_id


def test_every_state_is_reachable_and_can_leave() -> None:
    targets = set(TRANSITIONS.values())
    assert targets == set(MemberState)
    assert all(TRANSITIONS[(state, E.LEFT)] is S.UNJOINED for state in MemberState)
