"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
(92): a share group's start offsets (KIP-932), as Kafka's ``KafkaApis`` and group
coordinator serve them.

- Describe needs DESCRIBE on the group; a topic the principal may not describe gets
  TOPIC_AUTHORIZATION_FAILED per partition (left out when every topic is asked for).
  A partition with no written state, of a missing topic or of an unknown group, has
  start offset -1: absence of data, not an error. Version 1 adds the lag: the records
  from the start offset to the high watermark that are not yet acknowledged or archived.
- Alter needs READ on the group and on each topic, and an Empty group
  (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); each partition starts afresh at its offset
  (a new ShareSnapshot in ``__share_group_state``, so a restart keeps it).
- Delete needs DELETE on the group and READ on each topic, and an Empty group; a topic
  with no state in the group gets UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    GroupAuthorizationFailedError,
    InvalidGroupIdError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
)
from kafkette.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from kafkette.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
)
from kafkette.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kafkette.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kafkette.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.share.state import RecordState

if TYPE_CHECKING:
    from kafkette.server.broker import Broker
    from kafkette.server.cluster import Topic

UNINITIALIZED = -1
"""Kafka's ``PartitionFactory.UNINITIALIZED_START_OFFSET``."""
_ZERO_UUID = uuid.UUID(int=0)
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _topic(broker: Broker, name: str) -> Topic | None:
    topic = broker.cluster.topics.get(name)
    return None if topic is None or topic.is_internal else topic


# ---- describe


@handler(DescribeShareGroupOffsetsRequest)
async def handle_describe_share_group_offsets(
    broker: Broker, ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(
        groups=[
            _describe_group(broker, ctx, group, lag=ctx.api_version >= 1)
            for group in request.groups
        ]
    )


def _describe_group(
    broker: Broker, ctx: RequestContext, wanted: DescribeShareGroupOffsetsRequestGroup, *, lag: bool
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = wanted.group_id
    if not ctx.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return DescribeShareGroupOffsetsResponseGroup(
            group_id=group_id, error_code=GroupAuthorizationFailedError.code
        )
    topics: list[DescribeShareGroupOffsetsResponseTopic] = []
    if wanted.topics is None:
        names = {t.topic_id: name for name, t in broker.cluster.topics.items()}
        for topic_id, partitions in broker.share_groups.initialized(group_id).items():
            name = names.get(topic_id)
            if name is None or not ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                continue
            topics.append(_described_topic(broker, group_id, name, partitions, lag=lag))
        return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics)
    for asked in wanted.topics:
        if not ctx.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, asked.topic_name):
            error = TopicAuthorizationFailedError
            unset = [
                DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index,
                    start_offset=UNINITIALIZED,
                    error_code=error.code,
                    error_message=error.description,
                )
                for index in asked.partitions
            ]
            topics.append(
                DescribeShareGroupOffsetsResponseTopic(asked.topic_name, _ZERO_UUID, unset)
            )
        elif _topic(broker, asked.topic_name) is None:
            unset = [
                DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=UNINITIALIZED
                )
                for index in asked.partitions
            ]
            topics.append(
                DescribeShareGroupOffsetsResponseTopic(asked.topic_name, _ZERO_UUID, unset)
            )
        else:
            topics.append(
                _described_topic(broker, group_id, asked.topic_name, asked.partitions, lag=lag)
            )
    return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics)


def _described_topic(
    broker: Broker, group_id: str, name: str, partitions: list[int], *, lag: bool
) -> DescribeShareGroupOffsetsResponseTopic:
    topic = broker.cluster.topics[name]
    described = []
    for index in partitions:
        state = broker.share_groups.written_state(group_id, topic.topic_id, index)
        if state is None or not 0 <= index < len(topic.partitions):
            described.append(
                DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=UNINITIALIZED, leader_epoch=-1
                )
            )
            continue
        end = topic.partitions[index].log.high_watermark
        done = sum(
            min(b.last_offset, end - 1) - max(b.first_offset, state.start_offset) + 1
            for b in state.batches
            if b.state in _DONE and b.first_offset < end and b.last_offset >= state.start_offset
        )
        described.append(
            DescribeShareGroupOffsetsResponsePartition(
                partition_index=index,
                start_offset=state.start_offset,
                leader_epoch=state.leader_epoch,
                lag=max(end - state.start_offset - done, 0) if lag else -1,
            )
        )
    return DescribeShareGroupOffsetsResponseTopic(name, topic.topic_id, described)


