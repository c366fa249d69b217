"""Rebalances: cooperative (KIP-429), max.poll.interval.ms, static members, patterns."""

from __future__ import annotations

import re
import uuid

import anyio
import pytest

from kafkette import AsyncAdminClient, AsyncConsumer, Consumer, NewPartitions, TopicPartition
from kafkette.errors import FencedInstanceIdError
from kafkette.testing import ManualClock, close_memory_cluster, memory_cluster
from kafkette.testing.clock import DEFAULT_START_MS
from tests.consumer.group.helpers import Event, Recorder, apoll_until, numbers, poll_until
from tests.consumer.group.test_membership import settings, split_in_two
from tests.consumer.targets import Target


def cooperative(target: Target, group: str) -> dict[str, object]:
    return settings(target, group, partition_assignment_strategy=["cooperative-sticky"])


@pytest.mark.anyio
async def test_cooperative_third_member_only_moved_partitions_are_revoked_async(
    group_target: Target, topic: str, group: str
) -> None:
    group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = cooperative(group_target, group)
    async with AsyncConsumer(config) as a, AsyncConsumer(config) as b:
        a.subscribe([topic], listener=Recorder("a", log))
        b.subscribe([topic], listener=Recorder("b", log))
        await apoll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        before = {"a": numbers(a.assignment()), "b": numbers(b.assignment())}
        assert sorted(before["a"] + before["b"]) == [0, 1, 2, 3]
        log.clear()
        async with AsyncConsumer(config) as c:
            c.subscribe([topic], listener=Recorder("c", log))
            await apoll_until(
                [a, b, c],
                lambda: sorted(len(x.assignment()) for x in (a, b, c)) == [1, 1, 2],
            )
            after = {n: numbers(x.assignment()) for n, x in (("a", a), ("b", b), ("c", c))}
            # One of a, b gave up exactly the partition c now has; nobody else revoked.
            revoked = [e for e in log if e[1] == "revoked"]
            assert len(revoked) == 1
            giver = revoked[0][0]
            assert revoked[0][2] == after["c"]
            assert sorted(after[giver] + after["c"]) == before[giver]
            keeper = "b" if giver == "a" else "a"
            assert after[keeper] == before[keeper]
            assert ("c", "assigned", after["c"]) in log
            assert not [e for e in log if e[0] in "ab" and e[1] == "assigned" and e[2]]
            assert not [e for e in log if e[1] == "lost"]


def test_cooperative_third_member_sync(group_target: Target, topic: str, group: str) -> None:
    group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = cooperative(group_target, group)
    with Consumer(config) as a, Consumer(config) as b:
        a.subscribe([topic], listener=Recorder("a", log))
        b.subscribe([topic], listener=Recorder("b", log))
        poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        before = {"a": numbers(a.assignment()), "b": numbers(b.assignment())}
        log.clear()
        with Consumer(config) as c:
            c.subscribe([topic], listener=Recorder("c", log))
            poll_until(
                [a, b, c],
                lambda: sorted(len(x.assignment()) for x in (a, b, c)) == [1, 1, 2],
            )
            after = {n: numbers(x.assignment()) for n, x in (("a", a), ("b", b), ("c", c))}
            revoked = [e for e in log if e[1] == "revoked"]
            assert len(revoked) == 1 and revoked[0][2] == after["c"]
            giver = revoked[0][0]
            assert sorted(after[giver] + after["c"]) == before[giver]


