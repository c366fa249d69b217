"""The transaction APIs through Broker.handle and the wire codec."""

from __future__ import annotations

import attrs
import pytest

from kafkette.protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafkette.protocol.messages.describe_producers_request import TopicRequest
from kafkette.protocol.records import ControlRecordType, parse_control_record
from kafkette.server import Broker
from kafkette.server.internal_topic import partition_for
from kafkette.server.txn.state import CoordinatorTxnState
from tests.server.dataplane import NOW, FakeClock, call, make_broker
from tests.server.txn.helpers import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    TRANSACTIONAL_ID_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION,
    add_offsets,
    add_partitions,
    control_batches,
    end,
    fetch_partition,
    init,
    send,
    txn_commit,
    visible,
)

pytestmark = pytest.mark.anyio


def txn_broker(clock: FakeClock | None = None) -> Broker:
    broker = make_broker(clock or FakeClock())
    broker.cluster.create_topic("t", 2)
    return broker


async def begin(broker: Broker, tid: str = "tx") -> tuple[int, int]:
    response = await init(broker, tid)
    assert response.error_code == NONE
    pid, epoch = response.producer_id, response.producer_epoch
    errors = await add_partitions(broker, tid, pid, epoch, {"t": [0]})
    assert errors == {("t", 0): NONE}
    return pid, epoch


async def test_committed_records_become_visible_at_the_commit_marker() -> None:
    """read_committed sees nothing (and the LSO stays at the first offset) until EndTxn
    commits; then the records, followed by a COMMIT marker with the producer's epoch."""
    broker = txn_broker()
    await send(broker, "t", 0, -1, -1, -1, [b"plain"])
    pid, epoch = await begin(broker)
    assert (await send(broker, "t", 0, pid, epoch, 0, [b"a", b"b"])).error_code == NONE
    before = await fetch_partition(broker, "t", 0, committed=True)
    assert (before.high_watermark, before.last_stable_offset) == (3, 1)
    assert await visible(broker, "t", 0, committed=True) == [b"plain"]
    assert await end(broker, "tx", pid, epoch, True) == NONE
    after = await fetch_partition(broker, "t", 0, committed=True)
    assert (after.high_watermark, after.last_stable_offset) == (4, 4)
    assert after.aborted_transactions == []
    assert await visible(broker, "t", 0, committed=True) == [b"plain", b"a", b"b"]
    [marker] = control_batches(after.records)
    assert (marker.base_offset, marker.producer_id, marker.producer_epoch) == (3, pid, epoch)
    record = marker.records()[0]
    parsed = parse_control_record(record.key, record.value)
    assert (parsed.type, parsed.coordinator_epoch) == (ControlRecordType.COMMIT, 0)
    assert broker.transactions.transactions["tx"].state == CoordinatorTxnState.COMPLETE_COMMIT


async def test_aborted_records_are_listed_and_filtered() -> None:
    """An aborted transaction's records stay readable uncommitted; read_committed fetches
    list it as aborted from its first offset, and the marker is an ABORT."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    await send(broker, "t", 0, pid, epoch, 0, [b"x"])
    assert await end(broker, "tx", pid, epoch, False) == NONE
    part = await fetch_partition(broker, "t", 0, committed=True)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
    assert part.last_stable_offset == 2
    assert await visible(broker, "t", 0, committed=True) == []
    assert await visible(broker, "t", 0, committed=False) == [b"x"]
    [marker] = control_batches(part.records)
    record = marker.records()[0]
    assert parse_control_record(record.key, record.value).type == ControlRecordType.ABORT


async def test_markers_go_to_every_partition_of_the_transaction() -> None:
    """Both partitions get a marker, also one the producer never wrote to."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    assert await add_partitions(broker, "tx", pid, epoch, {"t": [1]}) == {("t", 1): NONE}
    await send(broker, "t", 0, pid, epoch, 0, [b"x"])
    assert await end(broker, "tx", pid, epoch, True) == NONE
    for index, end_offset in ((0, 2), (1, 1)):
        part = await fetch_partition(broker, "t", index, committed=False)
        assert part.high_watermark == end_offset
        assert len(control_batches(part.records)) == 1


