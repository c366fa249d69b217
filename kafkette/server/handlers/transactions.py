"""The transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28), DescribeProducers (61), DescribeTransactions (65) and
ListTransactions (66).

Each handler turns a request into a call on the broker's
:class:`~kafkette.server.txn.coordinator.TransactionCoordinator` (or, for
TxnOffsetCommit, its checks and the group store) and the answer into the
response of the request's version. What depends on the cluster (does a
partition exist?) is checked here.

Versions served: AddPartitionsToTxn 0-3 (4+ are Kafka's broker-to-broker
batched form), EndTxn 0-4 (5 is KIP-890's epoch bump on every transaction,
not implemented); the others every version the codec knows. Clients older
than PRODUCER_FENCED (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below
v2) get INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import AclOperation, ResourceType
from kafkette.errors import (
    NO_ERROR,
    ApiError,
    GroupAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidRequestError,
    OffsetMetadataTooLargeError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    TransactionalIdNotFoundError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkette.protocol.messages import describe_producers_response as dp
from kafkette.protocol.messages import describe_transactions_response as dt
from kafkette.protocol.messages import list_transactions_response as lt
from kafkette.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from kafkette.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kafkette.server.cluster import INTERNAL_TOPICS
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.groups.log_store import LogGroupStore
from kafkette.server.groups.store import CommittedOffset, PartitionKey

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

FIRST_PRODUCER_FENCED_VERSION = 2
"""AddPartitionsToTxn, AddOffsetsToTxn and EndTxn know PRODUCER_FENCED from v2."""

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP, TRANSACTIONAL_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.TRANSACTIONAL_ID,
)


def fenced_for(version: int, error: int, first_version: int) -> int:
    """PRODUCER_FENCED as a client of ``version`` understands it."""
    if error == ProducerFencedError.code and version < first_version:
        return InvalidProducerEpochError.code
    return error


def partition_exists(broker: Broker, topic: str, partition: int) -> bool:
    known = broker.cluster.topics.get(topic)
    return known is not None and 0 <= partition < len(known.partitions)


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn -------------------------------------------


@handler(AddPartitionsToTxnRequest, max_version=3)
async def handle_add_partitions_to_txn(
    broker: Broker, ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    txn_id = request.v3_and_below_transactional_id
    # As Kafka: WRITE on the transactional id, then on each topic (before existence);
    # an internal topic is never a client's to add, whoever asks.
    refused = {
        key for key in wanted if key[0] in INTERNAL_TOPICS or not ctx.allows(WRITE, TOPIC, key[0])
    }
    missing = {key for key in wanted if key not in refused and not partition_exists(broker, *key)}
    errors: dict[PartitionKey, int]
    if not txn_id:
        errors = dict.fromkeys(wanted, InvalidRequestError.code)
    elif not ctx.allows(WRITE, TRANSACTIONAL_ID, txn_id):
        errors = dict.fromkeys(wanted, TransactionalIdAuthorizationFailedError.code)
    elif refused or missing:
        # As Kafka: nothing is added when one partition is unknown.
        errors = {
            key: TopicAuthorizationFailedError.code
            if key in refused
            else UnknownTopicOrPartitionError.code
            if key in missing
            else OperationNotAttemptedError.code
            for key in wanted
        }
    else:
        error = broker.transactions.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
        error = fenced_for(ctx.api_version, error, FIRST_PRODUCER_FENCED_VERSION)
        errors = dict.fromkeys(wanted, error)
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition, error))
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(name, results) for name, results in by_topic.items()
        ]
    )


@handler(AddOffsetsToTxnRequest)
async def handle_add_offsets_to_txn(
    broker: Broker, ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    if not request.transactional_id:
        return AddOffsetsToTxnResponse(error_code=InvalidRequestError.code)
    if not ctx.allows(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=TransactionalIdAuthorizationFailedError.code)
    if not ctx.allows(READ, GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=GroupAuthorizationFailedError.code)
    # The group's partition joins the transaction: __consumer_offsets is made here if no
    # FindCoordinator for a group has made it yet (this producer found only its own).
    await broker.offsets_topic.ready(broker.topic_changes)
    error = broker.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    return AddOffsetsToTxnResponse(
        error_code=fenced_for(ctx.api_version, error, FIRST_PRODUCER_FENCED_VERSION)
    )


@handler(EndTxnRequest, max_version=4)
async def handle_end_txn(
    broker: Broker, ctx: RequestContext, request: EndTxnRequest
) -> EndTxnResponse:
    if not request.transactional_id:
        return EndTxnResponse(error_code=InvalidRequestError.code)
    if not ctx.allows(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=TransactionalIdAuthorizationFailedError.code)
    error = broker.transactions.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    return EndTxnResponse(
        error_code=fenced_for(ctx.api_version, error, FIRST_PRODUCER_FENCED_VERSION)
    )


# -- TxnOffsetCommit ----------------------------------------------------------------------


@handler(TxnOffsetCommitRequest)
async def handle_txn_offset_commit(
    broker: Broker, ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    now = broker.now_ms()
    requested: list[tuple[PartitionKey, CommittedOffset]] = [
        (
            (topic.name, p.partition_index),
            CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=now,
            ),
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    if not ctx.allows(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        error = TransactionalIdAuthorizationFailedError.code
    elif not ctx.allows(READ, GROUP, request.group_id):
        error = GroupAuthorizationFailedError.code
    else:
        error = broker.transactions.check_offset_commit(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    if error == NO_ERROR:
        error = broker.groups.validate_transactional_commit(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id
        )
    errors: dict[PartitionKey, int] = {}
    accepted: dict[PartitionKey, CommittedOffset] = {}
    max_metadata = broker.config.offset_metadata_max_bytes
    for key, offset in requested:
        if error != NO_ERROR:
            errors[key] = error
        elif not ctx.allows(READ, TOPIC, key[0]):
            errors[key] = TopicAuthorizationFailedError.code
        elif not partition_exists(broker, *key):
            errors[key] = UnknownTopicOrPartitionError.code
        elif len(offset.metadata.encode()) > max_metadata:
            errors[key] = OffsetMetadataTooLargeError.code
        else:
            accepted[key] = offset
            errors[key] = NO_ERROR
    if accepted:
        written = _write_offsets(broker, request, accepted)
        errors.update(dict.fromkeys(accepted, written))
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (topic_name, partition), code in errors.items():
        by_topic.setdefault(topic_name, []).append(
            TxnOffsetCommitResponsePartition(partition, code)
        )
    return TxnOffsetCommitResponse(
        topics=[TxnOffsetCommitResponseTopic(name, parts) for name, parts in by_topic.items()]
    )


def _write_offsets(
    broker: Broker,
    request: TxnOffsetCommitRequest,
    offsets: dict[PartitionKey, CommittedOffset],
) -> int:
    store = broker.groups.store
    if not isinstance(store, LogGroupStore):
        return UnknownServerError.code
    try:
        store.write_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, offsets
        )
    except ApiError as exc:
        return exc.code
    broker.transactions.offsets_written(request.transactional_id, request.group_id, offsets)
    return NO_ERROR


# -- ListTransactions, DescribeTransactions, DescribeProducers ---------------------------------


@handler(ListTransactionsRequest)
async def handle_list_transactions(
    broker: Broker, ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    unknown, found = broker.transactions.list_transactions(
        request.state_filters, request.producer_id_filters, request.duration_filter
    )
    return ListTransactionsResponse(
        unknown_state_filters=unknown,
        transaction_states=[
            lt.TransactionState(m.transactional_id, m.producer_id, m.state.display_name)
            for m in found
            if ctx.allows(DESCRIBE, TRANSACTIONAL_ID, m.transactional_id)
        ],
    )


@handler(DescribeTransactionsRequest)
async def handle_describe_transactions(
    broker: Broker, ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states: list[dt.TransactionState] = []
    for transactional_id in request.transactional_ids:
        if not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
            states.append(
                dt.TransactionState(
                    error_code=TransactionalIdAuthorizationFailedError.code,
                    transactional_id=transactional_id,
                    producer_id=-1,
                    producer_epoch=-1,
                    transaction_start_time_ms=-1,
                )
            )
            continue
        meta = broker.transactions.describe(transactional_id)
        if meta is None:
            states.append(
                dt.TransactionState(
                    error_code=TransactionalIdNotFoundError.code,
                    transactional_id=transactional_id,
                    producer_id=-1,
                    producer_epoch=-1,
                    transaction_start_time_ms=-1,
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            if ctx.allows(DESCRIBE, TOPIC, topic):  # as Kafka: topics it may not see are left out
                by_topic.setdefault(topic, []).append(partition)
        states.append(
            dt.TransactionState(
                transactional_id=transactional_id,
                transaction_state=meta.state.display_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.txn_start_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[dt.TopicData(topic, parts) for topic, parts in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)


@handler(DescribeProducersRequest)
async def handle_describe_producers(
    broker: Broker, ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics: list[dp.TopicResponse] = []
    for wanted in request.topics:
        known = broker.cluster.topics.get(wanted.name)
        allowed = ctx.allows(READ, TOPIC, wanted.name)
        results: list[dp.PartitionResponse] = []
        for index in wanted.partition_indexes:
            if not allowed:
                results.append(
                    dp.PartitionResponse(index, TopicAuthorizationFailedError.code, None)
                )
                continue
            if known is None or not 0 <= index < len(known.partitions):
                error = UnknownTopicOrPartitionError()
                results.append(
                    dp.PartitionResponse(
                        index, error.code, "This server does not host this topic-partition."
                    )
                )
                continue
            state = known.partitions[index].log.producer_state()
            results.append(
                dp.PartitionResponse(
                    partition_index=index,
                    active_producers=[
                        dp.ProducerState(
                            producer_id=e.producer_id,
                            producer_epoch=e.producer_epoch,
                            last_sequence=e.last_sequence,
                            last_timestamp=e.batches[-1].max_timestamp if e.batches else -1,
                            coordinator_epoch=e.coordinator_epoch,
                            current_txn_start_offset=e.txn_first_offset,
                        )
                        for e in sorted(state.producers.values(), key=lambda e: e.producer_id)
                    ],
                )
            )
        topics.append(dp.TopicResponse(wanted.name, results))
    return DescribeProducersResponse(topics=topics)
