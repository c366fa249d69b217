"""AdminClient.abort_transaction (WriteTxnMarkers to the partition's leader): a hanging
transaction stops holding back the last stable offset; stale epochs and unknown
partitions are refused with Kafka's errors. Sync and async, on a memory:// cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkette import AdminClient, AsyncAdminClient, NewTopic, Producer, TopicPartition
from kafkette.admin import AbortTransactionSpec, ProducerState
from kafkette.errors import (
    InvalidProducerEpochError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from kafkette.testing import MemoryCluster

T0 = TopicPartition("t", 0)


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster() as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("t", 2)]).all()
        yield cluster


def hang(cluster: MemoryCluster) -> Producer:
    """A producer that wrote two records to t-0 in a transaction and went silent."""
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="stuck")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"a", partition=0).result(10)
    producer.send("t", b"b", partition=0).result(10)
    return producer


def open_producer(admin: AdminClient) -> ProducerState:
    (state,) = admin.describe_producers([T0]).all()[T0]
    assert state.current_transaction_start_offset == 0
    return state


def spec_of(state: ProducerState, **changes: int) -> AbortTransactionSpec:
    fields = {
        "producer_id": state.producer_id,
        "producer_epoch": state.producer_epoch,
        "coordinator_epoch": state.coordinator_epoch or 0,
    }
    fields.update(changes)
    return AbortTransactionSpec(T0, **fields)


def test_a_hanging_transaction_is_aborted(cluster: MemoryCluster) -> None:
    producer = hang(cluster)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        state = open_producer(admin)
        assert cluster.last_stable_offset("t", 0) == 0
        assert admin.abort_transaction(spec_of(state), timeout=10).all() == {T0: None}
        # the two records and the marker: nothing is held back any more, nothing is visible
        assert cluster.last_stable_offset("t", 0) == cluster.high_watermark("t", 0) == 3
        assert cluster.records("t", 0, isolation="read_committed") == []
        assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b"]
        (after,) = admin.describe_producers([T0]).all()[T0]
        assert after.current_transaction_start_offset is None
    producer.close(timeout=1.0)


def test_stale_epochs_and_unknown_partitions_are_refused(cluster: MemoryCluster) -> None:
    producer = hang(cluster)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        state = open_producer(admin)
        # ended by a coordinator at epoch 5: the partition remembers it for this producer
        admin.abort_transaction(spec_of(state, coordinator_epoch=5)).all()
        refused = {
            "older producer epoch": spec_of(state, producer_epoch=state.producer_epoch - 1),
            "older coordinator epoch": spec_of(state, coordinator_epoch=4),
        }
        errors = {why: admin.abort_transaction(spec).errors()[T0] for why, spec in refused.items()}
        assert isinstance(errors["older producer epoch"], InvalidProducerEpochError)
        assert isinstance(errors["older coordinator epoch"], TransactionCoordinatorFencedError)
        assert cluster.high_watermark("t", 0) == 3  # no marker written for either
        unknown = AbortTransactionSpec(TopicPartition("t", 7), state.producer_id, 0, 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.abort_transaction(unknown, timeout=5).all()
    producer.close(timeout=1.0)


@pytest.mark.anyio
async def test_async_abort_transaction(cluster: MemoryCluster) -> None:
    producer = hang(cluster)
    async with AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        (state,) = (await admin.describe_producers([T0])).all()[T0]
        result = await admin.abort_transaction(spec_of(state), timeout=10)
        assert result.all() == {T0: None}
    assert cluster.records("t", 0, isolation="read_committed") == []
    assert cluster.last_stable_offset("t", 0) == 3
    producer.close(timeout=1.0)
