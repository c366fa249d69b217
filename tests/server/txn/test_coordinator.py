"""TransactionCoordinator built from its few collaborators, no Broker: a cluster over
memory logs, the two internal topics' stores, a MarkerWriter, a GroupCoordinator, a
ManualClock and a counter for producer ids. Each test checks the exact metadata, the
records in ``__transaction_state`` and the markers in the data partitions."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs

from kafkette.backends import Log, LogConfig, MemoryStorage
from kafkette.errors import (
    NO_ERROR,
    InvalidTransactionTimeoutError,
    ProducerFencedError,
)
from kafkette.protocol.records import (
    ControlRecordType,
    RecordBatch,
    iter_batches,
    parse_control_record,
)
from kafkette.server.cluster import Cluster, Partition
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.coordinator import GroupCoordinator
from kafkette.server.groups.log_store import OFFSETS_TOPIC, LogGroupStore, offsets_topic
from kafkette.server.groups.store import CommittedOffset
from kafkette.server.internal_topic import partition_for
from kafkette.server.txn.coordinator import InitResult, TransactionCoordinator
from kafkette.server.txn.log_store import (
    TRANSACTION_STATE_TOPIC,
    TxnLogStore,
    decode_key,
    decode_value,
    transaction_state_topic,
)
from kafkette.server.txn.markers import MarkerWriter
from kafkette.server.txn.state import CoordinatorTxnState, TransactionMetadata, prepare_end
from kafkette.testing import ManualClock

S = CoordinatorTxnState
STATE_PARTITIONS = 3
OFFSETS_PARTITIONS = 2
FIRST_PRODUCER_ID = 1000


@attrs.define
class Rig:
    """A coordinator and what it was built from."""

    clock: ManualClock
    cluster: Cluster
    appended: list[Log]
    offsets: LogGroupStore
    groups: GroupCoordinator
    coordinator: TransactionCoordinator


def make(
    clock: ManualClock | None = None,
    cluster: Cluster | None = None,
    *,
    allocate: Callable[[], int] | None = None,
    expiration_ms: int = 604_800_000,
) -> Rig:
    """A coordinator over ``cluster`` (a new one over memory logs unless given: a second
    rig over the same cluster is a restart), its metadata loaded."""
    clock = clock or ManualClock()
    now_ms = clock.__call__

    def now() -> int:
        return int(now_ms())

    if cluster is None:
        cluster = Cluster(MemoryStorage(clock=now), LogConfig(), None)
    appended: list[Log] = []
    offsets = LogGroupStore(
        offsets_topic(
            cluster,
            partitions=OFFSETS_PARTITIONS,
            segment_bytes=1 << 20,
            clock=now,
            appended=appended.append,
        )
    )
    groups = GroupCoordinator(BrokerConfig(), offsets, clock)
    store = TxnLogStore(
        transaction_state_topic(
            cluster,
            partitions=STATE_PARTITIONS,
            segment_bytes=1 << 20,
            clock=now,
            appended=appended.append,
        )
    )
    markers = MarkerWriter(cluster, offsets, groups, clock=now, appended=appended.append)
    coordinator = TransactionCoordinator(
        store,
        markers,
        offsets,
        clock=clock,
        allocate_producer_id=allocate or itertools.count(FIRST_PRODUCER_ID).__next__,
        max_timeout_ms=900_000,
        id_expiration_ms=expiration_ms,
    )
    coordinator.load()
    return Rig(clock, cluster, appended, offsets, groups, coordinator)


def state_partition(rig: Rig, transactional_id: str) -> Partition:
    topic = rig.cluster.topics[TRANSACTION_STATE_TOPIC]
    return topic.partitions[partition_for(transactional_id, STATE_PARTITIONS)]


def batches(log: Log) -> list[RecordBatch]:
    found = []
    for b in iter_batches(log.read(0, 1 << 20).to_bytes()):
        assert isinstance(b, RecordBatch)
        found.append(b)
    return found


def states_written(rig: Rig, transactional_id: str) -> list[S | None]:
    """The states of every record of ``transactional_id`` in ``__transaction_state``
    (None: a tombstone)."""
    found: list[S | None] = []
    for b in batches(state_partition(rig, transactional_id).log):
        for r in b:
            assert r.key is not None
            if decode_key(r.key) == transactional_id:
                found.append(None if r.value is None else decode_value("", r.value).state)
    return found


def markers_in(log: Log) -> list[tuple[ControlRecordType, int, int, int, int]]:
    """(type, producer id, epoch, coordinator epoch, timestamp) of each marker."""
    found = []
    for b in batches(log):
        if b.is_control:
            [record] = list(b)
            marker = parse_control_record(record.key, record.value)
            header = b.header
            found.append(
                (
                    marker.type,
                    header.producer_id,
                    header.producer_epoch,
                    marker.coordinator_epoch,
                    header.max_timestamp,
                )
            )
    return found


def test_a_transaction_from_init_to_commit() -> None:
    """Init gives the allocated id at epoch 0; AddPartitions makes it Ongoing from now;
    EndTxn(commit) writes PrepareCommit, the COMMIT marker, then CompleteCommit, and
    ``appended`` hears of every log written, in that order."""
    rig = make()
    start = rig.clock.now_ms
    rig.cluster.create_topic("t", 2)
    data = rig.cluster.get_partition("t", 1)
    coordinator = rig.coordinator

    assert coordinator.init_producer_id("tx", 10_000) == InitResult(NO_ERROR, 1000, 0)
    assert coordinator.transactions["tx"] == TransactionMetadata(
        transactional_id="tx",
        producer_id=1000,
        last_producer_id=1000,
        producer_epoch=0,
        timeout_ms=10_000,
        state=S.EMPTY,
        last_update_ms=start,
    )
    rig.clock.advance(3)
    assert coordinator.add_partitions("tx", 1000, 0, [("t", 1)]) == NO_ERROR
    assert coordinator.transactions["tx"].state == S.ONGOING
    assert coordinator.transactions["tx"].partitions == {("t", 1)}
    assert coordinator.transactions["tx"].txn_start_ms == start + 3
    rig.clock.advance(4)
    assert coordinator.end_transaction("tx", 1000, 0, commit=True) == NO_ERROR

    done = coordinator.transactions["tx"]
    assert (done.state, done.partitions, done.last_update_ms) == (
        S.COMPLETE_COMMIT,
        frozenset(),
        start + 7,
    )
    assert states_written(rig, "tx") == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert markers_in(data.log) == [(ControlRecordType.COMMIT, 1000, 0, 0, start + 7)]
    state_log = state_partition(rig, "tx").log
    assert rig.appended == [state_log, state_log, state_log, data.log, state_log]


def test_the_timer_aborts_a_transaction_past_its_timeout_and_fences_the_producer() -> None:
    """Due at start + timeout + 1; the abort bumps the epoch, so the producer's EndTxn
    with its old epoch is PRODUCER_FENCED."""
    rig = make()
    start = rig.clock.now_ms
    rig.cluster.create_topic("t", 1)
    coordinator = rig.coordinator
    coordinator.init_producer_id("tx", 1_000)
    coordinator.add_partitions("tx", 1000, 0, [("t", 0)])
    assert coordinator.next_deadline_ms() == start + 1_001

    rig.clock.advance(1_000)
    coordinator.tick()
    assert coordinator.transactions["tx"].state == S.ONGOING  # start + timeout is not past it
    rig.clock.advance(1)
    coordinator.tick()

    aborted = coordinator.transactions["tx"]
    assert (aborted.state, aborted.producer_id, aborted.producer_epoch) == (
        S.COMPLETE_ABORT,
        1000,
        1,
    )
    assert markers_in(rig.cluster.get_partition("t", 0).log) == [
        (ControlRecordType.ABORT, 1000, 1, 0, start + 1_001)
    ]
    assert states_written(rig, "tx") == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert coordinator.end_transaction("tx", 1000, 0, commit=True) == ProducerFencedError.code


def test_a_restart_completes_a_transaction_caught_in_prepare_commit() -> None:
    """PrepareCommit persisted, markers not written (a crash): the next coordinator over
    the same logs writes the marker and completes the commit when it loads."""
    first = make()
    first.cluster.create_topic("t", 1)
    first.coordinator.init_producer_id("tx", 10_000)
    first.coordinator.add_partitions("tx", 1000, 0, [("t", 0)])
    prepared = prepare_end(first.coordinator.transactions["tx"], 1000, 0, True, first.clock.now_ms)
    assert isinstance(prepared, TransactionMetadata)
    first.coordinator.store.write(prepared)
    assert markers_in(first.cluster.get_partition("t", 0).log) == []

    first.clock.advance(50)
    again = make(first.clock, first.cluster)
    assert again.coordinator.transactions["tx"].state == S.COMPLETE_COMMIT
    assert markers_in(again.cluster.get_partition("t", 0).log) == [
        (ControlRecordType.COMMIT, 1000, 0, 0, again.clock.now_ms)
    ]
    assert states_written(again, "tx")[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


def test_transactional_offsets_count_once_committed() -> None:
    """AddOffsetsToTxn adds the group's __consumer_offsets partition; the offsets written
    meanwhile are pending (KIP-447) and not the group's until the COMMIT marker."""
    rig = make()
    coordinator = rig.coordinator
    coordinator.init_producer_id("tx", 10_000)
    assert coordinator.add_offsets("tx", 1000, 0, "g") == NO_ERROR
    offsets_partition = (OFFSETS_TOPIC, partition_for("g", OFFSETS_PARTITIONS))
    assert coordinator.transactions["tx"].partitions == {offsets_partition}
    assert coordinator.check_offset_commit("tx", 1000, 0, "g") == NO_ERROR

    committed = CommittedOffset(offset=7, commit_timestamp_ms=rig.clock.now_ms)
    rig.offsets.write_transactional_offsets("g", 1000, 0, {("t", 0): committed})
    coordinator.offsets_written("tx", "g", [("t", 0)])
    assert coordinator.has_pending_offsets("g", ("t", 0))
    assert rig.groups.fetch_offsets("g", [("t", 0)]) == {("t", 0): None}

    assert coordinator.end_transaction("tx", 1000, 0, commit=True) == NO_ERROR
    assert not coordinator.has_pending_offsets("g", ("t", 0))
    assert rig.groups.fetch_offsets("g", [("t", 0)]) == {("t", 0): committed}


