"""Fetch (key 1): long polls, byte limits, offsets and stored batches.

Versions 4+ are served (Kafka 4's minimum). Stored batches are returned as
they are, never parsed. Limits follow Kafka: each partition gets at most its
``partition_max_bytes`` and the response at most ``max_bytes`` (capped by the
broker's ``fetch.max.bytes``), except that the first partition with data
always gets at least one whole batch, so a batch larger than the limits
still makes progress. A later partition whose first batch does not fit
returns no records.

Consumers see up to the high watermark, or with ``read_committed`` up to the
last stable offset, and then also get the aborted transactions overlapping
what they read. An offset outside ``[log start, log end]`` is
``OFFSET_OUT_OF_RANGE``.

Long poll: when fewer than ``min_bytes`` are available (and nothing is in
error), the request waits for appends (:attr:`Broker.data_changed`) until
``max_wait_ms`` has passed on the broker's clock (or in real time, should an
injected clock stand still).

Fetch sessions (KIP-227): this broker never creates one. A request with
``session_id`` 0 is a full fetch; one asking for a new session (epoch 0)
gets ``session_id`` 0 back, which tells the client that no session was made,
so it keeps sending full fetches. librdkafka, kafka-python and aiokafka are
checked against this in the conformance tests; the Java client's
FetchSessionHandler reads session id 0 the same way (a full response, no
session). A request naming a session id, which we never handed out, gets
``FETCH_SESSION_ID_NOT_FOUND``. Sessions would only save request bytes for
consumers of many partitions.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, cast

import anyio

from kafkette.acl import AclOperation, ResourceType
from kafkette.backends import Log
from kafkette.errors import (
    ApiError,
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import FetchRequest, FetchResponse
from kafkette.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kafkette.protocol.schema import RecordsData
from kafkette.server.cluster import Partition, Topic
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.fetch")

READ_COMMITTED = 1
TOPIC_IDS_VERSION = 13
CURRENT_LEADER_VERSION = 12
NODE_ENDPOINTS_VERSION = 16
EMPTY = b""
UNKNOWN_PARTITION = UnknownTopicOrPartitionError()


@handler(FetchRequest, min_version=4)
async def handle_fetch(broker: Broker, ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if request.session_id != 0:
        return FetchResponse(
            error_code=FetchSessionIdNotFoundError.code, session_id=request.session_id
        )
    max_wait = max(request.max_wait_ms, 0)
    deadline = broker.now_ms() + max_wait
    # Also bounded in real time: a broker clock that tests hold still must not park
    # consumers' fetches for ever.
    real_deadline = anyio.current_time() + max_wait / 1000.0
    while True:
        response, size, failed = read_partitions(broker, ctx, request)
        if max_wait == 0 or size >= request.min_bytes or failed or not request.topics:
            return response
        remaining_s = min(
            (deadline - broker.now_ms()) / 1000.0, real_deadline - anyio.current_time()
        )
        if remaining_s <= 0:
            return response
        await broker.data_changed.wait(remaining_s)


def read_partitions(
    broker: Broker, ctx: RequestContext, request: FetchRequest
) -> tuple[FetchResponse, int, bool]:
    """One pass over the requested partitions as the node the request reached: the
    response, its record bytes, whether to answer at once (an error, a preferred read
    replica)."""
    cluster = broker.cluster
    nodes = broker.nodes
    version = ctx.api_version
    node = ctx.node_id if nodes.multi else None  # None: this node leads every partition
    leaders: set[int] = set()  # named in NOT_LEADER_OR_FOLLOWER answers
    read_committed = request.isolation_level == READ_COMMITTED
    budget = min(request.max_bytes, broker.config.fetch_max_bytes)
    if budget <= 0:
        budget = 1  # still at least one batch, as Kafka
    total = 0
    failed = False
    by_id = version >= TOPIC_IDS_VERSION
    responses: list[FetchableTopicResponse] = []
    for wanted in request.topics:
        topic: Topic | None
        if by_id:
            topic = cluster.topics_by_id.get(wanted.topic_id)
            missing: ApiError = UnknownTopicIdError()
        else:
            topic = cluster.topics.get(wanted.topic)
            missing = UnknownTopicOrPartitionError()
        # Kafka needs READ on each topic; by name before existence (no hint of what a
        # principal may not see), by id once the id names a topic.
        name = wanted.topic if not by_id else None if topic is None else topic.name
        refused = name is not None and not ctx.allows(AclOperation.READ, ResourceType.TOPIC, name)
        partitions: list[PartitionData] = []
        for fetch in wanted.partitions:
            index = fetch.partition
            if refused:
                partitions.append(_error(index, TopicAuthorizationFailedError()))
                failed = True
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                partitions.append(_error(index, missing if topic is None else UNKNOWN_PARTITION))
                failed = True
                continue
            partition = topic.partitions[index]
            if node is not None and not nodes.serves_fetch(node, partition, version):
                leader = nodes.leader(partition)
                if leader >= 0:
                    leaders.add(leader)
                moved = _error(index, NotLeaderOrFollowerError())
                if version >= CURRENT_LEADER_VERSION:  # an older answer cannot carry it
                    moved.current_leader = LeaderIdAndEpoch(leader, partition.leader_epoch)
                partitions.append(moved)
                failed = True
                continue
            preferred = nodes.preferred_read_replica(node, partition, request.rack_id or "")
            if preferred >= 0:  # KIP-392: no records, the replica to read them from
                partitions.append(_preferred(partition, preferred))
                failed = True  # answered at once, as Kafka does
                continue
            limit = min(fetch.partition_max_bytes, budget - total)
            data = read_partition(
                partition,
                fetch.fetch_offset,
                fetch.current_leader_epoch,
                max(limit, 0),
                first=total == 0,
                read_committed=read_committed,
            )
            if data.error_code:
                failed = True
            elif data.records:
                total += len(data.records)
            partitions.append(data)
        responses.append(
            FetchableTopicResponse(
                topic=wanted.topic if not by_id else "",
                topic_id=wanted.topic_id if by_id else uuid.UUID(int=0),
                partitions=partitions,
            )
        )
    response = FetchResponse(error_code=0, session_id=0, responses=responses)
    if leaders and version >= NODE_ENDPOINTS_VERSION:
        response.node_endpoints = [
            NodeEndpoint(n, *nodes.addresses[n], None) for n in sorted(leaders)
        ]
    return response, total, failed


def read_partition(
    partition: Partition,
    offset: int,
    current_leader_epoch: int,
    limit: int,
    *,
    first: bool,
    read_committed: bool,
) -> PartitionData:
    """One partition's answer: at most ``limit`` bytes of whole batches from ``offset``
    (at least one batch when ``first``)."""
    index = partition.index
    if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
        if current_leader_epoch < partition.leader_epoch:
            return _error(index, FencedLeaderEpochError())
        return _error(index, UnknownLeaderEpochError())
    log = partition.log
    high_watermark = log.high_watermark
    stable = log.last_stable_offset
    start = log.log_start_offset
    upper = stable if read_committed else high_watermark
    records: bytes | bytearray | memoryview = EMPTY
    aborted: list[AbortedTransaction] | None = [] if read_committed else None
    try:
        if offset < start or offset > log.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{start}, {log.log_end_offset}]"
            )
        if offset < upper and (limit > 0 or first):
            found = log.read(offset, limit, upper)
            if found.size and (found.size <= limit or first):
                # The slice itself, not its bytes (see ExternalRecords): the TCP
                # listener sends a segment region with os.sendfile and the stored
                # batches of a memory log as views, without joining or copying them;
                # other transports copy it in when encoding.
                records = cast(RecordsData, found)
                if read_committed:
                    aborted = _aborted(log, offset, upper)
    except (ApiError, OSError, EOFError) as exc:
        if not isinstance(exc, ApiError):
            logger.error("reading %s-%d failed: %s", partition.topic, index, exc)
            exc = KafkaStorageError(str(exc))
        return PartitionData(
            partition_index=index,
            error_code=exc.code,
            high_watermark=high_watermark,
            last_stable_offset=stable,
            log_start_offset=start,
            aborted_transactions=None,
            records=EMPTY,
        )
    return PartitionData(
        partition_index=index,
        error_code=0,
        high_watermark=high_watermark,
        last_stable_offset=stable,
        log_start_offset=start,
        aborted_transactions=aborted,
        records=records,
    )


def _aborted(log: Log, offset: int, upper: int) -> list[AbortedTransaction]:
    return [
        AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
        for txn in log.aborted_transactions(offset, upper)
    ]


def _preferred(partition: Partition, replica: int) -> PartitionData:
    """The leader's answer naming the replica to fetch from instead, as Kafka's: the
    offsets, no records."""
    log = partition.log
    return PartitionData(
        partition_index=partition.index,
        error_code=0,
        high_watermark=log.high_watermark,
        last_stable_offset=log.last_stable_offset,
        log_start_offset=log.log_start_offset,
        aborted_transactions=None,
        preferred_read_replica=replica,
        records=EMPTY,
    )


def _error(index: int, error: ApiError) -> PartitionData:
    return PartitionData(
        partition_index=index,
        error_code=error.code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        records=EMPTY,
    )
