"""The share room over the generated messages, through their bytes."""

from __future__ import annotations

import struct
import uuid

import attrs
import pytest

from kafkette.errors import (
    ApiError,
    FencedMemberEpochError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from kafkette.protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch as AckRequestBatch,
)
from kafkette.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords as WireAcquired
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.server.share import wire
from kafkette.server.share.group import ShareGroup, TopicImage
from kafkette.server.share.state import Acknowledgement, AcquiredRecords

T = uuid.UUID("5d4c3b2a-1908-4f6e-8d7c-6b5a49382716")
TOPICS = {"orders": TopicImage(T, 3)}


def over_the_wire(
    group: ShareGroup, request: ShareGroupHeartbeatRequest, now: int = 0
) -> ShareGroupHeartbeatResponse:
    decoded = ShareGroupHeartbeatRequest.decode(request.encode(1), 1)
    response = wire.heartbeat(group, decoded, now, TOPICS, client_id="c", client_host="/127.0.0.1")
    return ShareGroupHeartbeatResponse.decode(response.encode(1), 1)


def test_a_heartbeat_joins_and_the_answer_carries_the_assignment() -> None:
    group = ShareGroup("g")
    member = str(uuid.UUID(int=9))
    request = ShareGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=0, subscribed_topic_names=["orders"]
    )
    response = over_the_wire(group, request)
    assert (response.error_code, response.member_id, response.member_epoch) == (0, member, 1)
    assert response.heartbeat_interval_ms == 5000
    assert wire.assignment_by_topic(response) == {T: [0, 1, 2]}
    assert group.members[member].client_host == "/127.0.0.1"
    again = over_the_wire(
        group, ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=1)
    )
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 1, None)


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (
            ShareGroupHeartbeatRequest(group_id="", member_id="m", member_epoch=1),
            InvalidRequestError,
        ),
        (
            ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0),
            InvalidRequestError,
        ),
        (
            ShareGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=2),
            UnknownMemberIdError,
        ),
        (
            ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=7),
            FencedMemberEpochError,
        ),
    ],
)
def test_refusals_are_error_codes_with_kafkas_messages(
    request_: ShareGroupHeartbeatRequest, error: type[ApiError]
) -> None:
    group = ShareGroup("g")
    over_the_wire(
        group,
        ShareGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["orders"]
        ),
    )
    response = over_the_wire(group, request_)
    assert response.error_code == error.code
    assert response.error_message and response.assignment is None


def test_acknowledgement_batches_and_renew_from_version_2() -> None:
    batches = [AcknowledgementBatch(0, 2, [1]), AcknowledgementBatch(4, 5, [2, 4])]
    assert wire.acknowledgements(batches, 2) == [
        Acknowledgement(0, 2, (1,)),
        Acknowledgement(4, 5, (2, 4)),
    ]
    with pytest.raises(InvalidRequestError, match="RENEW needs version 2"):
        wire.acknowledgements(batches, 1)
    with pytest.raises(InvalidRequestError, match="has no types"):
        wire.acknowledgements([AckRequestBatch(3, 3, [])], 2)


def test_acquired_records_as_the_response_carries_them() -> None:
    assert wire.acquired_records([AcquiredRecords(3, 9, 2)]) == [WireAcquired(3, 9, 2)]


def test_share_fetch_v2_bytes_carry_the_acquire_mode_then_the_renew_flag() -> None:
    """Kafka 4.2's ShareFetch v2 layout (franz-go's definition 78_share_fetch agrees):
    ..., MaxRecords, BatchSize, ShareAcquireMode int8, IsRenewAck bool, Topics, ..."""
    request = ShareFetchRequest(
        group_id="g",
        member_id="m",
        share_session_epoch=3,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=0,
        max_records=0,
        batch_size=0,
        share_acquire_mode=1,
        is_renew_ack=True,
        topics=[
            FetchTopic(
                T,
                [
                    FetchPartition(
                        partition_index=2, acknowledgement_batches=[AcknowledgementBatch(5, 5, [4])]
                    )
                ],
            )
        ],
    )
    expected = (
        b"\x02g\x02m"  # compact strings
        + struct.pack(">iiiiii", 3, 0, 0, 0, 0, 0)
        + b"\x01\x01"  # ShareAcquireMode 1, IsRenewAck true
        + b"\x02"
        + T.bytes  # one topic
        + b"\x02"
        + struct.pack(">i", 2)  # one partition (no PartitionMaxBytes after v0)
        + b"\x02"
        + struct.pack(">qq", 5, 5)
        + b"\x02\x04"
        + b"\x00"  # one batch: RENEW
        + b"\x00"  # partition tagged fields
        + b"\x00"  # topic tagged fields
        + b"\x01"  # no forgotten topics
        + b"\x00"  # tagged fields
    )
    assert request.encode(2) == expected
    assert ShareFetchRequest.decode(expected, 2) == request
    plain = attrs.evolve(request, share_acquire_mode=0, is_renew_ack=False)
    assert plain.encode(1) == expected[:28] + expected[30:]  # v1 has neither field


