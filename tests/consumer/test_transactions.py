"""Control records and read_committed, end to end through the broker's fetch path.

Clients may not produce control batches (the broker answers INVALID_RECORD, as
Kafka does) and kafkette has no transactional producer yet, so these tests
write transactional batches and markers straight into the log of a memory://
cluster, the way the transaction coordinator will, and consume them over the
normal Fetch path. (On ``kafkette serve`` and Tansu this waits for the
transactional producer.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkette import AsyncConsumer, Consumer, TopicPartition
from kafkette.client.inprocess import close_cluster, get_cluster
from kafkette.errors import TransactionalIdAuthorizationFailedError
from kafkette.protocol.records import ControlRecordType, RecordBatchBuilder, build_control_batch
from tests.consumer.helpers import apoll_n, poll_n
from tests.consumer.targets import Target

TOPIC = "txn"
TP = TopicPartition(TOPIC, 0)


def txn_batch(producer_id: int, values: list[bytes], sequence: int = 0) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
    )
    for value in values:
        builder.append(1000, None, value)
    return builder.build()


def marker(producer_id: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(
        kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, timestamp=1000
    )


def plain(value: bytes) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(1000, None, value)
    return builder.build()


@pytest.fixture
def txn_target() -> Iterator[Target]:
    """A memory:// cluster whose partition txn-0 holds, by offset:

    0-1 committed (pid 9), 2 COMMIT, 3-4 aborted (pid 10), 5 ABORT, 6 plain,
    7 open transaction (pid 11, no marker yet).
    """
    url = f"memory://txn-{uuid.uuid4().hex[:8]}"
    target = Target("memory", url)
    try:
        target.create_topic(TOPIC)
        # A client's control batch is transactional: without a transactional id Kafka
        # refuses it before looking further (a marker with one is INVALID_RECORD).
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            target.produce_batch(TP, marker(9, ControlRecordType.COMMIT))
        log = get_cluster(url).broker.cluster.get_partition(TOPIC, 0).log
        for data in (
            txn_batch(9, [b"c0", b"c1"]),
            marker(9, ControlRecordType.COMMIT),
            txn_batch(10, [b"a0", b"a1"]),
            marker(10, ControlRecordType.ABORT),
            plain(b"p6"),
            txn_batch(11, [b"open"]),
        ):
            log.append(data)
        log.update_high_watermark(log.log_end_offset)  # as the produce path does
        yield target
    finally:
        target.close()
        close_cluster(url)


@pytest.mark.anyio
async def test_read_uncommitted_skips_only_control_records_async(txn_target: Target) -> None:
    async with AsyncConsumer(
        bootstrap_servers=txn_target.bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TP])
        got = await apoll_n(consumer, 6)
        assert [(r.offset, r.value) for r in got] == [
            (0, b"c0"),
            (1, b"c1"),
            (3, b"a0"),
            (4, b"a1"),
            (6, b"p6"),
            (7, b"open"),
        ]
        assert await consumer.end_offsets([TP]) == {TP: 8}


@pytest.mark.anyio
async def test_read_committed_drops_aborted_and_stops_at_lso_async(txn_target: Target) -> None:
    async with AsyncConsumer(
        bootstrap_servers=txn_target.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign([TP])
        got = await apoll_n(consumer, 3)
        assert [(r.offset, r.value) for r in got] == [(0, b"c0"), (1, b"c1"), (6, b"p6")]
        assert await consumer.poll(timeout_ms=200) == {}
        assert await consumer.position(TP) == 7
        assert await consumer.end_offsets([TP]) == {TP: 7}
        assert consumer.metrics().records_lag == {TP: 0}


def test_read_committed_sync(txn_target: Target) -> None:
    with Consumer(
        bootstrap_servers=txn_target.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as consumer:
        consumer.assign([TP])
        got = poll_n(consumer, 3)
        assert [(r.offset, r.value) for r in got] == [(0, b"c0"), (1, b"c1"), (6, b"p6")]
        assert consumer.end_offsets([TP]) == {TP: 7}


def test_read_uncommitted_sync(txn_target: Target) -> None:
    with Consumer(bootstrap_servers=txn_target.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        assert [r.offset for r in poll_n(consumer, 6)] == [0, 1, 3, 4, 6, 7]
