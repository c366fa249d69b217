"""Transactions across restarts (``__transaction_state`` on disk) and broker timeouts."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from kafkette.protocol.messages import TransactionLogValue
from kafkette.server.txn.log_store import (
    TRANSACTION_STATE_TOPIC,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkette.server.txn.state import CoordinatorTxnState, TransactionMetadata, prepare_end
from tests.server.dataplane import NOW, FakeClock, make_broker
from tests.server.txn.helpers import (
    NONE,
    PRODUCER_FENCED,
    add_offsets,
    add_partitions,
    end,
    fetch_partition,
    init,
    send,
    txn_commit,
    visible,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """One backend here: these tests are about storage, and each opens 50-partition logs."""
    return "asyncio"


def test_records_are_kafkas_version_0_key_and_value() -> None:
    """Key: int16 version 0 then the id; value: version 0 with Kafka's state id, the
    partitions grouped by topic, and null partitions for Empty."""
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    meta = TransactionMetadata(
        transactional_id="tx",
        producer_id=7,
        producer_epoch=3,
        timeout_ms=60_000,
        state=CoordinatorTxnState.ONGOING,
        partitions=frozenset({("b", 1), ("a", 2), ("a", 0)}),
        txn_start_ms=NOW,
        last_update_ms=NOW + 5,
    )
    data = encode_value(meta)
    assert data == (
        b"\x00\x00"  # value version 0
        + (7).to_bytes(8, "big")
        + (3).to_bytes(2, "big")
        + (60_000).to_bytes(4, "big")
        + b"\x01"  # Ongoing
        + (2).to_bytes(4, "big")
        + b"\x00\x01a"
        + (2).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + b"\x00\x01b"
        + (1).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + (NOW + 5).to_bytes(8, "big")
        + NOW.to_bytes(8, "big")
    )
    assert decode_key(encode_key("tx")) == "tx"
    assert decode_value("tx", data) == meta
    empty = TransactionMetadata(
        transactional_id="tx", producer_id=7, producer_epoch=0, timeout_ms=1, last_update_ms=NOW
    )
    assert encode_value(empty)[2 + 8 + 2 + 4 + 1 :][:4] == b"\xff\xff\xff\xff"  # null array
    assert decode_value("tx", encode_value(empty)) == empty
    fence = TransactionMetadata(
        transactional_id="tx",
        producer_id=7,
        timeout_ms=1,
        state=CoordinatorTxnState.PREPARE_EPOCH_FENCE,
        last_update_ms=NOW,
    )
    assert decode_value("tx", encode_value(fence)).state == CoordinatorTxnState.PREPARE_ABORT


def test_version_1_values_are_read() -> None:
    """A value Kafka 4 writes for transaction version 2 clients (version 1) is read."""
    from kafkette.protocol.codec import encode_message

    out = bytearray(b"\x00\x01")
    encode_message(
        TransactionLogValue(
            producer_id=9,
            producer_epoch=2,
            transaction_timeout_ms=1000,
            transaction_status=4,
            transaction_partitions=[],
            transaction_last_update_timestamp_ms=5,
            transaction_start_timestamp_ms=4,
        ),
        1,
        out,
    )
    meta = decode_value("x", bytes(out))
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (
        9,
        2,
        CoordinatorTxnState.COMPLETE_COMMIT,
    )


async def test_state_and_producer_ids_survive_a_restart(tmp_path: Path) -> None:
    """After a restart the transactional id keeps its producer id and epoch, an open
    transaction can still be committed, and new producer ids do not collide."""
    clock = FakeClock()
    broker = make_broker(clock, str(tmp_path))
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx")
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    await send(broker, "t", 0, pid, epoch, 0, [b"a"])
    broker.close()
    again = make_broker(clock, str(tmp_path))
    meta = again.transactions.transactions["tx"]
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (
        pid,
        epoch,
        CoordinatorTxnState.ONGOING,
    )
    assert meta.partitions == frozenset({("t", 0)})
    assert await end(again, "tx", pid, epoch, True) == NONE
    assert await visible(again, "t", 0, committed=True) == [b"a"]
    other = await init(again, "other")
    assert other.producer_id > pid
    again.close()


async def test_a_restart_completes_a_transaction_caught_in_prepare_commit(tmp_path: Path) -> None:
    """PrepareCommit persisted but no marker written (a crash): the restarted broker writes
    the markers, with the offsets of the transaction, and persists CompleteCommit."""
    clock = FakeClock()
    broker = make_broker(clock, str(tmp_path), offsets_topic_num_partitions=3)
    broker.cluster.create_topic("t", 2)
    response = await init(broker, "tx")
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0, 1]})
    await send(broker, "t", 0, pid, epoch, 0, [b"a", b"b"])
    await send(broker, "t", 1, pid, epoch, 0, [b"c"])
    assert await add_offsets(broker, "tx", pid, epoch, "g") == NONE
    assert await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 42}) == {("t", 0): NONE}
    prepared = prepare_end(broker.transactions.transactions["tx"], pid, epoch, True, NOW)
    assert not isinstance(prepared, int)
    broker.transactions.store.write(prepared)
    broker.close()
    again = make_broker(clock, str(tmp_path), offsets_topic_num_partitions=3)
    assert again.transactions.transactions["tx"].state == CoordinatorTxnState.COMPLETE_COMMIT
    assert await visible(again, "t", 0, committed=True) == [b"a", b"b"]
    assert await visible(again, "t", 1, committed=True) == [b"c"]
    committed = again.groups.fetch_offsets("g", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 42
    again.close()
    third = make_broker(
        clock, str(tmp_path), offsets_topic_num_partitions=3
    )  # CompleteCommit was persisted, offsets too
    assert third.transactions.transactions["tx"].state == CoordinatorTxnState.COMPLETE_COMMIT
    restored = third.groups.fetch_offsets("g", [("t", 0)])[("t", 0)]
    assert restored is not None and restored.offset == 42
    assert len(third.cluster.topics[TRANSACTION_STATE_TOPIC].partitions) == 50
    third.close()


async def test_a_restart_completes_a_transaction_caught_in_prepare_abort(tmp_path: Path) -> None:
    """PrepareAbort caught by a stop: the records stay invisible and the LSO moves on."""
    clock = FakeClock()
    broker = make_broker(clock, str(tmp_path))
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx")
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    await send(broker, "t", 0, pid, epoch, 0, [b"a"])
    prepared = prepare_end(broker.transactions.transactions["tx"], pid, epoch, False, NOW)
    assert not isinstance(prepared, int)
    broker.transactions.store.write(prepared)
    broker.close()
    again = make_broker(clock, str(tmp_path))
    assert again.transactions.transactions["tx"].state == CoordinatorTxnState.COMPLETE_ABORT
    part = await fetch_partition(again, "t", 0, committed=True)
    assert part.last_stable_offset == part.high_watermark == 2
    assert await visible(again, "t", 0, committed=True) == []
    again.close()


async def test_the_broker_aborts_a_transaction_past_its_timeout() -> None:
    """Past transaction.timeout.ms the timer aborts the transaction with a bumped epoch:
    its records never become visible, the LSO advances, and the producer is fenced."""
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx", timeout_ms=1_000)
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    await send(broker, "t", 0, pid, epoch, 0, [b"late"])
    assert broker.transactions.next_deadline_ms() == NOW + 1_001
    clock.advance(1_000)
    broker.transactions.tick()
    assert broker.transactions.transactions["tx"].state == CoordinatorTxnState.ONGOING
    clock.advance(1)
    broker.transactions.tick()
    meta = broker.transactions.transactions["tx"]
    assert (meta.state, meta.producer_epoch) == (CoordinatorTxnState.COMPLETE_ABORT, epoch + 1)
    part = await fetch_partition(broker, "t", 0, committed=True)
    assert part.last_stable_offset == part.high_watermark == 2
    assert await visible(broker, "t", 0, committed=True) == []
    assert await end(broker, "tx", pid, epoch, True) == PRODUCER_FENCED
    again = await init(broker, "tx", producer_id=pid, producer_epoch=epoch)
    assert again.error_code == PRODUCER_FENCED
    fresh = await init(broker, "tx")
    assert (fresh.error_code, fresh.producer_id, fresh.producer_epoch) == (NONE, pid, epoch + 2)


async def test_the_timer_loop_aborts_on_an_injected_clock() -> None:
    """The timer loop (Broker.run_timers) also runs the transaction coordinator's deadlines."""
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx", timeout_ms=1_000)
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    async with anyio.create_task_group() as tg:
        tg.start_soon(broker.run_timers)
        clock.advance(2_000)
        with anyio.fail_after(5):
            while (
                broker.transactions.transactions["tx"].state != CoordinatorTxnState.COMPLETE_ABORT
            ):
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()


