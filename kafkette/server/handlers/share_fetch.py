"""ShareFetch (78): records acquired from share partitions, and acknowledgements (KIP-932).

One request, in this order, as Kafka's ``KafkaApis.handleShareFetchRequest``:

1. READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request), then the
   share session's epoch (:class:`~kafkette.server.share.sessions.ShareSessions`: 0 opens
   it, -1 closes it, else the next epoch; a refusal is the response's error).
2. The acknowledgements piggybacked on the request, partition by partition (each
   partition's ``acknowledge_error_code``).
3. Epoch -1: the session ends and the member's acquired records go back; nothing is
   fetched. Otherwise every partition of the session is read from its log as Fetch
   reads it (whole stored batches, up to the high watermark, ``max_bytes`` over the
   response, at least one batch) from the share partition's next acquirable offset,
   in chunks of at most 1 MiB, and the records in it are acquired for the member,
   ``max_records`` in all (500 when the request gives 0), rounded up to the end of a
   stored batch unless the request asks for the record-limit acquire mode. Only the
   stored batches holding acquired records are returned; the client keeps the records
   that ``acquired_records`` names.
4. Long poll: with nothing acquired (and no error nor acknowledgement to answer), the
   request waits for appends or records given back until ``max_wait_ms`` passes on the
   broker's clock (or in real time, as Fetch), then answers what it has.

Control batches (transaction markers) are archived as they are reached, never
delivered. A group with ``share.isolation.level`` read_committed reads up to the last
stable offset, and the records of aborted transactions are archived as they are
reached, never delivered (Kafka's share partition does the same).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, cast

import anyio

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    ApiError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KafkaStorageError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages.share_fetch_request import ShareFetchRequest
from kafkette.protocol.messages.share_fetch_response import (
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from kafkette.protocol.records.batch_header import RECORD_BATCH_OVERHEAD, BatchHeader
from kafkette.protocol.schema import RecordsData
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.share import wire
from kafkette.server.share.partition import SharePartition
from kafkette.server.share.sessions import FINAL_EPOCH, connection_key
from kafkette.server.share.state import Acknowledgement, AcquiredRecords

if TYPE_CHECKING:
    from kafkette.backends.log import Log
    from kafkette.backends.types import AbortedTxn
    from kafkette.server.broker import Broker

READ_CHUNK = 1 << 20
"""The most bytes read from a log at a time: a fetch acquires at most ``max_records``,
so reading up to its ``max_bytes`` (50 MiB from librdkafka) would mostly be thrown away."""

RECORD_LIMIT = 1
"""ShareAcquireMode record-limit (v2): ``max_records`` is a hard limit."""

DEFAULT_MAX_RECORDS = 500
"""Records acquired per request when it asks for 0 (Kafka's ``max.poll.records``)."""

EMPTY = b""

TopicPartition = tuple[uuid.UUID, int]


@handler(ShareFetchRequest)
async def handle_share_fetch(
    broker: Broker, ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse:
    coordinator = broker.share_groups
    group_id, member_id = request.group_id or "", request.member_id or ""
    lock_ms = coordinator.lock_duration_ms(group_id)
    if not ctx.allows(AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareFetchResponse(error_code=GroupAuthorizationFailedError.code)
    wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forget = [(t.topic_id, index) for t in request.forgotten_topics_data for index in t.partitions]
    acks: dict[TopicPartition, list[Acknowledgement]] = {}
    try:
        if not group_id or not member_id:
            raise InvalidRequestError("ShareFetch needs a group id and a member id.")
        for topic in request.topics:
            for part in topic.partitions:
                if part.acknowledgement_batches:
                    acks[(topic.topic_id, part.partition_index)] = wire.acknowledgements(
                        part.acknowledgement_batches, ctx.api_version
                    )
        session = coordinator.sessions.fetch(
            group_id,
            member_id,
            request.share_session_epoch,
            fetch=wanted,
            forget=forget,
            has_acknowledgements=bool(acks),
            connection_id=connection_key.get() or ctx.client_host,
        )
    except ApiError as error:
        return ShareFetchResponse(error_code=error.code, error_message=str(error) or None)
    answers: dict[TopicPartition, PartitionData] = {}
    for tp, batches in acks.items():
        answers[tp] = PartitionData(
            partition_index=tp[1],
            records=EMPTY,
            acknowledge_error_code=apply_acknowledgements(
                broker, ctx, group_id, member_id, tp, batches
            ),
        )
    if request.share_session_epoch == FINAL_EPOCH:
        coordinator.close_session(group_id, member_id)
        return _response(answers, lock_ms)
    reading = list(session.partitions)
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    record_limit = ctx.api_version >= 2 and request.share_acquire_mode == RECORD_LIMIT
    max_wait = max(request.max_wait_ms, 0)
    deadline = broker.now_ms() + max_wait
    real_deadline = anyio.current_time() + max_wait / 1000.0
    while True:
        size, failed = read_partitions(
            broker,
            ctx,
            group_id,
            member_id,
            reading,
            request.max_bytes,
            max_records,
            answers,
            record_limit=record_limit,
        )
        if max_wait == 0 or failed or acks or size >= max(request.min_bytes, 1):
            break
        remaining_s = min(
            (deadline - broker.now_ms()) / 1000.0, real_deadline - anyio.current_time()
        )
        if remaining_s <= 0 or coordinator.sessions.get(group_id, member_id) is not session:
            break
        await broker.data_changed.wait(remaining_s)
    for tp in wanted:  # a full request answers for every partition it names
        answers.setdefault(tp, _empty(tp[1]))
    return _response(answers, lock_ms)


def apply_acknowledgements(
    broker: Broker,
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    tp: TopicPartition,
    batches: list[Acknowledgement],
) -> int:
    """Apply a member's acknowledgements to one partition (READ on its topic); the
    error code, 0 when done."""
    topic = broker.cluster.topics_by_id.get(tp[0])
    if topic is None:
        return UnknownTopicIdError.code
    if not 0 <= tp[1] < len(topic.partitions):
        return UnknownTopicOrPartitionError.code
    if not ctx.allows(AclOperation.READ, ResourceType.TOPIC, topic.name):
        return TopicAuthorizationFailedError.code
    try:
        broker.share_groups.acknowledge(group_id, member_id, tp[0], tp[1], batches)
    except ApiError as error:
        return error.code
    return 0


def read_partitions(
    broker: Broker,
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    partitions: Iterable[TopicPartition],
    max_bytes: int,
    max_records: int,
    answers: dict[TopicPartition, PartitionData],
    *,
    record_limit: bool = False,
) -> tuple[int, bool]:
    """One pass over the session's partitions, acquiring what they have into
    ``answers``: the record bytes returned and whether a partition failed."""
    coordinator = broker.share_groups
    budget = max(min(max_bytes, broker.config.fetch_max_bytes), 1)
    total = 0
    failed = False
    for tp in partitions:
        if max_records <= 0 or total >= budget:
            break
        previous = answers.get(tp)
        if previous is not None and previous.acquired_records:
            continue
        answer = previous or _empty(tp[1])
        topic = broker.cluster.topics_by_id.get(tp[0])
        error: ApiError | None = None
        if topic is None:
            error = UnknownTopicIdError()
        elif not 0 <= tp[1] < len(topic.partitions):
            error = UnknownTopicOrPartitionError()
        elif not ctx.allows(AclOperation.READ, ResourceType.TOPIC, topic.name):
            error = TopicAuthorizationFailedError()
        if error is not None or topic is None:
            answer.error_code = error.code if error is not None else 0
            answers[tp] = answer
            failed = True
            continue
        log = topic.partitions[tp[1]].log
        read_committed = coordinator.read_committed(group_id)
        upper = log.last_stable_offset if read_committed else log.high_watermark
        share = coordinator.share_partition(
            group_id,
            tp[0],
            tp[1],
            log.log_start_offset,
            upper,
            offset_for_timestamp=partial(_offset_for_timestamp, log),
        )
        if not share.has_acquirable(upper):
            continue
        try:
            data, acquired = _acquire_from_log(
                broker,
                share,
                group_id,
                member_id,
                log,
                upper,
                budget - total,
                max_records,
                record_limit=record_limit,
                read_committed=read_committed,
            )
        except (ApiError, OSError, EOFError) as exc:
            if not isinstance(exc, ApiError):
                exc = KafkaStorageError(str(exc))
            answer.error_code = exc.code
            answers[tp] = answer
            failed = True
            continue
        if not acquired:
            continue
        max_records -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
        total += len(data)
        answer.records = cast(RecordsData, data)
        answer.acquired_records = wire.acquired_records(acquired)
        answers[tp] = answer
    return total, failed


def _acquire_from_log(
    broker: Broker,
    share: SharePartition,
    group_id: str,
    member_id: str,
    log: Log,
    upper: int,
    budget: int,
    max_records: int,
    *,
    record_limit: bool,
    read_committed: bool = False,
) -> tuple[bytes | memoryview, list[AcquiredRecords]]:
    """Read the log from the share partition's next acquirable offset in chunks of at
    most ``READ_CHUNK`` bytes, acquiring what each chunk holds, until ``max_records``
    are acquired, ``budget`` bytes are kept or a chunk gives nothing more. Of each
    chunk only the stored batches from the first to the last acquired record are kept
    (as Kafka slices a share fetch's records to its acquired batches).

    ``max_records`` is exact with ``record_limit`` (ShareAcquireMode 1, record-limit);
    else (0, batch-optimized: v1's only mode) the stored batch holding the last record
    is acquired whole, so more may be acquired, as the field's definition allows
    ("This limit can be exceeded for alignment of batch boundaries")."""
    parts: list[bytes | memoryview] = []
    acquired: list[AcquiredRecords] = []
    kept = 0
    offset = max(share.next_fetch_offset(), log.log_start_offset)
    while offset < upper and max_records > 0 and kept < budget:
        chunk = log.read(offset, max(min(budget - kept, READ_CHUNK), 1), upper)
        if chunk is None or not chunk:
            break
        data = chunk.to_bytes()
        batches, control, transactional = _batches(data)
        if not batches:
            break
        first, last = batches[0][0], batches[-1][1]
        if read_committed and transactional:
            control += _aborted(log.aborted_transactions(first, last + 1), transactional)
        # Control batches are archived as they are reached, never delivered.
        got = broker.share_groups.acquire(
            share,
            group_id,
            member_id,
            first,
            last,
            max_records=max_records,
            fetch_offset=offset,
            aborted=control,
        )
        if not got:
            break
        low, high = got[0].first_offset, got[-1].last_offset
        batch_end = next(last_of for _, last_of, _, _ in batches if last_of >= high)
        if not record_limit and batch_end > high:
            # Batch-optimized: the rest of the stored batch too, past max_records.
            got += broker.share_groups.acquire(
                share,
                group_id,
                member_id,
                high + 1,
                batch_end,
                max_records=batch_end - high,
                fetch_offset=high + 1,
                aborted=control,
            )
            high = got[-1].last_offset
        begin = next(start for _, last_of, start, _ in batches if last_of >= low)
        end = next(stop for base, last_of, _, stop in batches if last_of >= high)
        parts.append(memoryview(data)[begin:end] if (begin, end) != (0, len(data)) else data)
        kept += end - begin
        acquired += got
        max_records -= sum(r.last_offset - r.first_offset + 1 for r in got)
        if high < last:  # stopped inside the chunk: no more to take now
            break
        offset = last + 1
    return b"".join(parts) if len(parts) != 1 else parts[0], _joined(acquired)


def _joined(ranges: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Neighbouring ranges with one delivery count as one."""
    out: list[AcquiredRecords] = []
    for r in ranges:
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset + 1 == r.first_offset
            and last.delivery_count == r.delivery_count
        ):
            out[-1] = AcquiredRecords(last.first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out


def _empty(index: int) -> PartitionData:
    return PartitionData(partition_index=index, records=EMPTY)


def _batches(
    data: bytes,
) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The whole batches in ``data`` as (base offset, last offset, start, end
    position), the offset ranges of its control batches (transaction markers: no
    record to deliver), and its transactional data batches as (producer id, base
    offset, last offset)."""
    batches: list[tuple[int, int, int, int]] = []
    control: list[tuple[int, int]] = []
    transactional: list[tuple[int, int, int]] = []
    pos = 0
    while pos + RECORD_BATCH_OVERHEAD <= len(data):
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        batches.append((header.base_offset, header.last_offset, pos, pos + header.size))
        if header.is_control:
            control.append((header.base_offset, header.last_offset))
        elif header.is_transactional:
            transactional.append((header.producer_id, header.base_offset, header.last_offset))
        pos += header.size
    return batches, control, transactional


def _aborted(
    aborted: list[AbortedTxn], transactional: list[tuple[int, int, int]]
) -> list[tuple[int, int]]:
    """The offset ranges of the transactional batches that belong to an aborted
    transaction (its producer, from its first offset to its abort marker): under
    read_committed they are archived, never delivered, as Kafka's share partition
    does with ``filterAbortedTransactionalAcquiredRecords``."""
    return [
        (base, last)
        for producer_id, base, last in transactional
        if any(
            t.producer_id == producer_id and t.first_offset <= base <= t.last_offset
            for t in aborted
        )
    ]


def _offset_for_timestamp(log: Log, timestamp: int) -> int | None:
    found = log.offset_for_timestamp(timestamp)
    return None if found is None else found.offset


def _response(answers: dict[TopicPartition, PartitionData], lock_ms: int) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    for (topic_id, _), answer in answers.items():
        by_topic.setdefault(topic_id, []).append(answer)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(t, parts) for t, parts in by_topic.items()],
    )