async def test_a_second_transaction_continues_the_sequence() -> None:
    """After a commit the producer keeps its epoch; its next transaction is separate."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    await send(broker, "t", 0, pid, epoch, 0, [b"one"])
    assert await end(broker, "tx", pid, epoch, True) == NONE
    assert await add_partitions(broker, "tx", pid, epoch, {"t": [0]}) == {("t", 0): NONE}
    assert (await send(broker, "t", 0, pid, epoch, 1, [b"two"])).error_code == NONE
    assert await end(broker, "tx", pid, epoch, False) == NONE
    assert await visible(broker, "t", 0, committed=True) == [b"one"]


async def test_retried_end_txn_answers_like_kafka() -> None:
    """A repeated EndTxn with the same outcome is OK, with the other INVALID_TXN_STATE;
    EndTxn with no transaction open is INVALID_TXN_STATE."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    assert await end(broker, "tx", pid, epoch, True) == NONE
    assert await end(broker, "tx", pid, epoch, True) == NONE
    assert await end(broker, "tx", pid, epoch, False) == INVALID_TXN_STATE
    await add_partitions(broker, "tx", pid, epoch, {"t": [0]})
    assert await end(broker, "tx", pid, epoch, False) == NONE
    assert await end(broker, "tx", pid, epoch, False) == NONE
    assert await end(broker, "tx", pid, epoch, True) == INVALID_TXN_STATE
    fresh = await init(broker, "other")
    assert await end(broker, "other", fresh.producer_id, 0, True) == INVALID_TXN_STATE