def test_an_idle_transactional_id_is_forgotten() -> None:
    """Past transactional.id.expiration.ms the id is Dead: dropped, a tombstone written,
    and a restart does not bring it back."""
    rig = make(expiration_ms=5_000)
    start = rig.clock.now_ms
    rig.coordinator.init_producer_id("tx", 10_000)
    assert rig.coordinator.next_deadline_ms() == start + 5_000
    rig.clock.advance(5_000)
    rig.coordinator.tick()
    assert rig.coordinator.transactions == {}
    assert rig.coordinator.next_deadline_ms() is None
    assert states_written(rig, "tx") == [S.EMPTY, None]
    assert make(rig.clock, rig.cluster).coordinator.transactions == {}


def test_a_timeout_over_the_maximum_is_refused_before_anything_is_written() -> None:
    """transaction.max.timeout.ms bounds the timeout: no id is allocated, no topic made."""
    allocated: list[int] = []

    def allocate() -> int:
        allocated.append(len(allocated))
        return allocated[-1]

    rig = make(allocate=allocate)
    assert rig.coordinator.init_producer_id("tx", 900_001) == InitResult(
        InvalidTransactionTimeoutError.code
    )
    assert (allocated, rig.coordinator.transactions) == ([], {})
    assert TRANSACTION_STATE_TOPIC not in rig.cluster.topics