@pytest.mark.anyio
async def test_member_that_stops_polling_leaves_and_rejoins_on_poll(
    group_target: Target, topic: str, group: str
) -> None:
    """Past max.poll.interval.ms the member leaves; the other takes everything; the next
    poll reports the partitions lost and rejoins."""
    group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = settings(group_target, group, max_poll_interval_ms=600)
    async with AsyncConsumer(config) as a, AsyncConsumer(config) as b:
        a.subscribe([topic], listener=Recorder("a", log))
        b.subscribe([topic], listener=Recorder("b", log))
        await apoll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
        had = numbers(a.assignment())
        log.clear()
        await apoll_until([b], lambda: len(b.assignment()) == 4)  # a does not poll
        assert a.group_metadata().generation_id == -1
        assert a.group_metadata().member_id == ""
        assert [e for e in log if e[0] == "a"] == []
        await apoll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
        assert [e for e in log if e[0] == "a"] == [
            ("a", "lost", had),
            ("a", "assigned", numbers(a.assignment())),
        ]


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(
    group_target: Target, topic: str, group: str
) -> None:
    """A static member closed and back within the session timeout gets the same
    partitions; the other member sees no rebalance (no listener call, same generation)."""
    group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = settings(group_target, group)
    with Consumer(config, group_instance_id="static-b") as b:
        b.subscribe([topic], listener=Recorder("b", log))
        a = Consumer(config, group_instance_id="static-a")
        try:
            a.subscribe([topic], listener=Recorder("a", log))
            poll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
            had = numbers(a.assignment())
            generation = b.group_metadata().generation_id
            log.clear()
        finally:
            a.close()
        assert log == [("a", "revoked", had)]
        log.clear()
        with Consumer(config, group_instance_id="static-a") as again:
            again.subscribe([topic], listener=Recorder("a", log))
            poll_until([again, b], lambda: bool(again.assignment()))
            assert numbers(again.assignment()) == had
            for _ in range(5):
                b.poll(timeout_ms=50)
            assert b.group_metadata().generation_id == generation
            assert log == [("a", "assigned", had)]


@pytest.mark.anyio
async def test_pattern_subscription_follows_new_topics(
    group_target: Target, topic: str, group: str
) -> None:
    """A topic created later that matches the pattern joins the assignment after a
    metadata refresh (metadata.max.age.ms)."""
    group_target.create_topic(f"{topic}-a", 2)
    group_target.create_topic(f"other-{topic}", 1)
    log: list[Event] = []
    config = settings(group_target, group, metadata_max_age_ms=300)
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe(re.compile(re.escape(topic) + "-.*"), listener=Recorder("c", log))
        await apoll_until([consumer], lambda: len(consumer.assignment()) == 2)
        assert consumer.subscription() == {f"{topic}-a"}
        group_target.create_topic(f"{topic}-b", 1)
        await apoll_until([consumer], lambda: len(consumer.assignment()) == 3)
        assert consumer.subscription() == {f"{topic}-a", f"{topic}-b"}
        assert sorted(consumer.assignment()) == [
            TopicPartition(f"{topic}-a", 0),
            TopicPartition(f"{topic}-a", 1),
            TopicPartition(f"{topic}-b", 0),
        ]


@pytest.mark.anyio
async def test_more_partitions_make_the_leader_rebalance(
    group_target: Target, topic: str, group: str
) -> None:
    """The leader watches its group's topics: a partition count change triggers a rejoin."""
    group_target.create_topic(topic, 2)
    config = settings(group_target, group, metadata_max_age_ms=300)
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe([topic])
        await apoll_until([consumer], lambda: len(consumer.assignment()) == 2)
        async with AsyncAdminClient(bootstrap_servers=group_target.bootstrap) as admin:
            (await admin.create_partitions({topic: NewPartitions(3)})).all()
        await apoll_until([consumer], lambda: len(consumer.assignment()) == 3)
        assert numbers(consumer.assignment()) == [0, 1, 2]


