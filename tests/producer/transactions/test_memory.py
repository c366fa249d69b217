"""The transactional producer against memory:// (the broker core in this process):
commit and abort visibility, fencing, abortable errors, offsets in a transaction,
and a transaction the broker aborts after its timeout."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkette import AdminClient, AsyncProducer, Consumer, NewTopic, Producer, TopicPartition
from kafkette.admin import OffsetSpec
from kafkette.client.inprocess import close_cluster
from kafkette.errors import (
    ConfigError,
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaError,
    MessageTooLargeError,
    ProducerFencedError,
)
from kafkette.producer.transactions import ProducerTxnState, TransactionAbortedError
from kafkette.testing import ManualClock, close_memory_cluster, memory_cluster
from tests.producer.transactions.helpers import read_all, read_all_async, values


@pytest.fixture
def cluster() -> Iterator[str]:
    url = f"memory://txn-{uuid.uuid4().hex[:8]}"
    try:
        yield url
    finally:
        close_cluster(url)


def create(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, configs=configs)]).all()


def txn_producer(bootstrap: str, transactional_id: str = "tx", **settings: Any) -> Producer:
    return Producer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        max_block_ms=10_000,
        **settings,
    )


@pytest.mark.anyio
async def test_async_commit_and_abort_visibility(cluster: str) -> None:
    """Committed, aborted, committed: read_committed sees the two committed transactions,
    read_uncommitted every record (the aborted ones reached the log before the abort)."""
    create(cluster, "t", 2)
    async with AsyncProducer(
        bootstrap_servers=cluster, transactional_id="tx-async", max_block_ms=10_000
    ) as producer:
        await producer.init_transactions()
        for name, commit in (("c", True), ("a", False), ("d", True)):
            producer.begin_transaction()
            for i in range(4):
                await producer.send("t", f"{name}{i}".encode(), partition=i % 2)
            await producer.flush()
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    committed = await read_all_async(cluster, "t", 2, "read_committed")
    everything = await read_all_async(cluster, "t", 2, "read_uncommitted")
    # per partition: 2 records per transaction, one marker after each transaction
    assert committed == [
        (0, 0, b"c0"), (0, 1, b"c2"), (0, 6, b"d0"), (0, 7, b"d2"),
        (1, 0, b"c1"), (1, 1, b"c3"), (1, 6, b"d1"), (1, 7, b"d3"),
    ]  # fmt: skip
    assert everything == [
        (0, 0, b"c0"), (0, 1, b"c2"), (0, 3, b"a0"), (0, 4, b"a2"), (0, 6, b"d0"), (0, 7, b"d2"),
        (1, 0, b"c1"), (1, 1, b"c3"), (1, 3, b"a1"), (1, 4, b"a3"), (1, 6, b"d1"), (1, 7, b"d3"),
    ]  # fmt: skip


def test_sync_commit_and_abort_visibility(cluster: str) -> None:
    """The same with the sync Producer; records not yet sent when the abort starts fail
    with TransactionAbortedError and never reach the log."""
    create(cluster, "t", 1)
    with txn_producer(cluster, linger_ms=60_000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"c0")
        producer.commit_transaction()
        producer.begin_transaction()
        pending = producer.send("t", b"a0")  # lingers: not sent before the abort
        producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            pending.result(5)
        producer.begin_transaction()
        producer.send("t", b"c1")
        producer.commit_transaction()
    # (whether the aborted transaction left a marker depends on whether its
    # AddPartitionsToTxn was sent before the abort: offsets of c1 vary)
    assert values(read_all(cluster, "t", 1, "read_committed")) == [b"c0", b"c1"]
    assert values(read_all(cluster, "t", 1, "read_uncommitted")) == [b"c0", b"c1"]


def test_calls_out_of_order_are_refused(cluster: str) -> None:
    """Sends and transaction calls need init_transactions and an open transaction."""
    create(cluster, "t", 1)
    with txn_producer(cluster) as producer:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            producer.send("t", b"x")
        with pytest.raises(IllegalStateError, match="init_transactions"):
            producer.begin_transaction()
        producer.init_transactions()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            producer.send("t", b"x")
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            producer.commit_transaction()
        with pytest.raises(IllegalStateError, match="invalid transition from READY"):
            producer.init_transactions()
        producer.begin_transaction()
        with pytest.raises(IllegalStateError, match="already open"):
            producer.begin_transaction()
    with Producer(bootstrap_servers=cluster) as plain, pytest.raises(IllegalStateError):
        plain.init_transactions()


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"enable_idempotence": False}, "enable.idempotence"),
        ({"acks": 1}, "acks"),
        ({"retries": 0}, "retries"),
        ({"max_in_flight_requests_per_connection": 6}, "max.in.flight.requests.per.connection"),
    ],
)
def test_transactional_id_needs_idempotence(settings: dict[str, Any], named: str) -> None:
    """A transactional id with idempotence off (or a setting that turns it off) is
    refused, naming that setting."""
    with pytest.raises(ConfigError) as info:
        Producer(bootstrap_servers="memory://unused", transactional_id="x", **settings)
    assert info.value.setting == named


def test_older_producer_is_fenced(cluster: str) -> None:
    """Two producers with one transactional id: the newer one's init fences the older,
    whose commit raises ProducerFencedError; none of its records become visible."""
    create(cluster, "t", 1)
    old = txn_producer(cluster, "shared")
    new = txn_producer(cluster, "shared")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("t", b"old-0")
        old.flush()
        new.init_transactions()
        old_manager = old._core.transactions.manager  # type: ignore[union-attr]
        new_manager = new._core.transactions.manager  # type: ignore[union-attr]
        assert new_manager.producer_id == old_manager.producer_id
        assert new_manager.epoch > old_manager.epoch  # Kafka bumps twice: abort, then init
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
        assert old_manager.state is ProducerTxnState.FATAL_ERROR
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
        with pytest.raises(ProducerFencedError):
            old.send("t", b"refused")
        new.begin_transaction()
        new.send("t", b"new-0")
        new.commit_transaction()
    finally:
        old.close(5)
        new.close()
    assert values(read_all(cluster, "t", 1, "read_committed")) == [b"new-0"]
    assert values(read_all(cluster, "t", 1, "read_uncommitted")) == [b"old-0", b"new-0"]


def test_fenced_producer_that_sends_again(cluster: str) -> None:
    """A fenced producer that sends before committing: the partition leader answers
    INVALID_PRODUCER_EPOCH, which Java treats as abortable (KIP-588: it may be the
    broker's timeout abort), so the commit raises InvalidProducerEpochError; the abort
    then learns from the coordinator that the producer is fenced."""
    create(cluster, "t", 1)
    with txn_producer(cluster, "shared") as old, txn_producer(cluster, "shared") as new:
        old.init_transactions()
        old.begin_transaction()
        old.send("t", b"old-0")
        old.flush()
        new.init_transactions()
        late = old.send("t", b"old-1")
        with pytest.raises(InvalidProducerEpochError):
            late.result(10)
        with pytest.raises(InvalidProducerEpochError):
            old.commit_transaction()
        with pytest.raises(ProducerFencedError):
            old.abort_transaction()
        new.begin_transaction()
        new.send("t", b"new-0")
        new.commit_transaction()
    assert values(read_all(cluster, "t", 1, "read_committed")) == [b"new-0"]


def test_failed_batch_makes_commit_raise_and_abort_bumps_the_epoch(cluster: str) -> None:
    """A record the broker refuses (MESSAGE_TOO_LARGE, one record: nothing to split) makes
    the transaction abortable: commit raises it, abort works and bumps the epoch
    (KIP-360), and the next transaction commits."""
    create(cluster, "t", 1, **{"max.message.bytes": "1000"})
    with txn_producer(cluster) as producer:
        producer.init_transactions()
        manager = producer._core.transactions.manager  # type: ignore[union-attr]
        epoch = manager.epoch
        producer.begin_transaction()
        producer.send("t", b"small")
        big = producer.send("t", b"x" * 2000, partition=0)
        with pytest.raises(MessageTooLargeError):
            big.result(10)
        with pytest.raises(MessageTooLargeError):
            producer.commit_transaction()
        assert manager.state is ProducerTxnState.ABORTABLE_ERROR
        with pytest.raises(KafkaError, match="abortable error state"):
            producer.send("t", b"refused")
        producer.abort_transaction()
        assert (manager.state, manager.epoch) == (ProducerTxnState.READY, epoch + 1)
        producer.begin_transaction()
        producer.send("t", b"after")
        producer.commit_transaction()
    assert values(read_all(cluster, "t", 1, "read_committed")) == [b"after"]


def test_offsets_sent_to_the_transaction_count_only_once_committed(cluster: str) -> None:
    """send_offsets_to_transaction with a group member's metadata: the group's offsets
    do not move when the transaction aborts, and move when it commits."""
    create(cluster, "in", 1)
    create(cluster, "out", 1)
    with Producer(bootstrap_servers=cluster) as plain:
        for i in range(6):
            plain.send("in", b"%d" % i)
    consumer = Consumer(
        bootstrap_servers=cluster,
        group_id="copier",
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    admin = AdminClient(bootstrap_servers=cluster)
    tp = TopicPartition("in", 0)
    try:
        consumer.subscribe(["in"])
        records: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(records) < 6:
            assert time.monotonic() < deadline
            records += [r.value for batch in consumer.poll(100).values() for r in batch]
        group = consumer.group_metadata()
        assert group.generation_id > 0 and group.member_id
        with txn_producer(cluster, "copier-tx") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("out", b"first")
            producer.send_offsets_to_transaction({tp: 3}, group)
            assert admin.list_consumer_group_offsets("copier", [tp]).all() == {tp: None}
            producer.abort_transaction()
            assert admin.list_consumer_group_offsets("copier", [tp]).all() == {tp: None}
            producer.begin_transaction()
            producer.send("out", b"second")
            producer.send_offsets_to_transaction({tp: 6}, group)
            producer.commit_transaction()
        offsets = admin.list_consumer_group_offsets("copier", [tp]).all()
        assert offsets[tp] is not None and offsets[tp].offset == 6  # type: ignore[union-attr]
    finally:
        consumer.close()
        admin.close()
    assert values(read_all(cluster, "out", 1, "read_committed")) == [b"second"]


def test_broker_aborts_a_transaction_past_its_timeout() -> None:
    """transaction.timeout.ms passes on the broker's clock: the broker aborts the
    transaction, the last stable offset moves past it, its records never become visible
    to read_committed, and the producer's commit is refused as fenced."""
    clock = ManualClock()
    url = memory_cluster(f"txn-timeout-{uuid.uuid4().hex[:8]}", clock=clock)
    try:
        create(url, "t", 1)
        with txn_producer(url, transaction_timeout_ms=5_000) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("t", b"late")
            producer.flush()
            tp = TopicPartition("t", 0)
            with AdminClient(bootstrap_servers=url) as admin:

                def lso() -> int:
                    specs = {tp: OffsetSpec.LATEST}
                    return (
                        admin.list_offsets(specs, isolation_level="read_committed").all()[tp].offset
                    )

                assert lso() == 0
                clock.advance(5_001)
                deadline = time.monotonic() + 10
                while lso() == 0:
                    assert time.monotonic() < deadline, "the broker did not abort in time"
                    time.sleep(0.05)
                assert lso() == 2  # the record and the abort marker
            with pytest.raises(ProducerFencedError):
                producer.commit_transaction()
        # fetch_max_wait_ms=0: the broker's clock does not move by itself
        assert read_all(url, "t", 1, "read_committed", fetch_max_wait_ms=0) == []
        assert read_all(url, "t", 1, "read_uncommitted", fetch_max_wait_ms=0) == [(0, 0, b"late")]
    finally:
        close_memory_cluster(url)


@pytest.mark.anyio
async def test_close_aborts_an_open_transaction(cluster: str) -> None:
    """Closing with a transaction open aborts it (as Java's producer does)."""
    create(cluster, "t", 1)
    async with AsyncProducer(
        bootstrap_servers=cluster, transactional_id="tx-close", max_block_ms=10_000
    ) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_and_wait("t", b"open")
    async with AsyncProducer(
        bootstrap_servers=cluster, transactional_id="tx-close", max_block_ms=10_000
    ) as producer:
        with anyio.fail_after(10):
            await producer.init_transactions()  # would wait for an open transaction
    assert await read_all_async(cluster, "t", 1, "read_committed") == []
    assert values(await read_all_async(cluster, "t", 1, "read_uncommitted")) == [b"open"]


def test_batch_split_by_the_broker_keeps_its_sequences(cluster: str) -> None:
    """A batch the broker finds too large is cut in parts that reuse its sequence numbers
    (the broker stored none of them): the transaction commits with every record, in
    order, and no epoch bump."""
    create(cluster, "t", 1, **{"max.message.bytes": "1000"})
    with txn_producer(cluster, linger_ms=500) as producer:
        producer.init_transactions()
        manager = producer._core.transactions.manager  # type: ignore[union-attr]
        epoch = manager.epoch
        producer.begin_transaction()
        futures = [producer.send("t", b"%02d" % i + b"x" * 198) for i in range(10)]
        producer.send("t", b"after")
        producer.commit_transaction()
        assert [f.result(0).offset for f in futures] == list(range(10))
        assert producer.metrics()["batches_split"] >= 1
        assert (manager.state, manager.epoch) == (ProducerTxnState.READY, epoch)
    records = read_all(cluster, "t", 1, "read_committed")
    assert [v[:2] for v in values(records)] == [b"%02d" % i for i in range(10)] + [b"af"]
