"""Our consumer with group.protocol=consumer (KIP-848) on the in-process broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkette import (
    AdminClient,
    AsyncConsumer,
    Consumer,
    ConsumerRecord,
    NewTopic,
    Producer,
    TopicPartition,
)
from kafkette.consumer.group.heartbeat_member import HeartbeatMember
from kafkette.testing import MemoryCluster, close_memory_cluster, memory_cluster
from tests.consumer.group.helpers import Event, Recorder, apoll_until, numbers, poll_until
from tests.consumer.targets import Target

PROPERTIES = {"group.consumer.heartbeat.interval.ms": "100"}


@pytest.fixture
def target() -> Iterator[Target]:
    url = memory_cluster(f"kip848-{uuid.uuid4().hex[:8]}", properties=PROPERTIES)
    made = Target("memory", url)
    try:
        yield made
    finally:
        made.close()
        close_memory_cluster(url)


def settings(target: Target, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": target.bootstrap,
        "group_id": group,
        "group_protocol": "consumer",
        "fetch_max_wait_ms": 100,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        **extra,
    }


def values(records: list[ConsumerRecord]) -> list[bytes]:
    return sorted(r.value for r in records)


def test_two_members_split_and_hand_over(target: Target) -> None:
    """The first member owns all 4 partitions; a second joins and gets 2, which the
    first revokes first (its listener sees only those 2 revoked, the second only its 2
    assigned); when the second closes, the first takes them back. Every record is read
    once across the members."""
    target.create_topic("t", 4)
    for p in range(4):
        target.produce_values(TopicPartition("t", p), 5)
    log: list[Event] = []
    records: list[ConsumerRecord] = []
    with Consumer(settings(target, "g")) as a:
        a.subscribe(["t"], listener=Recorder("a", log))
        assert isinstance(a._core.group, HeartbeatMember)
        poll_until([a], lambda: len(a.assignment()) == 4 and len(records) == 20, records)
        a.commit()
        assert log == [("a", "assigned", [0, 1, 2, 3])]
        log.clear()
        with Consumer(settings(target, "g")) as b:
            b.subscribe(["t"], listener=Recorder("b", log))
            poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, records)
            moved = numbers(b.assignment())
            assert log == [("a", "revoked", moved), ("b", "assigned", moved)]
            for p in range(4):
                target.produce_values(TopicPartition("t", p), 5, start=5)
            poll_until([a, b], lambda: len(records) == 40, records)
            b.commit()
            a.commit()
            log.clear()
        poll_until([a], lambda: len(a.assignment()) == 4, records)
        assert log == [("b", "revoked", moved), ("a", "assigned", moved)]
        for p in range(4):
            target.produce_values(TopicPartition("t", p), 1, start=10)
        poll_until([a], lambda: len(records) == 44, records)
    expected = sorted(b"v%d" % i for i in range(11) for _ in range(4))
    assert values(records) == expected


def test_pattern_subscription_picks_up_a_new_topic(target: Target) -> None:
    """A pattern goes to the broker as SubscribedTopicRegex: the member gets the matching
    topic's partitions, then those of a matching topic created later, never others."""
    target.create_topic("orders-1", 2)
    target.create_topic("other", 1)
    log: list[Event] = []
    with Consumer(settings(target, "g")) as a:
        a.subscribe("^orders-.*", listener=Recorder("a", log))
        poll_until([a], lambda: len(a.assignment()) == 2)
        target.create_topic("orders-2", 1)
        poll_until([a], lambda: len(a.assignment()) == 3)
        assert a.assignment() == {
            TopicPartition("orders-1", 0),
            TopicPartition("orders-1", 1),
            TopicPartition("orders-2", 0),
        }
    assert log == [("a", "assigned", [0, 1]), ("a", "assigned", [0]), ("a", "revoked", [0, 0, 1])]


def test_commit_carries_the_member_epoch(target: Target) -> None:
    """A member's commit is stored (the broker checks its epoch) and read back by the
    next member of the group, which starts there."""
    target.create_topic("t", 1)
    target.produce_values(TopicPartition("t", 0), 10)
    records: list[ConsumerRecord] = []
    with Consumer(settings(target, "g")) as a:
        a.subscribe(["t"])
        poll_until([a], lambda: len(records) == 10, records)
        a.commit({TopicPartition("t", 0): 4})
    later: list[ConsumerRecord] = []
    with Consumer(settings(target, "g")) as b:
        b.subscribe(["t"])
        poll_until([b], lambda: len(later) == 6, later)
    assert [r.offset for r in later] == [4, 5, 6, 7, 8, 9]


