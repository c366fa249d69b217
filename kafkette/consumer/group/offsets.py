"""OffsetCommit and OffsetFetch: building the requests and reading the answers.

The request builders and answer readers are pure; :func:`commit_offsets` and
:func:`fetch_committed` send them to the group coordinator, rediscovering it
and backing off on retriable errors until the deadline, as Java's
ConsumerCoordinator does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.errors import (
    ApiError,
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RetriableError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
    make_error,
)
from kafkette.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic
from kafkette.structs import OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.consumer.group")

OFFSET_COMMIT_MAX_VERSION = 8
"""v9+ carry KIP-848 member epochs; the classic protocol needs no more than v8."""
MEMBER_EPOCH_COMMIT_VERSION = 9
"""OffsetCommit for members of the consumer protocol (KIP-848): the broker refuses older."""
OFFSET_FETCH_MAX_VERSION = 7
"""v8+ batch several groups; one group is all a consumer asks about."""

_REDISCOVER = (NotCoordinatorError, CoordinatorNotAvailableError)
_FENCED = (
    UnknownMemberIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    StaleMemberEpochError,
)


def commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for tp, om in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def commit_errors(response: OffsetCommitResponse) -> dict[TopicPartition, ApiError]:
    """The partitions the coordinator refused, with its error."""
    return {
        TopicPartition(topic.name, p.partition_index): make_error(
            p.error_code, f"{topic.name}-{p.partition_index}"
        )
        for topic in response.topics
        for p in topic.partitions
        if p.error_code != 0
    }


def fetch_request(
    group_id: str, partitions: list[TopicPartition], *, require_stable: bool
) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return OffsetFetchRequest(
        group_id=group_id,
        topics=[
            OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
        ],
        require_stable=require_stable,
    )


def fetch_answer(
    response: OffsetFetchResponse,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Committed offsets by partition (None: nothing committed); raises partition errors."""
    if response.error_code != 0:
        raise make_error(response.error_code, "OffsetFetch")
    result: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if p.error_code != 0:
                raise make_error(p.error_code, str(tp))
            if p.committed_offset < 0:
                result[tp] = None
            else:
                epoch = p.committed_leader_epoch
                result[tp] = OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", None if epoch < 0 else epoch
                )
    return result


async def _retry_wait(
    client: KafkaClient, attempt: int, deadline_ms: float, exc: Exception
) -> None:
    wait = backoff_ms(attempt, client.config.retry_backoff_ms, client.config.retry_backoff_max_ms)
    if client.clock() + wait >= deadline_ms:
        raise KafkaTimeoutError(f"group request did not succeed in time: {exc}") from exc
    await anyio.sleep(wait / 1000)


async def commit_offsets(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    deadline_ms: float,
    max_version: int = OFFSET_COMMIT_MAX_VERSION,
) -> None:
    """Commit ``offsets``; raises :class:`CommitFailedError` when the group moved on.
    ``generation_id`` is the member epoch under the consumer protocol, which commits with
    ``max_version`` 9 (:data:`MEMBER_EPOCH_COMMIT_VERSION`)."""
    if not offsets:
        return
    request = commit_request(
        group_id,
        offsets,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
    )
    attempt = 0
    while True:
        try:
            node = await client.coordinator(group_id)
            connection = await client.coordinator_connection(node)
            version = connection.version_for(OffsetCommitRequest, max_version)
            request.group_instance_id = group_instance_id if version >= 7 else None
            response = await client.send_to_coordinator(group_id, request, version=version)
            assert isinstance(response, OffsetCommitResponse)
            errors = commit_errors(response)
            if not errors:
                return
            error = next(iter(errors.values()))
            if isinstance(error, _REDISCOVER):
                client.invalidate_coordinator(group_id)
            if isinstance(error, _FENCED):
                raise CommitFailedError(f"{error.name}: the group rebalanced") from error
            if not isinstance(error, RetriableError):
                raise error
            await _retry_wait(client, attempt, deadline_ms, error)
        except (KafkaConnectionError, KafkaTimeoutError, CoordinatorLoadInProgressError) as exc:
            if client.clock() >= deadline_ms:
                raise
            await _retry_wait(client, attempt, deadline_ms, exc)
        attempt += 1


async def fetch_committed(
    client: KafkaClient,
    group_id: str,
    partitions: list[TopicPartition],
    *,
    deadline_ms: float,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets for ``partitions`` (None where nothing is committed)."""
    if not partitions:
        return {}
    attempt = 0
    while True:
        try:
            node = await client.coordinator(group_id)
            connection = await client.coordinator_connection(node)
            version = connection.version_for(OffsetFetchRequest, OFFSET_FETCH_MAX_VERSION)
            request = fetch_request(group_id, partitions, require_stable=version >= 7)
            response = await client.send_to_coordinator(group_id, request, version=version)
            assert isinstance(response, OffsetFetchResponse)
            found = fetch_answer(response)
            return {tp: found.get(tp) for tp in partitions}
        except _REDISCOVER as exc:
            client.invalidate_coordinator(group_id)
            await _retry_wait(client, attempt, deadline_ms, exc)
        except (
            KafkaConnectionError,
            KafkaTimeoutError,
            CoordinatorLoadInProgressError,
            UnstableOffsetCommitError,
        ) as exc:
            if client.clock() >= deadline_ms:
                raise
            await _retry_wait(client, attempt, deadline_ms, exc)
        attempt += 1
