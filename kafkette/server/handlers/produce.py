"""Produce (key 0): validation, idempotence, acks 0/1/-1.

Versions 3+ are served: Kafka 4 dropped v0-2, which carry magic 0/1 message
sets. Each partition's data must be exactly one magic 2 batch (as Kafka
requires from v3 on). Checks, in Kafka's order, each failure answered with
that partition's error code and nothing appended:

- the batch's framing and CRC (``CORRUPT_MESSAGE``), magic 2, no control
  batch from a client, a record count matching the offset delta, a sequence
  when there is a producer id (``INVALID_RECORD``); zstd only from v7
  (``UNSUPPORTED_COMPRESSION_TYPE``);
- its size against the topic's ``max.message.bytes`` (``MESSAGE_TOO_LARGE``);
- record timestamps against ``message.timestamp.before.max.ms`` /
  ``after.max.ms`` for CreateTime topics (``INVALID_TIMESTAMP``), and keys on
  compacted topics (``INVALID_RECORD``), each with the offending records'
  indexes in ``record_errors``;
- idempotence (:mod:`kafkette.server.sequences`): a duplicate of one of the
  producer's last five batches is acknowledged with its original offsets.

A topic whose ``compression.type`` names a codec (not ``producer``) gets
batches in another codec re-encoded with it, as in Kafka; otherwise the
batch is stored as received.

Produce never creates topics (as in Kafka: clients ask Metadata first, which
does). With a single replica, ``acks=-1`` is the same as ``acks=1`` once the
batch is appended; ``acks=0`` gets no response at all, and when a partition
fails the connection is closed (``CloseConnection``), as Kafka does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from kafkette.acl import AclOperation, ResourceType
from kafkette.backends.config import LogConfig
from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.speedups import check_batch as _check_batch
from kafkette.errors import (
    ApiError,
    CorruptMessageError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTopicError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import ProduceRequest, ProduceResponse
from kafkette.protocol.messages.produce_request import PartitionProduceData
from kafkette.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.records import NO_COMPRESSION, RecordBatch, RecordBatchBuilder, codec_id
from kafkette.protocol.records.batch_header import LOG_OVERHEAD, batch_crc
from kafkette.server.cluster import Partition
from kafkette.server.dispatch import CloseConnection, RequestContext, handler
from kafkette.server.nodes import NodeTable
from kafkette.server.sequences import Duplicate, check_sequence
from kafkette.server.steps import STEP_BUDGET_S

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.produce")

ZSTD = 4
MIN_ZSTD_VERSION = 7
NODE_ENDPOINTS_VERSION = 10
LONG_MAX = 2**63 - 1
MAX_DECOMPRESSED = 1 << 30
_new_tuple = tuple.__new__
_NO_LEADER = LeaderIdAndEpoch()
"""The default current leader (-1, -1) of every successful answer, shared: answers are
encoded, never changed in place (a NOT_LEADER_OR_FOLLOWER answer gets a new one)."""


class RecordErrors(Exception):
    """An error code with per-record errors (Kafka's RecordValidationException)."""

    def __init__(self, error: ApiError, message: str, errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.errors = errors


ADMIN_CLIENT_ID = "__admin_client"
"""The client id Kafka lets append to internal topics (its admin tools)."""


_TURN_CHECK = 64
"""Partitions handled between two looks at the clock."""


@handler(ProduceRequest, min_version=3)
async def handle_produce(
    broker: Broker, ctx: RequestContext, request: ProduceRequest
) -> ProduceResponse | None:
    version = ctx.header.request_api_version
    acks = request.acks
    valid_acks = acks in (0, 1, -1)
    now = broker.now_ms  # read only by the record-level checks, which few topics ask for
    appended = False
    responses: list[TopicProduceResponse] = []
    topics = broker.cluster.topics
    nodes = broker.nodes
    node = ctx.node_id if nodes.multi else None  # None: this node leads every partition
    leaders: set[int] = set()  # named in NOT_LEADER_OR_FOLLOWER answers
    txn_refused = not _transactional_write_allowed(ctx, request)
    # A request for thousands of partitions (a producer's first round over a wide topic)
    # lets other connections have the loop every STEP_BUDGET_S (checked every
    # _TURN_CHECK partitions): one request must not hold it for 100 ms and more.
    handled = 0
    turn_ends = time.monotonic() + STEP_BUDGET_S
    for topic_data in request.topic_data:
        # Authorization before existence, as Kafka: no hint of what a principal may not see.
        allowed = ctx.authorizer is None or ctx.allows(
            AclOperation.WRITE, ResourceType.TOPIC, topic_data.name
        )
        topic = topics.get(topic_data.name)
        partitions: list[Partition] = [] if topic is None else topic.partitions
        # Only the coordinators write to internal topics (as Kafka, which lets its admin
        # tools too).
        refused = topic is not None and topic.is_internal and ctx.client_id != ADMIN_CLIENT_ID
        results: list[PartitionProduceResponse] = []
        for data in topic_data.partition_data:
            handled += 1
            if not handled % _TURN_CHECK and time.monotonic() >= turn_ends:
                if appended:
                    broker.data_changed.notify()
                await anyio.sleep(0)
                turn_ends = time.monotonic() + STEP_BUDGET_S
            index = data.index
            if not valid_acks:
                results.append(_error(index, InvalidRequiredAcksError()))
                continue
            if txn_refused:
                results.append(_error(index, TransactionalIdAuthorizationFailedError()))
                continue
            if not allowed:
                results.append(_error(index, TopicAuthorizationFailedError()))
                continue
            if topic is None or not 0 <= index < len(partitions):
                results.append(_error(index, UnknownTopicOrPartitionError()))
                continue
            if refused:
                error = InvalidTopicError(f"Cannot append to internal topic {topic.name}")
                results.append(_error(index, error))
                continue
            if node is not None and not nodes.leads(node, partitions[index]):
                results.append(_not_leader(index, nodes, partitions[index], leaders, version))
                continue
            if acks == -1 and node is not None:  # min.insync.replicas against the ISR
                short = nodes.not_enough_replicas(partitions[index])
                if short is not None:
                    results.append(_error(index, short))
                    continue
            result = produce_to(partitions[index], data, version, now)
            if result.error_code == 0:
                appended = True
            results.append(result)
        responses.append(TopicProduceResponse(topic_data.name, results))
    if appended:
        changed = broker.data_changed
        if changed.waiting:  # (notify does nothing without a waiter)
            changed.notify()
            # The long polls it woke answer first, as Kafka completes its delayed
            # fetches in the append's thread before it answers the produce: the
            # records reach their consumers one answer sooner (about 0.2 ms).
            await anyio.lowlevel.checkpoint()
    if acks == 0:
        failed = [
            f"{answer.name}-{p.index}: {p.error_message or p.error_code}"
            for answer in responses
            for p in answer.partition_responses
            if p.error_code
        ]
        if failed:
            # As Kafka: the only way to tell an acks=0 producer is to drop its connection,
            # which makes it refresh its metadata.
            raise CloseConnection(f"produce with acks=0 failed for {', '.join(failed)}")
        return None
    response = ProduceResponse(responses)
    if leaders and version >= NODE_ENDPOINTS_VERSION:
        response.node_endpoints = [
            NodeEndpoint(n, *nodes.addresses[n], None) for n in sorted(leaders)
        ]
    return response


CURRENT_LEADER_VERSION = 10
TRANSACTIONAL_ATTRIBUTE = 0x10
ATTRIBUTES_AT = 21
"""Where a v2 batch's int16 attributes sit (after offset, length, leader epoch,
magic and CRC)."""


def _transactional_write_allowed(ctx: RequestContext, request: ProduceRequest) -> bool:
    """Kafka's check: a request holding transactional batches (the first batch of
    each partition tells) needs a transactional id, and WRITE on it."""
    # Loops, not any() over a generator: this runs for every request.
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            records = data.records
            if (
                records is not None
                and len(records) > ATTRIBUTES_AT + 1
                and records[ATTRIBUTES_AT + 1] & TRANSACTIONAL_ATTRIBUTE
            ):
                txn_id = request.transactional_id
                return txn_id is not None and ctx.allows(
                    AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
                )
    return True


def _not_leader(
    index: int, nodes: NodeTable, partition: Partition, leaders: set[int], version: int
) -> PartitionProduceResponse:
    """NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951, from version 10 on), which
    joins ``leaders``."""
    answer = PartitionProduceResponse(
        index=index, error_code=NotLeaderOrFollowerError.code, base_offset=-1
    )
    if version >= CURRENT_LEADER_VERSION:  # an older answer cannot carry it
        leader = nodes.leader(partition)
        if leader >= 0:
            leaders.add(leader)
        answer.current_leader = LeaderIdAndEpoch(leader, partition.leader_epoch)
    return answer


def produce_to(
    partition: Partition, data: PartitionProduceData, version: int, now: Callable[[], int]
) -> PartitionProduceResponse:
    """Validate and append one partition's batch; the partition's response.

    ``now`` gives the broker time (ms), for the record timestamp checks.
    """
    index = data.index
    log = partition.log
    try:
        records = data.records
        if not records:  # None or empty
            raise InvalidRecordError("a produce request must carry one record batch per partition")
        config = log.config
        header = validate_batch(records, config, version, now)
        if header.producer_id >= 0:
            found = check_sequence(log.producer_state(), header)
            if isinstance(found, Duplicate):
                logger.info(
                    "duplicate batch of producer %d (sequences %d-%d) to %s-%d: "
                    "acknowledged at its original offset %d",
                    header.producer_id,
                    header.base_sequence,
                    header.last_sequence,
                    partition.topic,
                    index,
                    found.base_offset,
                )
                return PartitionProduceResponse(
                    index=index,
                    base_offset=found.base_offset,
                    log_append_time_ms=found.max_timestamp if config.log_append_time else -1,
                    log_start_offset=log.log_start_offset,
                )
        compression_type = config.compression_type
        if compression_type != "producer":
            target = _target_codec(compression_type)
            if target is not None and target != header.compression:
                records = recompress(records, header, target)
        info = log.append(records, leader_epoch=partition.leader_epoch, check_crc=False)
        log.update_high_watermark(info.last_offset + 1)  # the log end offset
    except RecordErrors as exc:
        return PartitionProduceResponse(
            index=index,
            error_code=exc.error.code,
            base_offset=-1,
            record_errors=[BatchIndexAndErrorMessage(i, m) for i, m in exc.errors],
            error_message=exc.message,
        )
    except RecordListTooLargeError as exc:
        return _error(index, MessageTooLargeError(str(exc)))
    except ApiError as exc:
        return _error(index, exc)
    except ProtocolError as exc:
        return _error(index, CorruptMessageError(str(exc)))
    except Exception:
        logger.exception("append to %s-%d failed", partition.topic, index)
        return _error(index, UnknownServerError())
    # index, error code, base offset, log append time, log start offset, record errors,
    # error message, current leader (positional arguments: the generated __init__ takes
    # them in half the time of keywords; the shared default leader spares a call)
    return PartitionProduceResponse(
        index,
        0,
        info.base_offset,
        info.log_append_time,
        info.log_start_offset,
        [],
        None,
        _NO_LEADER,
    )


def _target_codec(compression_type: str) -> int | None:
    """The codec a topic's ``compression.type`` imposes (None: keep the producer's)."""
    if compression_type == "producer":
        return None
    if compression_type == "uncompressed":
        return NO_COMPRESSION
    return codec_id(compression_type)


def recompress(records: bytes | bytearray | memoryview, header: StoredHeader, codec: int) -> bytes:
    """The batch re-encoded with ``codec``, as Kafka does for a topic whose
    ``compression.type`` differs from the producer's; records, timestamps, producer
    id, epoch, sequence and transactional flag stay."""
    try:
        decoded = RecordBatch.from_buffer(
            records, 0, check_crc=False, max_decompressed=MAX_DECOMPRESSED
        ).records()
    except ProtocolError as exc:
        raise CorruptMessageError(str(exc)) from None
    builder = RecordBatchBuilder(
        compression=codec,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
    )
    for record in decoded:
        builder.append(record.timestamp, record.key, record.value, record.headers)
    return builder.build()


def _error(index: int, error: ApiError) -> PartitionProduceResponse:
    message = error.detail or None  # as Kafka: the exception's message, not the code's text
    return PartitionProduceResponse(
        index=index, error_code=error.code, base_offset=-1, error_message=message
    )


def validate_batch(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    version: int,
    now: Callable[[], int],
) -> StoredHeader:
    """The header of the single batch in ``records`` once it passes every check.

    ``now`` gives the broker time (ms), read only if the records' timestamps are checked.
    """
    # The C accelerator checks the framing, magic, control flag and CRC in one call;
    # a batch it does not take goes through the checks below, which say what is wrong.
    fields = None if _check_batch is None else _check_batch(records, True)
    header = (
        _checked_header(records, version) if fields is None else _new_tuple(StoredHeader, fields)
    )
    record_count = header.record_count
    if record_count <= 0 or record_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {record_count} does not match last offset delta "
            f"{header.last_offset_delta}"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"batch of producer {header.producer_id} has no sequence number")
    if version < MIN_ZSTD_VERSION and header.compression == ZSTD:
        raise UnsupportedCompressionTypeError(
            f"zstd batches need produce v{MIN_ZSTD_VERSION}+, got v{version}"
        )
    size = len(records)
    if size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes ({config.max_message_bytes})"
        )
    check_timestamps = (
        config.message_timestamp_before_max_ms != LONG_MAX
        or config.message_timestamp_after_max_ms != LONG_MAX
    ) and not config.log_append_time
    if check_timestamps or config.compact:
        _validate_records(records, header, config.compact, check_timestamps, config, now())
    return header


