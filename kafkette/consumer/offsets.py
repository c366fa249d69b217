"""Looking offsets up with ListOffsets: earliest, latest (or LSO), by timestamp.

Requests go to each partition's leader, one request per leader, all at once.
Partitions whose leader moved or is unknown are retried after a metadata
refresh, with backoff, until the deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio
import attrs

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.errors import (
    ApiError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RetriableError,
    make_error,
)
from kafkette.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.structs import TopicPartition

logger = logging.getLogger("kafkette.consumer")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


@attrs.frozen
class OffsetAndTimestamp:
    """The offset found for a timestamp, with the timestamp of that record."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


async def list_offsets(
    client: KafkaClient,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: int,
    timeout_ms: float,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """The offset for each partition's timestamp spec (-2 earliest, -1 latest, or a time).

    A partition with no record at or after the timestamp maps to None.
    Raises KafkaTimeoutError when some partition cannot be answered in time,
    and the partition's ApiError for a non-retriable error.
    """
    deadline = client.clock() + timeout_ms
    remaining = dict(specs)
    found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    attempt = 0
    last_error: BaseException | None = None
    while remaining:
        client.metadata.wanted_topics.update(tp.topic for tp in remaining)
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        try:
            if client.metadata.needs_update(client.clock()) or any(
                client.metadata.snapshot.leader_for(tp.topic, tp.partition) is None
                for tp in remaining
            ):
                await client.refresh_metadata(
                    client.metadata.wanted_topics,
                    timeout_ms=max(deadline - client.clock(), 1),
                )
            for tp, spec in remaining.items():
                leader = client.metadata.snapshot.leader_for(tp.topic, tp.partition)
                if leader is None:
                    last_error = make_error(3, f"no leader known for {tp}")
                    continue
                by_leader.setdefault(leader, {})[tp] = spec
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            last_error = exc
        retry: list[BaseException] = []

        async def ask(
            node: int, group: dict[TopicPartition, int], retry: list[BaseException]
        ) -> None:
            try:
                answers = await _ask_leader(client, node, group, isolation_level)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                client.metadata.request_update()
                retry.append(exc)
                return
            for tp, answer in answers.items():
                if isinstance(answer, BaseException):
                    if isinstance(answer, InvalidMetadataError):
                        client.metadata.request_update()
                    retry.append(answer)
                    continue
                found[tp] = answer
                remaining.pop(tp, None)

        async with anyio.create_task_group() as tg:
            for node, group in by_leader.items():
                tg.start_soon(ask, node, group, retry)
        if not remaining:
            break
        if retry:
            last_error = retry[-1]
        wait = backoff_ms(
            attempt, client.config.retry_backoff_ms, client.config.retry_backoff_max_ms
        )
        attempt += 1
        if client.clock() + wait >= deadline:
            names = ", ".join(str(tp) for tp in sorted(remaining))
            raise KafkaTimeoutError(
                f"could not list offsets of {names} within {timeout_ms:.0f} ms: {last_error}"
            ) from last_error
        await anyio.sleep(wait / 1000)
    return found


async def _ask_leader(
    client: KafkaClient, node: int, group: dict[TopicPartition, int], isolation_level: int
) -> dict[TopicPartition, OffsetAndTimestamp | KafkaError | None]:
    connection = await client.connection(node)
    version = connection.version_for(ListOffsetsRequest)
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp, spec in group.items():
        topics.setdefault(tp.topic, []).append(
            ListOffsetsPartition(partition_index=tp.partition, timestamp=spec, max_num_offsets=1)
        )
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()],
    )
    response = await connection.request(request, version=version)
    assert isinstance(response, ListOffsetsResponse)
    answers: dict[TopicPartition, OffsetAndTimestamp | KafkaError | None] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp not in group:
                continue
            if p.error_code != 0:
                error: ApiError = make_error(p.error_code, f"listing offsets of {tp}")
                if not isinstance(error, RetriableError):
                    raise error
                answers[tp] = error
                continue
            if version == 0:
                offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                timestamp = -1
            else:
                offset, timestamp = p.offset, p.timestamp
            if offset < 0:
                answers[tp] = None
            else:
                epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                answers[tp] = OffsetAndTimestamp(offset, timestamp, epoch)
    for tp in group:
        if tp not in answers:
            logger.debug("ListOffsets response from node %d left out %s", node, tp)
    return answers
