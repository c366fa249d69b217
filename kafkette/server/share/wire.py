"""The share room's values to and from the generated ShareGroupHeartbeat,
ShareGroupDescribe, ShareFetch and ShareAcknowledge messages: what the handlers
will call."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Protocol

from kafkette.errors import ApiError, InvalidRequestError
from kafkette.protocol.messages import share_group_describe_response as describe
from kafkette.protocol.messages.share_fetch_response import (
    AcquiredRecords as WireAcquiredRecords,
)
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from kafkette.server.share.group import HeartbeatAnswer, ShareGroup, TopicImage, check_heartbeat
from kafkette.server.share.state import Acknowledgement, AcknowledgeType, AcquiredRecords

RENEW_SINCE = 2
"""ShareFetch and ShareAcknowledge carry RENEW from version 2 (KIP-1222)."""


class AcknowledgementBatchLike(Protocol):
    """An ``AcknowledgementBatches`` entry of ShareFetch or ShareAcknowledge."""

    first_offset: int
    last_offset: int
    acknowledge_types: list[int]


def acknowledgements(
    batches: Iterable[AcknowledgementBatchLike], api_version: int
) -> list[Acknowledgement]:
    """A partition's acknowledgement batches; INVALID_REQUEST for an empty type
    list or a RENEW before version 2 (the state machine checks the rest)."""
    out = []
    for batch in batches:
        if not batch.acknowledge_types:
            raise InvalidRequestError(
                f"acknowledgement batch {batch.first_offset}-{batch.last_offset} has no types"
            )
        if api_version < RENEW_SINCE and AcknowledgeType.RENEW in batch.acknowledge_types:
            raise InvalidRequestError(f"acknowledge type RENEW needs version {RENEW_SINCE}")
        out.append(
            Acknowledgement(batch.first_offset, batch.last_offset, tuple(batch.acknowledge_types))
        )
    return out


def acquired_records(ranges: Iterable[AcquiredRecords]) -> list[WireAcquiredRecords]:
    """Acquired ranges as a ShareFetch response's ``AcquiredRecords``."""
    return [WireAcquiredRecords(r.first_offset, r.last_offset, r.delivery_count) for r in ranges]


def heartbeat_response(answer: HeartbeatAnswer) -> ShareGroupHeartbeatResponse:
    """A successful heartbeat's response."""
    assignment = None
    if answer.assignment is not None:
        assignment = Assignment(
            [TopicPartitions(topic, parts) for topic, parts in answer.assignment.items()]
        )
    return ShareGroupHeartbeatResponse(
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment,
    )


def heartbeat(
    group: ShareGroup,
    request: ShareGroupHeartbeatRequest,
    now_ms: int,
    topics: Mapping[str, TopicImage],
    *,
    client_id: str = "",
    client_host: str = "",
) -> ShareGroupHeartbeatResponse:
    """Serve a ShareGroupHeartbeat on ``group`` (the one ``request.group_id``
    names); a refusal is the response's error."""
    try:
        check_heartbeat(
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.rack_id,
            request.subscribed_topic_names,
        )
        answer = group.heartbeat(
            request.member_id,
            request.member_epoch,
            now_ms,
            topics,
            subscribed_topic_names=request.subscribed_topic_names,
            rack_id=request.rack_id,
            client_id=client_id,
            client_host=client_host,
        )
    except ApiError as exc:
        return ShareGroupHeartbeatResponse(error_code=exc.code, error_message=str(exc) or None)
    return heartbeat_response(answer)


def assignment_by_topic(response: ShareGroupHeartbeatResponse) -> dict[uuid.UUID, list[int]] | None:
    """A response's assignment as partitions by topic id (None when absent)."""
    if response.assignment is None:
        return None
    return {tp.topic_id: list(tp.partitions) for tp in response.assignment.topic_partitions}


def described_group(
    group: ShareGroup,
    topic_names: Mapping[uuid.UUID, str],
    authorized_operations: int = -2147483648,
) -> describe.DescribedGroup:
    """A ShareGroupDescribe entry for ``group`` (assignor ``simple``): its state,
    epochs and members with their current assignments, topics named by
    ``topic_names`` (a topic id it lacks is named "")."""
    members = []
    for member in group.members.values():
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in sorted(member.assignment, key=lambda tp: (str(tp[0]), tp[1])):
            by_topic.setdefault(topic_id, []).append(index)
        members.append(
            describe.Member(
                member_id=member.member_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                assignment=describe.Assignment(
                    [
                        describe.TopicPartitions(topic_id, topic_names.get(topic_id, ""), parts)
                        for topic_id, parts in by_topic.items()
                    ]
                ),
            )
        )
    return describe.DescribedGroup(
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name="simple",
        members=members,
        authorized_operations=authorized_operations,
    )
