"""Our transactional producer against Tansu (a broker nobody here wrote).

What Tansu 0.6 does right: InitProducerId with a transactional id (and fencing: a
produce with the old epoch gets PRODUCER_FENCED), AddPartitionsToTxn, EndTxn writing
COMMIT/ABORT markers, AddOffsetsToTxn and TxnOffsetCommit (the offsets count only once
committed). Its defects, each named by the test that meets it:

- a read_committed Fetch answers no aborted transactions (and an LSO equal to the
  high watermark), so consumers cannot filter aborted records: they are visible;
- an EndTxn from a fenced producer (an older epoch) closes the connection instead of
  answering PRODUCER_FENCED, so the old producer's commit never learns it was fenced
  and times out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.errors import KafkaTimeoutError, ProducerFencedError
from kafkette.producer.transactions import ProducerTxnState
from tests.brokers import TansuProcess, tansu_broker
from tests.producer.transactions.helpers import read_all, values


@pytest.fixture(scope="module")
def tansu_module() -> Iterator[TansuProcess]:
    yield from tansu_broker()


@pytest.fixture
def topic(tansu_module: TansuProcess) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    tansu_module.create_topic(name, 1)
    return name


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    return Producer(
        bootstrap_servers=bootstrap, transactional_id=transactional_id, max_block_ms=10_000
    )


def test_commit_and_abort(tansu_module: TansuProcess, topic: str) -> None:
    """Commit, abort, commit: each completes and the markers are written (offsets 1, 3,
    5). Tansu defect: read_committed shows the aborted records too (no aborted
    transactions in its Fetch answers)."""
    bootstrap = tansu_module.bootstrap
    with txn_producer(bootstrap, f"tx-{topic}") as producer:
        producer.init_transactions()
        for value, commit in ((b"c0", True), (b"a0", False), (b"c1", True)):
            producer.begin_transaction()
            producer.send(topic, value)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        assert producer._core.transactions.manager.state is ProducerTxnState.READY  # type: ignore[union-attr]
    expected = [(0, 0, b"c0"), (0, 2, b"a0"), (0, 4, b"c1")]
    assert read_all(bootstrap, topic, 1, "read_uncommitted") == expected
    assert read_all(bootstrap, topic, 1, "read_committed") == expected  # the defect


def test_fenced_producer_that_sends_again(tansu_module: TansuProcess, topic: str) -> None:
    """A newer producer with the same transactional id fences the older: the older's next
    batch gets PRODUCER_FENCED, so its commit raises ProducerFencedError; the newer one
    commits. (Its aborted first record stays visible: the read_committed defect.)"""
    bootstrap = tansu_module.bootstrap
    old = txn_producer(bootstrap, f"tx-{topic}")
    new = txn_producer(bootstrap, f"tx-{topic}")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"old-0")
        old.flush()
        new.init_transactions()
        old.send(topic, b"old-1")
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
        new.begin_transaction()
        new.send(topic, b"new-0")
        new.commit_transaction()
    finally:
        old.close(1)
        new.close()
    assert values(read_all(bootstrap, topic, 1, "read_uncommitted")) == [b"old-0", b"new-0"]


def test_fenced_producer_commit_times_out(tansu_module: TansuProcess, topic: str) -> None:
    """Tansu defect: the older producer's EndTxn (old epoch) makes Tansu close the
    connection rather than answer PRODUCER_FENCED; the commit's outcome stays unknown,
    so it times out (Kafka and kafkette serve answer, and the commit raises
    ProducerFencedError: see test_memory.py)."""
    bootstrap = tansu_module.bootstrap
    old = txn_producer(bootstrap, f"tx-{topic}")
    new = txn_producer(bootstrap, f"tx-{topic}")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"old-0")
        old.flush()
        new.init_transactions()
        with pytest.raises(KafkaTimeoutError):
            old.commit_transaction(timeout=1)
        new.begin_transaction()
        new.send(topic, b"new-0")
        new.commit_transaction()
    finally:
        old.close(0.5)
        new.close()


def test_offsets_in_a_transaction(tansu_module: TansuProcess) -> None:
    """send_offsets_to_transaction: the group's offset moves when the transaction
    commits, not before, and not when one aborts."""
    bootstrap = tansu_module.bootstrap
    source, sink, group = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("in", "out", "g"))
    tansu_module.create_topic(source, 1)
    tansu_module.create_topic(sink, 1)
    with Producer(bootstrap_servers=bootstrap) as plain:
        for i in range(4):
            plain.send(source, b"%d" % i)
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        # as the group tests on Tansu: with the defaults its first join takes too long
        partition_assignment_strategy=["range"],
        session_timeout_ms=6_000,
        heartbeat_interval_ms=200,
        max_poll_interval_ms=8_000,
        fetch_max_wait_ms=100,
    )
    admin = AdminClient(bootstrap_servers=bootstrap)
    tp = TopicPartition(source, 0)
    try:
        consumer.subscribe([source])
        seen = 0
        deadline = time.monotonic() + 20
        while seen < 4:
            assert time.monotonic() < deadline
            seen += sum(len(batch) for batch in consumer.poll(200).values())
        metadata = consumer.group_metadata()
        with txn_producer(bootstrap, f"tx-{group}") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(sink, b"copy")
            producer.send_offsets_to_transaction({tp: 2}, metadata)
            assert admin.list_consumer_group_offsets(group, [tp]).all() == {tp: None}
            producer.commit_transaction()
            offsets = admin.list_consumer_group_offsets(group, [tp]).all()
            assert offsets[tp] is not None and offsets[tp].offset == 2  # type: ignore[union-attr]
            producer.begin_transaction()
            producer.send_offsets_to_transaction({tp: 4}, metadata)
            producer.abort_transaction()
            offsets = admin.list_consumer_group_offsets(group, [tp]).all()
            assert offsets[tp] is not None and offsets[tp].offset == 2  # type: ignore[union-attr]
    finally:
        consumer.close()
        admin.close()