async def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction() -> None:
    """InitProducerId while a transaction is open aborts it with a bumped epoch and answers
    CONCURRENT_TRANSACTIONS; the retry gets the epoch bumped again. The old instance's
    records never become visible and each of its requests is refused."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    await send(broker, "t", 0, pid, epoch, 0, [b"zombie"])
    first = await init(broker, "tx")
    assert (first.error_code, first.producer_id, first.producer_epoch) == (
        CONCURRENT_TRANSACTIONS,
        -1,
        -1,
    )
    part = await fetch_partition(broker, "t", 0, committed=True)
    [marker] = control_batches(part.records)
    assert (marker.producer_id, marker.producer_epoch) == (pid, epoch + 1)
    assert part.last_stable_offset == 2
    again = await init(broker, "tx")
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, pid, epoch + 2)
    assert await end(broker, "tx", pid, epoch, True) == PRODUCER_FENCED
    assert await end(broker, "tx", pid, epoch, True, version=1) == INVALID_PRODUCER_EPOCH
    fenced = await add_partitions(broker, "tx", pid, epoch, {"t": [1]})
    assert fenced == {("t", 1): PRODUCER_FENCED}
    old = await add_partitions(broker, "tx", pid, epoch, {"t": [1]}, version=1)
    assert old == {("t", 1): INVALID_PRODUCER_EPOCH}
    assert await add_offsets(broker, "tx", pid, epoch, "g") == PRODUCER_FENCED
    late = await send(broker, "t", 0, pid, epoch, 1, [b"late"])
    assert late.error_code == INVALID_PRODUCER_EPOCH
    assert await visible(broker, "t", 0, committed=True) == []


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
async def test_transaction_timeout_is_bounded(timeout_ms: int) -> None:
    """transaction.timeout.ms must be in (0, transaction.max.timeout.ms]."""
    broker = txn_broker()
    response = await init(broker, "tx", timeout_ms=timeout_ms)
    assert (response.error_code, response.producer_id) == (INVALID_TRANSACTION_TIMEOUT, -1)
    assert (await init(broker, "tx", timeout_ms=900_000)).error_code == NONE


async def test_empty_transactional_id_and_half_a_producer_are_invalid() -> None:
    """An empty transactional id, or a producer id without an epoch, is INVALID_REQUEST."""
    broker = txn_broker()
    assert (await init(broker, "")).error_code == INVALID_REQUEST
    assert (await init(broker, "tx", producer_id=5)).error_code == INVALID_REQUEST
    assert (await init(broker, "tx", producer_epoch=0)).error_code == INVALID_REQUEST


async def test_kip_360_resume_retry_and_fencing() -> None:
    """With its id and epoch a producer gets the epoch bumped; a retry of that (carrying the
    previous epoch) gets the same answer; another producer id is fenced."""
    broker = txn_broker()
    first = await init(broker, "tx")
    pid = first.producer_id
    bumped = await init(broker, "tx", producer_id=pid, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (NONE, pid, 1)
    retry = await init(broker, "tx", producer_id=pid, producer_epoch=0)
    assert (retry.error_code, retry.producer_epoch) == (NONE, 1)
    stranger = await init(broker, "tx", producer_id=pid + 100, producer_epoch=0)
    assert stranger.error_code == PRODUCER_FENCED
    stale = await init(broker, "tx", producer_id=pid + 100, producer_epoch=0, version=3)
    assert stale.error_code == INVALID_PRODUCER_EPOCH
    plain = await init(broker, "tx")
    assert (plain.producer_id, plain.producer_epoch) == (pid, 2)
    fenced = await init(broker, "tx", producer_id=pid, producer_epoch=0)
    assert fenced.error_code == PRODUCER_FENCED


async def test_exhausted_epoch_gets_a_new_producer_id() -> None:
    """At epoch 32766 the next InitProducerId hands out a new producer id at epoch 0."""
    broker = txn_broker()
    first = await init(broker, "tx")
    meta = broker.transactions.transactions["tx"]
    broker.transactions.transactions["tx"] = attrs.evolve(meta, producer_epoch=32766)
    again = await init(broker, "tx", producer_id=first.producer_id, producer_epoch=32766)
    assert again.error_code == NONE
    assert again.producer_id != first.producer_id
    assert again.producer_epoch == 0
    # A retry of that call (the old id with its exhausted epoch) gets the same answer.
    retry = await init(broker, "tx", producer_id=first.producer_id, producer_epoch=32766)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (
        NONE,
        again.producer_id,
        0,
    )


async def test_add_partitions_refuses_unknown_partitions_and_producers() -> None:
    """An unknown partition fails the whole request (the others OPERATION_NOT_ATTEMPTED);
    an unknown transactional id or producer id is INVALID_PRODUCER_ID_MAPPING."""
    broker = txn_broker()
    response = await init(broker, "tx")
    pid, epoch = response.producer_id, response.producer_epoch
    errors = await add_partitions(broker, "tx", pid, epoch, {"t": [0, 7], "nope": [0]})
    assert errors == {
        ("t", 0): OPERATION_NOT_ATTEMPTED,
        ("t", 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert broker.transactions.transactions["tx"].state == CoordinatorTxnState.EMPTY
    assert await add_partitions(broker, "who", pid, epoch, {"t": [0]}) == {
        ("t", 0): INVALID_PRODUCER_ID_MAPPING
    }
    assert await add_partitions(broker, "tx", pid + 1, epoch, {"t": [0]}) == {
        ("t", 0): INVALID_PRODUCER_ID_MAPPING
    }
    assert await add_partitions(broker, "", pid, epoch, {"t": [0]}) == {("t", 0): INVALID_REQUEST}


async def test_transactional_offsets_count_only_once_committed() -> None:
    """TxnOffsetCommit's offsets are not the group's until the COMMIT marker; an aborted
    transaction's are dropped."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    assert await add_offsets(broker, "tx", pid, epoch, "g") == NONE
    meta = broker.transactions.transactions["tx"]
    assert ("__consumer_offsets", partition_for("g", 50)) in meta.partitions
    assert await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 5}) == {("t", 0): NONE}
    assert broker.groups.fetch_offsets("g", [("t", 0)]) == {("t", 0): None}
    assert await end(broker, "tx", pid, epoch, True) == NONE
    committed = broker.groups.fetch_offsets("g", [("t", 0)])[("t", 0)]
    assert committed is not None and committed.offset == 5
    await add_offsets(broker, "tx", pid, epoch, "g")
    await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 9})
    assert await end(broker, "tx", pid, epoch, False) == NONE
    kept = broker.groups.fetch_offsets("g", [("t", 0)])[("t", 0)]
    assert kept is not None and kept.offset == 5


