"""Which records of a ShareFetch answer a share consumer hands out: only the acquired
ranges of the whole stored batches the broker sends, each with its range's delivery
count; acquired offsets without a record are booked as GAP. An answer waits in the fetch
buffer until a poll takes it: only then are its records booked as delivered."""

from __future__ import annotations

import uuid

import pytest

from kafkette.client.config import ShareConsumerConfig
from kafkette.consumer.share.acknowledgements import GAP
from kafkette.consumer.share.core import ShareConsumerCore
from kafkette.consumer.share.fetch_buffer import Fetched
from kafkette.errors import CorruptMessageError, TopicAuthorizationFailedError
from kafkette.protocol.messages.share_fetch_response import (
    AcquiredRecords,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from kafkette.protocol.records.default_records import RecordBatchBuilder
from kafkette.structs import TopicPartition

TP = TopicPartition("t", 4)


def batch(base: int, count: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=base, partition_leader_epoch=7)
    for i in range(count):
        builder.append(1000 + base + i, b"k%d" % (base + i), b"v%d" % (base + i))
    return builder.build()


@pytest.mark.anyio
@pytest.mark.parametrize("deserialized", [True, False])
async def test_only_acquired_ranges_become_records_and_missing_offsets_are_gaps(
    deserialized: bool,
) -> None:
    """With a deserializer each record is made in Python; without, whole batches are made
    by the C extension (when built) and cut to the acquired ranges."""
    config = ShareConsumerConfig.from_user(
        bootstrap_servers="memory://records-test",
        group_id="g",
        value_deserializer=bytes.upper if deserialized else None,
    )
    core = ShareConsumerCore(config)
    part = PartitionData(
        partition_index=TP.partition,
        records=batch(0, 10) + batch(10, 5),  # offsets 0-9 and 10-14
        acquired_records=[
            AcquiredRecords(2, 4, 1),
            AcquiredRecords(8, 11, 3),
            AcquiredRecords(20, 21, 1),  # beyond the records sent
        ],
    )
    fetched = Fetched(1, [], {})
    core._records(TP, part, fetched)
    assert TP not in core.acks.unacknowledged  # waiting in the buffer: not delivered yet
    records = core._hand_out([fetched])
    v = b"V" if deserialized else b"v"
    assert [(r.offset, r.key, r.value, r.delivery_count) for r in records] == [
        (2, b"k2", v + b"2", 1),
        (3, b"k3", v + b"3", 1),
        (4, b"k4", v + b"4", 1),
        (8, b"k8", v + b"8", 3),
        (9, b"k9", v + b"9", 3),
        (10, b"k10", v + b"10", 3),
        (11, b"k11", v + b"11", 3),
    ]
    assert {(r.topic, r.partition, r.timestamp - r.offset, r.leader_epoch) for r in records} == {
        ("t", 4, 1000, 7)
    }
    assert core.acks.unacknowledged[TP] == {2, 3, 4, 8, 9, 10, 11}
    assert core.acks.booked[TP] == {20: GAP, 21: GAP}
    await core.client.close()


@pytest.mark.anyio
async def test_a_partition_error_waits_for_the_records_of_the_others() -> None:
    """Records of one partition are handed out (they are booked as delivered) even when
    another partition of the answer failed; its error is raised by the next poll."""
    config = ShareConsumerConfig.from_user(bootstrap_servers="memory://records-test", group_id="g")
    core = ShareConsumerCore(config)
    topic_id = uuid.UUID(int=5)
    core._names = lambda: {topic_id: "t"}  # type: ignore[method-assign]
    response = ShareFetchResponse(
        responses=[
            ShareFetchableTopicResponse(
                topic_id,
                [
                    PartitionData(partition_index=3, error_code=TopicAuthorizationFailedError.code),
                    PartitionData(
                        partition_index=4,
                        records=batch(0, 2),
                        acquired_records=[AcquiredRecords(0, 1, 1)],
                    ),
                ],
            )
        ]
    )
    records = core._hand_out([core._read_fetch(1, response, {})])
    assert [(r.partition, r.offset) for r in records] == [(4, 0), (4, 1)]
    with pytest.raises(TopicAuthorizationFailedError):
        core._raise_fetch_error()
    core._raise_fetch_error()  # raised once
    await core.client.close()


@pytest.mark.anyio
async def test_a_damaged_batch_waits_for_the_records_of_the_others() -> None:
    config = ShareConsumerConfig.from_user(bootstrap_servers="memory://records-test", group_id="g")
    core = ShareConsumerCore(config)
    topic_id = uuid.UUID(int=5)
    core._names = lambda: {topic_id: "t"}  # type: ignore[method-assign]
    damaged = bytearray(batch(0, 2))
    damaged[-1] ^= 0xFF  # the CRC no longer matches
    response = ShareFetchResponse(
        responses=[
            ShareFetchableTopicResponse(
                topic_id,
                [
                    PartitionData(
                        partition_index=3,
                        records=bytes(damaged),
                        acquired_records=[AcquiredRecords(0, 1, 1)],
                    ),
                    PartitionData(
                        partition_index=4,
                        records=batch(0, 2),
                        acquired_records=[AcquiredRecords(0, 1, 1)],
                    ),
                ],
            )
        ]
    )
    records = core._hand_out([core._read_fetch(1, response, {})])
    assert [(r.partition, r.offset) for r in records] == [(4, 0), (4, 1)]
    assert TopicPartition("t", 3) not in core.acks.held  # its locks give them back
    with pytest.raises(CorruptMessageError):
        core._raise_fetch_error()
    await core.client.close()


@pytest.mark.anyio
async def test_a_stored_batch_sent_again_gives_the_ranges_each_answer_acquired() -> None:
    """The broker sends a large stored batch whole with each answer acquiring part of it
    (at most max.record.locks in flight): each answer gives exactly its acquired range,
    with its delivery count, the batch made once per count."""
    config = ShareConsumerConfig.from_user(bootstrap_servers="memory://records-test", group_id="g")
    core = ShareConsumerCore(config)
    stored = batch(0, 10)

    def answer(first: int, last: int, count: int) -> list[tuple[int, bytes, int]]:
        part = PartitionData(
            partition_index=TP.partition,
            records=stored,
            acquired_records=[AcquiredRecords(first, last, count)],
        )
        fetched = Fetched(1, [], {})
        core._records(TP, part, fetched)
        return [(r.offset, r.value, r.delivery_count) for r in core._hand_out([fetched])]

    assert answer(0, 3, 1) == [(i, b"v%d" % i, 1) for i in range(4)]
    assert answer(4, 9, 1) == [(i, b"v%d" % i, 1) for i in range(4, 10)]
    assert answer(2, 3, 2) == [(2, b"v2", 2), (3, b"v3", 2)]
    assert answer(9, 12, 1) == [(9, b"v9", 1)]  # 10-12: gaps
    assert core.acks.booked[TP] == {10: GAP, 11: GAP, 12: GAP}
    await core.client.close()