@pytest.mark.anyio
async def test_async_listener_methods_are_awaited(
    group_target: Target, topic: str, group: str
) -> None:
    group_target.create_topic(topic, 2)
    log: list[Event] = []

    class AsyncRecorder:
        async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            await anyio.sleep(0)
            log.append(("x", "assigned", numbers(partitions)))

        async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            await anyio.sleep(0)
            log.append(("x", "revoked", numbers(partitions)))

    async with AsyncConsumer(settings(group_target, group)) as consumer:
        consumer.subscribe([topic], listener=AsyncRecorder())
        await apoll_until([consumer], lambda: len(consumer.assignment()) == 2)
        assert log == [("x", "assigned", [0, 1])]
        await consumer.unsubscribe()
        assert log == [("x", "assigned", [0, 1]), ("x", "revoked", [0, 1])]
        assert consumer.assignment() == set()
        assert consumer.subscription() == set()


def test_second_member_with_the_same_instance_id_fences_the_first(
    group_target: Target, topic: str, group: str
) -> None:
    """Static membership: a newer member with the same group.instance.id takes over; the
    old one's poll raises FencedInstanceIdError (fatal, as in Java)."""
    group_target.create_topic(topic, 2)
    config = settings(group_target, group, group_instance_id="only-one")
    with Consumer(config) as old, Consumer(config) as new:
        old.subscribe([topic])
        poll_until([old], lambda: len(old.assignment()) == 2)
        new.subscribe([topic])
        poll_until([new], lambda: len(new.assignment()) == 2)
        with pytest.raises(FencedInstanceIdError):
            poll_until([old], lambda: False)


@pytest.mark.anyio
async def test_crashed_member_loses_its_partitions_when_its_session_expires(
    topic: str, group: str
) -> None:
    """memory:// on a ManualClock: a member that vanishes without LeaveGroup keeps its
    partitions until the broker's clock passes its session timeout; then the survivor,
    still heartbeating, gets everything."""
    clock = ManualClock()
    url = memory_cluster(
        f"crash-{uuid.uuid4().hex[:8]}",
        clock=clock,
        properties={"group.min.session.timeout.ms": "500"},
    )
    target = Target("memory", url)
    try:
        target.create_topic(topic, 4)
        log: list[Event] = []
        # The broker's fetch long-poll waits in broker time, which stands still here.
        config = settings(target, group, session_timeout_ms=1_000, fetch_max_wait_ms=0)
        async with AsyncConsumer(config) as a, AsyncConsumer(config) as b:
            a.subscribe([topic], listener=Recorder("a", log))
            b.subscribe([topic], listener=Recorder("b", log))
            await apoll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
            kept = numbers(b.assignment())
            log.clear()
            await a._c.close()  # a crash: no commit, no listener, no LeaveGroup
            for _ in range(3):  # broker time stands still: nothing moves
                await b.poll(timeout_ms=100)
            assert numbers(b.assignment()) == kept
            while len(b.assignment()) < 4:
                clock.advance(300)
                await b.poll(timeout_ms=250)  # b heartbeats meanwhile (every 200 ms)
                assert clock.now_ms < DEFAULT_START_MS + 10_000, "b never got a's partitions"
            assert log == [("b", "revoked", kept), ("b", "assigned", [0, 1, 2, 3])]
    finally:
        target.close()
        close_memory_cluster(url)


@pytest.mark.anyio
async def test_unsubscribe_during_a_join_leaves_the_group(
    group_target: Target, topic: str, group: str
) -> None:
    group_target.create_topic(topic, 4)
    config = settings(group_target, group)
    async with AsyncConsumer(config) as a, AsyncConsumer(config) as b:
        a.subscribe([topic])
        await apoll_until([a], lambda: len(a.assignment()) == 4)
        b.subscribe([topic])
        await b.poll(timeout_ms=0)  # b's JoinGroup is on its way
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.unsubscribe)
            await apoll_until([a], lambda: b.subscription() == set())
        for _ in range(5):
            await a.poll(timeout_ms=50)
            await b.poll(timeout_ms=50)
        assert len(a.assignment()) == 4
        assert b.assignment() == set()
        assert b.group_metadata().generation_id == -1
        assert a.group_metadata().generation_id >= 1