async def test_idle_transactional_ids_expire() -> None:
    """An id idle for transactional.id.expiration.ms is forgotten (a tombstone is written)
    and the next InitProducerId starts it again with a new producer id."""
    clock = FakeClock()
    broker = make_broker(clock, transactional_id_expiration_ms=10_000)
    first = await init(broker, "tx")
    assert broker.transactions.next_deadline_ms() == NOW + 10_000
    clock.advance(10_000)
    broker.transactions.tick()
    assert "tx" not in broker.transactions.transactions
    assert broker.transactions.store.load() == {}
    again = await init(broker, "tx")
    assert (again.producer_id, again.producer_epoch) == (first.producer_id + 1, 0)


async def test_pending_offsets_of_an_open_transaction_survive_a_restart(tmp_path: Path) -> None:
    """An Ongoing transaction's TxnOffsetCommit is read back at start: still pending, and
    the group's once the transaction commits."""
    clock = FakeClock()
    broker = make_broker(clock, str(tmp_path), offsets_topic_num_partitions=3)
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx")
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    await add_offsets(broker, "tx", pid, epoch, "g")
    await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 7})
    broker.close()
    again = make_broker(clock, str(tmp_path), offsets_topic_num_partitions=3)
    assert again.transactions.has_pending_offsets("g", ("t", 0))
    assert again.groups.fetch_offsets("g", [("t", 0)]) == {("t", 0): None}
    assert await end(again, "tx", pid, epoch, True) == NONE
    assert not again.transactions.has_pending_offsets("g", ("t", 0))
    committed = again.groups.fetch_offsets("g", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 7
    again.close()


async def test_failed_writes_are_retried_by_the_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker write that fails leaves the transaction in PrepareCommit (EndTxn still
    answers OK: the outcome is decided) and the timer writes it a second later; a failed
    state write on timeout is retried a second later too, not in a tight loop."""
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic("t", 1)
    response = await init(broker, "tx", timeout_ms=1_000)
    pid, epoch = response.producer_id, response.producer_epoch
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    await send(broker, "t", 0, pid, epoch, 0, [b"a"])

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(broker.markers, "write", broken)
    assert await end(broker, "tx", pid, epoch, True) == NONE
    prepared = broker.transactions.transactions["tx"]
    assert prepared.state == CoordinatorTxnState.PREPARE_COMMIT
    assert broker.transactions.next_deadline_ms() == NOW + 1_000
    monkeypatch.undo()
    clock.advance(1_000)
    broker.transactions.tick()
    completed = broker.transactions.transactions["tx"]
    assert completed.state == CoordinatorTxnState.COMPLETE_COMMIT
    assert await visible(broker, "t", 0, committed=True) == [b"a"]

    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    writes: list[object] = []

    def refuse(meta: object) -> None:
        writes.append(meta)
        raise OSError("disk full")

    monkeypatch.setattr(broker.transactions.store, "write", refuse)
    clock.advance(1_001)
    broker.transactions.tick()
    broker.transactions.tick()
    assert len(writes) == 1
    assert broker.transactions.next_deadline_ms() == clock.now + 1_000
    assert broker.transactions.transactions["tx"].state == CoordinatorTxnState.ONGOING


async def test_the_state_topic_takes_its_partitions_and_segment_size_from_the_config() -> None:
    """``transaction.state.log.num.partitions`` and ``...segment.bytes``, as Kafka names them."""
    broker = make_broker(
        FakeClock(),
        transaction_state_log_num_partitions=3,
        transaction_state_log_segment_bytes=1 << 20,
    )
    await init(broker, "tx")
    topic = broker.cluster.topics[TRANSACTION_STATE_TOPIC]
    assert len(topic.partitions) == 3
    assert (topic.configs["cleanup.policy"], topic.configs["segment.bytes"]) == (
        "compact",
        str(1 << 20),
    )
    broker.close()
