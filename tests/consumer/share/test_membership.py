"""A share group member's heartbeat state, without I/O."""

from __future__ import annotations

import uuid

from kafkette.consumer.share.membership import ShareMembership
from kafkette.errors import GroupAuthorizationFailedError
from kafkette.protocol.messages.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

TOPIC = uuid.UUID(int=7)


def answer(
    epoch: int, parts: list[int] | None = None, code: int = 0
) -> ShareGroupHeartbeatResponse:
    assignment = None if parts is None else Assignment([TopicPartitions(TOPIC, parts)])
    return ShareGroupHeartbeatResponse(
        error_code=code, member_epoch=epoch, heartbeat_interval_ms=300, assignment=assignment
    )


def test_join_heartbeat_fence_and_leave() -> None:
    member = ShareMembership("g")
    assert len(member.member_id) == 22 and not member.due(0)
    member.subscribe(["b", "a", "b"])
    assert member.due(0)
    join = member.request()
    assert (join.member_epoch, join.subscribed_topic_names) == (0, ["a", "b"])
    assert member.on_answer(join, answer(3, [2, 0]), now_ms=1000) is False
    assert (member.epoch, member.assignment, member.next_ms) == (3, {TOPIC: [0, 2]}, 1300)
    assert not member.due(1299) and member.due(1300)
    beat = member.request()
    assert (beat.member_epoch, beat.subscribed_topic_names) == (3, None)  # unchanged topics
    member.on_answer(beat, answer(3), now_ms=1300)
    assert member.assignment == {TOPIC: [0, 2]}  # no assignment in the answer: kept
    member.on_answer(member.request(), answer(0, code=110), now_ms=1600)  # FENCED_MEMBER_EPOCH
    assert (member.epoch, member.assignment, member.due(1600)) == (0, {}, True)
    assert member.request().subscribed_topic_names == ["a", "b"]
    assert member.on_answer(member.request(), answer(0, code=16), now_ms=1700) is True  # NOT_COORD
    leave = member.leave_request()
    assert (leave.member_id, leave.member_epoch) == (member.member_id, -1)


def test_a_fatal_answer_is_kept_for_poll() -> None:
    member = ShareMembership("g")
    member.subscribe(["a"])
    member.on_answer(member.request(), answer(0, code=30), now_ms=0)
    assert isinstance(member.error, GroupAuthorizationFailedError)
    assert not member.due(10_000)