# ---- alter


@handler(AlterShareGroupOffsetsRequest)
async def handle_alter_share_group_offsets(
    broker: Broker, ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id
    if not ctx.allows(AclOperation.READ, ResourceType.GROUP, group_id):
        return _alter_error(GroupAuthorizationFailedError())
    if not group_id:
        return _alter_error(InvalidGroupIdError())
    try:
        broker.share_groups.empty_group(group_id)
    except ApiError as exc:
        return _alter_error(exc)
    answered: list[AlterShareGroupOffsetsResponseTopic] = []
    for asked in request.topics:
        topic = _topic(broker, asked.topic_name)
        refused: type[ApiError] | None = None
        if not ctx.allows(AclOperation.READ, ResourceType.TOPIC, asked.topic_name):
            refused = TopicAuthorizationFailedError
        elif topic is None:
            refused = UnknownTopicOrPartitionError
        partitions = []
        for wanted in asked.partitions:
            index = wanted.partition_index
            error = refused
            if error is None and topic is not None and not 0 <= index < len(topic.partitions):
                error = UnknownTopicOrPartitionError
            if error is None and topic is not None:
                broker.share_groups.alter_start_offset(
                    group_id, topic.topic_id, index, wanted.start_offset
                )
            partitions.append(
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=index,
                    error_code=0 if error is None else error.code,
                    error_message=None if error is None else error.description,
                )
            )
        topic_id = _ZERO_UUID if topic is None else topic.topic_id
        answered.append(AlterShareGroupOffsetsResponseTopic(asked.topic_name, topic_id, partitions))
    return AlterShareGroupOffsetsResponse(responses=answered)


def _alter_error(error: ApiError) -> AlterShareGroupOffsetsResponse:
    message = error.detail if error.detail is not None else error.description
    return AlterShareGroupOffsetsResponse(error_code=error.code, error_message=message)


# ---- delete


@handler(DeleteShareGroupOffsetsRequest)
async def handle_delete_share_group_offsets(
    broker: Broker, ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id
    if not ctx.allows(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _delete_error(GroupAuthorizationFailedError())
    if not group_id:
        return _delete_error(InvalidGroupIdError())
    try:
        broker.share_groups.empty_group(group_id)
    except ApiError as exc:
        return _delete_error(exc)
    answered: list[DeleteShareGroupOffsetsResponseTopic] = []
    for asked in request.topics:
        name = asked.topic_name
        topic = _topic(broker, name)
        if not ctx.allows(AclOperation.READ, ResourceType.TOPIC, name):
            error: type[ApiError] = TopicAuthorizationFailedError
            answered.append(_deleted(name, _ZERO_UUID, error, error.description))
        elif topic is None:
            error = UnknownTopicOrPartitionError
            answered.append(_deleted(name, _ZERO_UUID, error, error.description))
        elif not broker.share_groups.delete_offsets(group_id, topic.topic_id):
            error = UnknownTopicOrPartitionError
            message = "There is no offset information to delete."
            answered.append(_deleted(name, _ZERO_UUID, error, message))
        else:
            answered.append(DeleteShareGroupOffsetsResponseTopic(name, topic.topic_id))
    return DeleteShareGroupOffsetsResponse(responses=answered)


def _deleted(
    name: str, topic_id: uuid.UUID, error: type[ApiError], message: str
) -> DeleteShareGroupOffsetsResponseTopic:
    return DeleteShareGroupOffsetsResponseTopic(name, topic_id, error.code, message)


def _delete_error(error: ApiError) -> DeleteShareGroupOffsetsResponse:
    message = error.detail if error.detail is not None else error.description
    return DeleteShareGroupOffsetsResponse(error_code=error.code, error_message=message)