def test_kip_1226_fields_sit_where_kafka_4_2_puts_them() -> None:
    """WriteShareGroupState v1: DeliveryCompleteCount after StartOffset;
    DescribeShareGroupOffsets v1: Lag after LeaderEpoch (franz-go's definitions)."""
    from kafkette.protocol.messages import (
        describe_share_group_offsets_response as dsgo,
    )
    from kafkette.protocol.messages import write_share_group_state_request as wsgs

    write = wsgs.WriteShareGroupStateRequest(
        group_id="g",
        topics=[
            wsgs.WriteStateData(
                T,
                [
                    wsgs.PartitionData(
                        partition=1,
                        state_epoch=2,
                        leader_epoch=3,
                        start_offset=4,
                        delivery_complete_count=5,
                    )
                ],
            )
        ],
    )
    partition = struct.pack(">iiiq", 1, 2, 3, 4)
    head = b"\x02g" + b"\x02" + T.bytes + b"\x02"
    assert write.encode(1) == head + partition + struct.pack(">i", 5) + b"\x01\x00\x00\x00"
    write.topics[0].partitions[0].delivery_complete_count = -1
    assert write.encode(0) == head + partition + b"\x01\x00\x00\x00"
    offsets = dsgo.DescribeShareGroupOffsetsResponse(
        groups=[
            dsgo.DescribeShareGroupOffsetsResponseGroup(
                group_id="g",
                topics=[
                    dsgo.DescribeShareGroupOffsetsResponseTopic(
                        topic_name="t",
                        topic_id=T,
                        partitions=[
                            dsgo.DescribeShareGroupOffsetsResponsePartition(
                                partition_index=0, start_offset=7, leader_epoch=1, lag=9
                            )
                        ],
                    )
                ],
            )
        ]
    )
    encoded = offsets.encode(1)
    assert struct.pack(">iqiqh", 0, 7, 1, 9, 0) in encoded
    assert dsgo.DescribeShareGroupOffsetsResponse.decode(encoded, 1) == offsets
    offsets.groups[0].topics[0].partitions[0].lag = -1
    v0 = dsgo.DescribeShareGroupOffsetsResponse.decode(offsets.encode(0), 0)
    assert v0 == offsets and struct.pack(">iqih", 0, 7, 1, 0) in offsets.encode(0)


def test_a_described_group_names_its_members_and_their_partitions() -> None:
    from kafkette.protocol.messages import share_group_describe_response as describe

    group = ShareGroup("g")
    over_the_wire(
        group,
        ShareGroupHeartbeatRequest(
            group_id="g",
            member_id="m1",
            member_epoch=0,
            subscribed_topic_names=["orders"],
            rack_id="r1",
        ),
    )
    got = wire.described_group(group, {T: "orders"})
    assert got == describe.DescribedGroup(
        group_id="g",
        group_state="Stable",
        group_epoch=1,
        assignment_epoch=1,
        assignor_name="simple",
        members=[
            describe.Member(
                member_id="m1",
                rack_id="r1",
                member_epoch=1,
                client_id="c",
                client_host="/127.0.0.1",
                subscribed_topic_names=["orders"],
                assignment=describe.Assignment([describe.TopicPartitions(T, "orders", [0, 1, 2])]),
            )
        ],
    )
    response = describe.ShareGroupDescribeResponse(groups=[got])
    assert describe.ShareGroupDescribeResponse.decode(response.encode(1), 1) == response
    assert wire.described_group(ShareGroup("empty"), {}).group_state == "Empty"
