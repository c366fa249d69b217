"""Helpers for the transaction tests: requests through Broker.handle and the codec,
transactional batches, and what a read_committed consumer would see."""

from __future__ import annotations

from typing import Any

from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafkette.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkette.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kafkette.protocol.records import RecordBatch, iter_batches
from kafkette.server import Broker
from tests.server.dataplane import batch, call, fetch_request, produce

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


async def init(
    broker: Broker,
    transactional_id: str,
    *,
    timeout_ms: int = 60_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    version: int = 4,
) -> Any:
    """The InitProducerId response."""
    return await call(
        broker,
        InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        ),
        version,
    )


async def add_partitions(
    broker: Broker,
    transactional_id: str,
    pid: int,
    epoch: int,
    partitions: dict[str, list[int]],
    *,
    version: int = 3,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn: the error of each partition."""
    response = await call(
        broker,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in partitions.items()],
        ),
        version,
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def add_offsets(
    broker: Broker, transactional_id: str, pid: int, epoch: int, group: str, *, version: int = 3
) -> int:
    response = await call(
        broker, AddOffsetsToTxnRequest(transactional_id, pid, epoch, group), version
    )
    code: int = response.error_code
    return code


async def end(
    broker: Broker, transactional_id: str, pid: int, epoch: int, commit: bool, *, version: int = 3
) -> int:
    response = await call(broker, EndTxnRequest(transactional_id, pid, epoch, commit), version)
    code: int = response.error_code
    return code


async def txn_commit(
    broker: Broker,
    transactional_id: str,
    group: str,
    pid: int,
    epoch: int,
    offsets: dict[tuple[str, int], int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    version: int = 3,
) -> dict[tuple[str, int], int]:
    """TxnOffsetCommit: the error of each partition."""
    topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            TxnOffsetCommitRequestPartition(partition, offset, -1, "")
        )
    response = await call(
        broker,
        TxnOffsetCommitRequest(
            transactional_id=transactional_id,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=generation_id,
            member_id=member_id,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
        ),
        version,
    )
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def send(
    broker: Broker, topic: str, partition: int, pid: int, epoch: int, seq: int, values: list[bytes]
) -> Any:
    """Produce one transactional batch; the partition's response."""
    data = batch(
        [(None, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    # Kafka refuses transactional batches without a transactional id; which one is
    # not checked against the producer id (no partition verification here).
    return await produce(broker, topic, partition, data, transactional_id="txn-under-test")


async def fetch_partition(
    broker: Broker, topic: str, partition: int, *, committed: bool, offset: int = 0
) -> Any:
    response = await call(
        broker,
        fetch_request(topic, {partition: offset}, isolation_level=1 if committed else 0),
        11,
    )
    return response.responses[0].partitions[0]


async def visible(broker: Broker, topic: str, partition: int, *, committed: bool) -> list[bytes]:
    """The record values a consumer sees (read_committed: aborted ones filtered out as a
    client does, from the fetch's aborted transactions; control records never)."""
    part = await fetch_partition(broker, topic, partition, committed=committed)
    aborted = sorted((a.first_offset, a.producer_id) for a in (part.aborted_transactions or []))
    open_aborted: set[int] = set()
    values: list[bytes] = []
    for b in iter_batches(bytes(part.records or b"")):
        assert isinstance(b, RecordBatch)
        while aborted and aborted[0][0] <= b.base_offset:
            open_aborted.add(aborted.pop(0)[1])
        if b.is_control:
            open_aborted.discard(b.producer_id)
            continue
        if committed and b.is_transactional and b.producer_id in open_aborted:
            continue
        values.extend(r.value or b"" for r in b)
    return values


def control_batches(data: bytes | bytearray | memoryview | None) -> list[RecordBatch]:
    """The control batches among fetched records."""
    found = []
    for b in iter_batches(bytes(data or b"")):
        assert isinstance(b, RecordBatch)
        if b.is_control:
            found.append(b)
    return found