def _checked_header(records: bytes | bytearray | memoryview, version: int) -> StoredHeader:
    """The header of ``records`` once its framing, magic, CRC and control flag are checked."""
    if len(records) > 16 and records[16] != 2:
        raise InvalidRecordError(
            f"produce v{version} accepts only magic 2 record batches, got magic {records[16]}"
        )
    try:
        header = parse_header(records)
    except ProtocolError as exc:
        raise CorruptMessageError(str(exc)) from None
    size = LOG_OVERHEAD + header.batch_length
    if size != len(records):
        if size < len(records):
            raise InvalidRecordError(
                "a produce request must carry exactly one record batch per partition"
            )
        raise CorruptMessageError(f"record batch of {size} bytes runs past the request")
    if batch_crc(records, 0, size) != header.crc:
        raise CorruptMessageError("record batch fails its CRC")
    if header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    return header


def _validate_records(
    records: bytes | bytearray | memoryview,
    header: StoredHeader,
    need_keys: bool,
    check_timestamps: bool,
    config: LogConfig,
    now: int,
) -> None:
    """Record-level checks, which need the records decoded (only when a topic asks)."""
    try:
        batch = RecordBatch.from_buffer(
            records, 0, check_crc=False, max_decompressed=MAX_DECOMPRESSED
        )
        decoded = batch.records()
    except ProtocolError as exc:
        raise CorruptMessageError(str(exc)) from None
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    bad_time: list[tuple[int, str]] = []
    no_key: list[tuple[int, str]] = []
    for i, record in enumerate(decoded):
        if check_timestamps:
            ts = record.timestamp
            if now - ts > before or ts - now > after:
                bad_time.append(
                    (
                        i,
                        f"timestamp {ts} of record {i} is out of range "
                        f"(broker time {now}, message.timestamp.before.max.ms {before}, "
                        f"message.timestamp.after.max.ms {after})",
                    )
                )
        if need_keys and record.key is None:
            no_key.append((i, f"compacted topic cannot accept a record without a key (record {i})"))
    if bad_time:
        raise RecordErrors(
            InvalidTimestampError(),
            "one or more records have been rejected due to invalid timestamp",
            bad_time,
        )
    if no_key:
        raise RecordErrors(
            InvalidRecordError(),
            "one or more records have been rejected: compacted topic cannot accept "
            "a record without a key",
            no_key,
        )
