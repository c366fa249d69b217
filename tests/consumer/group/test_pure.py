"""The group member's pure parts: timers, rebalance arithmetic, OffsetCommit/OffsetFetch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.consumer.assignors import RangeAssignor, RebalanceProtocol, resolve_assignors
from kafkette.consumer.group.offsets import commit_errors, commit_request, fetch_answer
from kafkette.consumer.group.rebalance import (
    AssignmentChange,
    rebalance_protocol,
    revoked_before_join,
)
from kafkette.consumer.group.timers import MemberTimers
from kafkette.errors import OffsetMetadataTooLargeError, UnknownTopicOrPartitionError
from kafkette.protocol.messages import OffsetCommitResponse, OffsetFetchResponse
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.protocol.messages.offset_fetch_response import (
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kafkette.structs import OffsetAndMetadata, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def timers(now: float = 1_000.0) -> MemberTimers:
    return MemberTimers(
        heartbeat_interval_ms=300,
        session_timeout_ms=1_000,
        max_poll_interval_ms=5_000,
        auto_commit_interval_ms=2_000,
        now_ms=now,
    )


def test_heartbeat_timing() -> None:
    t = timers()
    assert t.heartbeat_due_in(1_000) == 300
    assert t.heartbeat_due_in(1_350) == 0
    t.heartbeat_sent(1_350)
    assert t.heartbeat_due_in(1_400) == 250
    t.heartbeat_failed(1_400, retry_backoff_ms=100)
    assert t.heartbeat_due_in(1_400) == 100
    assert not t.session_expired(1_999)
    assert t.session_expired(2_000)  # Java's timers expire at now >= deadline
    t.heartbeat_ok(2_000)
    assert not t.session_expired(2_900)


def test_poll_interval_and_auto_commit() -> None:
    t = timers()
    assert not t.poll_timeout_expired(5_999)
    assert t.poll_timeout_expired(6_000)
    assert t.poll_timeout_in(2_000) == 4_000
    t.polled(6_000)
    assert not t.poll_timeout_expired(10_999)
    assert not t.auto_commit_due(2_999)
    assert t.auto_commit_due(3_000)
    t.auto_commit_started(3_000)
    assert not t.auto_commit_due(4_999)
    assert t.auto_commit_due(5_000)


def test_protocol_is_cooperative_only_when_every_assignor_supports_it() -> None:
    assert rebalance_protocol(resolve_assignors(["cooperative-sticky"])) is (
        RebalanceProtocol.COOPERATIVE
    )
    assert rebalance_protocol(resolve_assignors(["range", "cooperative-sticky"])) is (
        RebalanceProtocol.EAGER
    )
    assert rebalance_protocol([RangeAssignor()]) is RebalanceProtocol.EAGER


def test_revoked_before_join() -> None:
    owned = {A0, A1, B0}
    assert revoked_before_join(RebalanceProtocol.EAGER, owned, ["a", "b"]) == owned
    assert revoked_before_join(RebalanceProtocol.COOPERATIVE, owned, ["a", "b"]) == set()
    assert revoked_before_join(RebalanceProtocol.COOPERATIVE, owned, ["a"]) == {B0}


partitions = st.frozensets(
    st.builds(TopicPartition, st.sampled_from(["a", "b", "c"]), st.integers(0, 5)), max_size=12
)


@settings(max_examples=60)
@given(partitions, partitions)
def test_assignment_change_partitions_the_union(
    owned: frozenset[TopicPartition], assigned: frozenset[TopicPartition]
) -> None:
    change = AssignmentChange.between(owned, assigned)
    assert change.added | change.kept == assigned
    assert change.revoked | change.kept == owned
    assert not (change.added & owned)
    assert not (change.revoked & assigned)


def test_commit_request_groups_partitions_by_topic_in_order() -> None:
    request = commit_request(
        "g",
        {B0: OffsetAndMetadata(7), A1: OffsetAndMetadata(3, "m", 4), A0: OffsetAndMetadata(0)},
        generation_id=5,
        member_id="m-1",
        group_instance_id="i",
    )
    assert request.group_id == "g"
    assert request.generation_id_or_member_epoch == 5
    assert request.member_id == "m-1"
    assert request.group_instance_id == "i"
    assert request.topics == [
        OffsetCommitRequestTopic(
            name="a",
            partitions=[
                OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_metadata=""
                ),
                OffsetCommitRequestPartition(
                    partition_index=1,
                    committed_offset=3,
                    committed_leader_epoch=4,
                    committed_metadata="m",
                ),
            ],
        ),
        OffsetCommitRequestTopic(
            name="b",
            partitions=[
                OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_metadata=""
                )
            ],
        ),
    ]


def test_commit_errors_by_partition() -> None:
    response = OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name="a",
                partitions=[
                    OffsetCommitResponsePartition(partition_index=0, error_code=0),
                    OffsetCommitResponsePartition(partition_index=1, error_code=12),
                ],
            )
        ]
    )
    errors = commit_errors(response)
    assert list(errors) == [A1]
    assert isinstance(errors[A1], OffsetMetadataTooLargeError)


def test_fetch_answer_reads_offsets_and_missing_ones() -> None:
    response = OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                name="a",
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=9,
                        metadata="x",
                        committed_leader_epoch=2,
                    ),
                    OffsetFetchResponsePartition(partition_index=1, committed_offset=-1),
                ],
            )
        ]
    )
    assert fetch_answer(response) == {A0: OffsetAndMetadata(9, "x", 2), A1: None}
    response.topics[0].partitions[1].error_code = 3
    with pytest.raises(UnknownTopicOrPartitionError):
        fetch_answer(response)