async def test_txn_offset_commit_checks_the_producer_and_the_transaction() -> None:
    """Before AddOffsetsToTxn: INVALID_TXN_STATE; an old epoch: INVALID_PRODUCER_EPOCH;
    another producer id: INVALID_PRODUCER_ID_MAPPING; an unknown partition:
    UNKNOWN_TOPIC_OR_PARTITION; an unknown member: UNKNOWN_MEMBER_ID."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    assert await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 1}) == {
        ("t", 0): INVALID_TXN_STATE
    }
    await add_offsets(broker, "tx", pid, epoch, "g")
    assert await txn_commit(broker, "tx", "g", pid, epoch - 1, {("t", 0): 1}) == {
        ("t", 0): INVALID_PRODUCER_EPOCH
    }
    assert await txn_commit(broker, "tx", "g", pid + 1, epoch, {("t", 0): 1}) == {
        ("t", 0): INVALID_PRODUCER_ID_MAPPING
    }
    assert await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 1, ("t", 9): 1}) == {
        ("t", 0): NONE,
        ("t", 9): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await txn_commit(
        broker, "tx", "g", pid, epoch, {("t", 0): 1}, member_id="m", generation_id=1
    ) == {("t", 0): 25}


async def test_served_versions() -> None:
    """AddPartitionsToTxn is served up to v3 (the client form) and EndTxn up to v4."""
    versions = txn_broker().supported_versions()
    assert versions[24] == (0, 3)
    assert versions[25] == (0, 4)
    assert versions[26] == (0, 4)
    assert versions[28] == (0, 4)
    assert versions[61] == (0, 0)
    assert versions[65] == (0, 0)
    assert versions[66] == (0, 1)


async def test_list_and_describe_transactions() -> None:
    """ListTransactions filters by state name, producer id and duration; DescribeTransactions
    reports the state, timeout, start, producer and partitions."""
    clock = FakeClock()
    broker = txn_broker(clock)
    pid, epoch = await begin(broker, "a")
    other = await init(broker, "b")
    clock.advance(5_000)
    listed = await call(broker, ListTransactionsRequest(), 1)
    assert [
        (s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states
    ] == [("a", pid, "Ongoing"), ("b", other.producer_id, "Empty")]
    ongoing = await call(broker, ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]), 0)
    assert [s.transactional_id for s in ongoing.transaction_states] == ["a"]
    assert ongoing.unknown_state_filters == ["Bogus"]
    by_pid = await call(broker, ListTransactionsRequest(producer_id_filters=[pid]), 0)
    assert [s.transactional_id for s in by_pid.transaction_states] == ["a"]
    long = await call(broker, ListTransactionsRequest(duration_filter=4_000), 1)
    assert "a" in [s.transactional_id for s in long.transaction_states]
    short = await call(broker, ListTransactionsRequest(duration_filter=6_000), 1)
    assert "a" not in [s.transactional_id for s in short.transaction_states]
    described = await call(broker, DescribeTransactionsRequest(["a", "zzz"]), 0)
    a, missing = described.transaction_states
    assert (a.error_code, a.transaction_state, a.transaction_timeout_ms) == (
        NONE,
        "Ongoing",
        60_000,
    )
    assert (a.transaction_start_time_ms, a.producer_id, a.producer_epoch) == (NOW, pid, epoch)
    assert [(t.topic, t.partitions) for t in a.topics] == [("t", [0])]
    assert (missing.transactional_id, missing.error_code) == ("zzz", TRANSACTIONAL_ID_NOT_FOUND)


async def test_describe_producers_reports_the_partition_state() -> None:
    """DescribeProducers lists each producer of a partition with its open transaction."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    await send(broker, "t", 0, pid, epoch, 0, [b"a", b"b"])
    response = await call(
        broker,
        DescribeProducersRequest([TopicRequest("t", [0, 5]), TopicRequest("nope", [0])]),
        0,
    )
    [t, nope] = response.topics
    p0, p5 = t.partitions
    [state] = p0.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch, 1)
    assert (state.last_timestamp, state.current_txn_start_offset) == (NOW, 0)
    assert state.coordinator_epoch == -1
    assert p5.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert nope.partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    await end(broker, "tx", pid, epoch, True)
    again = await call(broker, DescribeProducersRequest([TopicRequest("t", [0])]), 0)
    [after] = again.topics[0].partitions[0].active_producers
    assert (after.current_txn_start_offset, after.coordinator_epoch) == (-1, 0)


async def test_pending_transactional_offsets_are_reported_until_the_transaction_ends() -> None:
    """has_pending_offsets (for OffsetFetch's require_stable) holds the partitions a
    TxnOffsetCommit wrote while its transaction is open, for that group only."""
    broker = txn_broker()
    pid, epoch = await begin(broker)
    await add_offsets(broker, "tx", pid, epoch, "g")
    assert not broker.transactions.has_pending_offsets("g", ("t", 0))
    await txn_commit(broker, "tx", "g", pid, epoch, {("t", 0): 3})
    assert broker.transactions.has_pending_offsets("g", ("t", 0))
    assert not broker.transactions.has_pending_offsets("g", ("t", 1))
    assert not broker.transactions.has_pending_offsets("other", ("t", 0))
    assert await end(broker, "tx", pid, epoch, False) == NONE
    assert not broker.transactions.has_pending_offsets("g", ("t", 0))
