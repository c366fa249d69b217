"""Where a consumer with a ``group.id`` starts in partitions it assigns itself.

As in Java's consumer (and librdkafka's ``assign`` with stored offsets): at the
group's committed offset when there is one, else by ``auto.offset.reset``; a
reset asked for afterwards (``seek_to_beginning``) goes where it says.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.consumer.subscription import (
    EARLIEST,
    NO_RESET,
    NoOffsetForPartitionError,
    SubscriptionState,
)
from kafkette.testing import MemoryCluster

TOPIC = "events"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


def test_new_partitions_of_a_group_consumer_wait_for_their_committed_offset() -> None:
    """Until the committed offset is read, even ``none`` awaits; a reset clears the lookup."""
    state = SubscriptionState(NO_RESET, committed_first=True)
    state.assign([P0, P1])
    assert state.awaiting_committed() == [P0, P1]
    assert state.awaiting_reset() == {P0: NO_RESET, P1: NO_RESET}
    assert state.missing_positions() == []
    state.request_reset(P1, EARLIEST)
    assert state.awaiting_committed() == [P0]
    state.state(P0).committed_first = False  # read: nothing committed
    assert state.missing_positions() == [P0]
    assert state.awaiting_reset() == {P1: EARLIEST}


def test_without_a_group_nothing_is_looked_up() -> None:
    state = SubscriptionState(EARLIEST)
    state.assign([P0])
    assert state.awaiting_committed() == []
    assert state.awaiting_reset() == {P0: EARLIEST}


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    """Two partitions of five records each; group ``g`` committed offset 3 on partition 0."""
    with MemoryCluster() as cluster:
        servers = cluster.bootstrap_servers
        with AdminClient(bootstrap_servers=servers) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)]).all()
        with Producer(bootstrap_servers=servers) as producer:
            for partition in (0, 1):
                for i in range(5):
                    producer.send(TOPIC, f"{partition}-{i}".encode(), partition=partition)
            producer.flush()
        with Consumer(bootstrap_servers=servers, group_id="g") as committer:
            committer.assign([P0])
            committer.commit({P0: 3})
        yield cluster


def _read(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    for _ in range(50):
        for records in consumer.poll(timeout=0.2).values():
            values += [r.value for r in records if r.value is not None]
        if len(values) >= count:
            break
    return sorted(values)


def test_assign_starts_at_the_groups_committed_offset(cluster: MemoryCluster) -> None:
    """Partition 0 resumes at the committed 3; partition 1 (nothing committed) by the reset."""
    with Consumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id="g", auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([P0, P1])
        assert _read(consumer, 7) == [b"0-3", b"0-4", b"1-0", b"1-1", b"1-2", b"1-3", b"1-4"]
        assert consumer.position(P0) == 5


def test_seek_to_beginning_overrides_the_committed_offset(cluster: MemoryCluster) -> None:
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g") as consumer:
        consumer.assign([P0])
        consumer.seek_to_beginning(P0)
        assert _read(consumer, 5) == [b"0-0", b"0-1", b"0-2", b"0-3", b"0-4"]


def test_reset_none_uses_a_committed_offset_and_refuses_without_one(
    cluster: MemoryCluster,
) -> None:
    """auto.offset.reset=none: partition 0 starts at its commit; partition 1 has no position."""
    servers = cluster.bootstrap_servers
    with Consumer(bootstrap_servers=servers, group_id="g", auto_offset_reset="none") as consumer:
        consumer.assign([P0])
        assert consumer.position(P0, timeout=5) == 3
    with Consumer(bootstrap_servers=servers, group_id="g", auto_offset_reset="none") as consumer:
        consumer.assign([P1])
        with pytest.raises(NoOffsetForPartitionError, match="events-1"):
            for _ in range(50):
                consumer.poll(timeout=0.1)