def test_member_that_stops_polling_leaves_and_rejoins(target: Target) -> None:
    """A member that does not poll within max.poll.interval.ms leaves the group (its
    partitions go to the other member); its next poll reports them lost and it joins
    again, after which the two split the partitions once more."""
    target.create_topic("t", 2)
    log: list[Event] = []
    slow_settings = settings(target, "g", max_poll_interval_ms=1_000)
    with Consumer(slow_settings) as a, Consumer(settings(target, "g")) as b:
        a.subscribe(["t"], listener=Recorder("a", log))
        b.subscribe(["t"], listener=Recorder("b", log))
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 1)
        kept = numbers(a.assignment())
        log.clear()
        poll_until([b], lambda: len(b.assignment()) == 2)  # a does not poll meanwhile
        assert a._core.group is not None
        assert a._core.group.state.value == "UNSUBSCRIBED"
        assert log == [("b", "assigned", kept)]
        log.clear()
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 1)
        assert log[0] == ("a", "lost", kept)
        assert ("a", "assigned", numbers(a.assignment())) in log


def test_member_survives_a_coordinator_move() -> None:
    """On three simulated nodes, the group's coordinator moves while the member runs: it
    finds the new coordinator (NOT_COORDINATOR at the old one) and goes on with the same
    member id and epoch, which the new coordinator accepts for its commit; every record
    is read once."""
    with MemoryCluster(brokers=3, group_consumer_heartbeat_interval_ms=50) as cluster:
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("t", 2)]).all()
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            for i in range(4):
                producer.send("t", b"a%d" % i, partition=i % 2)
        target = Target("memory", cluster.bootstrap_servers)
        got: list[ConsumerRecord] = []
        with Consumer(settings(target, "g")) as consumer:
            consumer.subscribe(["t"])
            poll_until([consumer], lambda: len(got) == 4, got)
            consumer.commit()
            before = consumer.group_metadata()
            cluster.move_coordinator("g", cluster.coordinator("g") % 3 + 1)
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for i in range(4):
                    producer.send("t", b"b%d" % i, partition=i % 2)
            poll_until([consumer], lambda: len(got) == 8, got)
            consumer.commit()
            assert consumer.group_metadata() == before
        assert values(got) == sorted(
            [b"a%d" % i for i in range(4)] + [b"b%d" % i for i in range(4)]
        )
        assert cluster.committed("g") == {TopicPartition("t", 0): 4, TopicPartition("t", 1): 4}


@pytest.mark.anyio
async def test_async_members_split_and_resubscribe(target: Target) -> None:
    """Two AsyncConsumers split 4 partitions 2/2; one unsubscribes (leaving with epoch -1,
    its partitions revoked) and the other takes all 4; it subscribes again and they
    split once more."""
    target.create_topic("t", 4)
    log: list[Event] = []
    async with AsyncConsumer(settings(target, "g")) as a, AsyncConsumer(settings(target, "g")) as b:
        a.subscribe(["t"], listener=Recorder("a", log))
        b.subscribe(["t"], listener=Recorder("b", log))
        await apoll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        mine = numbers(b.assignment())
        log.clear()
        await b.unsubscribe()
        assert log == [("b", "revoked", mine)]
        await apoll_until([a], lambda: len(a.assignment()) == 4)
        b.subscribe(["t"], listener=Recorder("b", log))
        await apoll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        assert sorted(numbers(a.assignment()) + numbers(b.assignment())) == [0, 1, 2, 3]


def test_sync_auto_commit_under_the_consumer_protocol(target: Target) -> None:
    """enable.auto.commit (the default) with a sync consumer: the periodic commit starts
    from poll, which runs in the caller's thread, and lands the consumed offsets."""
    target.create_topic("auto", 2)
    for p in range(2):
        target.produce_values(TopicPartition("auto", p), 3)
    records: list[ConsumerRecord] = []
    config = settings(target, "auto-g", enable_auto_commit=True, auto_commit_interval_ms=50)
    with Consumer(config) as consumer, AdminClient(bootstrap_servers=target.bootstrap) as admin:
        consumer.subscribe(["auto"])
        poll_until([consumer], lambda: len(records) == 6, records)

        def committed() -> dict[int, int]:
            found = admin.list_consumer_group_offsets("auto-g").all()
            return {tp.partition: meta.offset for tp, meta in found.items() if meta}

        poll_until([consumer], lambda: committed() == {0: 3, 1: 3})
    assert values(records) == sorted(b"v%d" % i for i in range(3) for _ in range(2))
