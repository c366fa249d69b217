"""Our ShareConsumer and AsyncShareConsumer against ``memory://``: acknowledgement
types, both acknowledgement modes, lock expiry on the cluster's clock, the delivery-count
limit, close and the acknowledgement-commit callback."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest

from kafkette import (
    AcknowledgeType,
    AsyncShareConsumer,
    Consumer,
    Producer,
    ShareConsumer,
    ShareConsumerRecord,
    TopicPartition,
)
from kafkette.errors import (
    ConfigError,
    GroupIdNotFoundError,
    IllegalStateError,
    InvalidRecordStateError,
)
from kafkette.testing import MemoryCluster
from tests.consumer.share import scenario

LOCK_MS = 2_000
BATCHED = 60_000
"""The producers' linger.ms: the records of one :func:`produce` go in one batch (sent by
its flush), so a fetch that is out (the consumer fetches ahead) gets all of them or none."""


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    with MemoryCluster(
        num_partitions=1,
        group_share_heartbeat_interval_ms=100,
        group_share_record_lock_duration_ms=LOCK_MS,
        group_share_delivery_count_limit=3,
    ) as cluster:
        yield cluster


def member(cluster: MemoryCluster, mode: str = "explicit", group: str = "g") -> ShareConsumer:
    consumer = ShareConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        share_acknowledgement_mode=mode,
    )
    consumer.subscribe(["t"])
    return consumer


def started(cluster: MemoryCluster, consumer: ShareConsumer, producer: Producer) -> None:
    """Poll until a probe arrives (the share partition then exists), accept it."""
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "no probe delivered"
        producer.send("t", b"probe")
        producer.flush(10)
        records = consumer.poll(timeout=0.3)
        if records:
            if consumer.config.share_acknowledgement_mode == "explicit":
                for record in records:
                    consumer.acknowledge(record)
            consumer.commit_sync(timeout=10)
            return


def values(records: list[ShareConsumerRecord]) -> list[tuple[int, bytes, int]]:
    return [(r.offset, r.value, r.delivery_count) for r in records]


def poll_until(consumer: ShareConsumer, count: int) -> list[ShareConsumerRecord]:
    got: list[ShareConsumerRecord] = []
    deadline = time.monotonic() + 20
    while len(got) < count:
        assert time.monotonic() < deadline, f"got only {values(got)}"
        got += consumer.poll(timeout=0.3)
    return got


def produce(producer: Producer, *items: bytes) -> int:
    """Produce ``items`` in one batch; the offset of the first."""
    futures = [producer.send("t", item) for item in items]
    producer.flush(10)
    return futures[0].result(10).offset


def test_three_members_accept_release_and_reject() -> None:
    """Three explicit members of one group over three partitions: each record accepted
    exactly once or rejected, released ones back with a higher delivery count."""
    with (
        MemoryCluster(num_partitions=3, group_share_heartbeat_interval_ms=100) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer,
    ):
        members: list[scenario.Member] = [
            scenario.Ours(cluster.bootstrap_servers, "three", "queue") for _ in range(3)
        ]
        try:
            seen = scenario.run(producer, members, "queue", partitions=3, count=60)
        finally:
            for m in members:
                m.close()
    scenario.check(seen, 60)


def test_released_comes_back_rejected_never_and_the_callback_hears(
    cluster: MemoryCluster,
) -> None:
    done: list[tuple[dict[TopicPartition, set[int]], Exception | None]] = []
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as consumer,
    ):
        consumer.set_acknowledgement_commit_callback(lambda o, e: done.append((o, e)))
        assert consumer.acquisition_lock_timeout_ms() is None  # nothing fetched yet
        started(cluster, consumer, producer)
        assert consumer.acquisition_lock_timeout_ms() == LOCK_MS
        first = produce(producer, b"a", b"b", b"c")
        records = poll_until(consumer, 3)
        assert values(records) == [(first, b"a", 1), (first + 1, b"b", 1), (first + 2, b"c", 1)]
        consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(records[1], AcknowledgeType.RELEASE)
        with pytest.raises(IllegalStateError, match="All records must be acknowledged"):
            consumer.poll(timeout=0)
        consumer.acknowledge(records[2], AcknowledgeType.REJECT)
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            consumer.acknowledge(records[2], AcknowledgeType.ACCEPT)
        again = poll_until(consumer, 1)  # the acknowledgements ride on this fetch
        assert values(again) == [(first + 1, b"b", 2)]
        consumer.acknowledge(again[0])
        assert consumer.commit_sync(timeout=10) == {TopicPartition("t", 0): None}
        assert consumer.poll(timeout=0.3) == []
    tp = TopicPartition("t", 0)
    assert done[-2:] == [({tp: {first, first + 1, first + 2}}, None), ({tp: {first + 1}}, None)]


def test_commit_async_reports_through_the_callback_at_a_later_poll(
    cluster: MemoryCluster,
) -> None:
    done: list[tuple[dict[TopicPartition, set[int]], Exception | None]] = []
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as consumer,
    ):
        started(cluster, consumer, producer)
        consumer.set_acknowledgement_commit_callback(lambda o, e: done.append((o, e)))
        first = produce(producer, b"p", b"q")
        for record in poll_until(consumer, 2):
            consumer.acknowledge(record, AcknowledgeType.REJECT)
        consumer.commit_async()
        deadline = time.monotonic() + 10
        while not done:
            assert time.monotonic() < deadline, "the callback was never called"
            assert consumer.poll(timeout=0.1) == []  # rejected: never back
        assert done == [({TopicPartition("t", 0): {first, first + 1}}, None)]


def test_implicit_mode_accepts_the_previous_poll_and_refuses_acknowledge(
    cluster: MemoryCluster,
) -> None:
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster, "implicit") as consumer,
        member(cluster, "implicit") as other,
    ):
        started(cluster, consumer, producer)
        first = produce(producer, b"x", b"y")
        records = poll_until(consumer, 2)
        assert values(records) == [(first, b"x", 1), (first + 1, b"y", 1)]
        with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
            consumer.acknowledge(records[0], AcknowledgeType.RELEASE)
        assert consumer.poll(timeout=0.2) == []  # accepted x and y
        cluster.advance(LOCK_MS / 1000 + 1)
        assert other.poll(timeout=0.3) == []  # nothing came back after the lock duration


def test_a_lock_that_expires_gives_the_records_to_another_member(cluster: MemoryCluster) -> None:
    """Held past group.share.record.lock.duration.ms (the cluster's clock moved on),
    records go to another member with delivery count 2; the late holder's ACCEPT is
    refused with INVALID_RECORD_STATE."""
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as holder,
        member(cluster) as other,
    ):
        started(cluster, holder, producer)
        first = produce(producer, b"j0", b"j1", b"j2")
        held = poll_until(holder, 3)
        assert other.poll(timeout=0.2) == []
        cluster.advance(LOCK_MS / 1000 + 0.5)
        got = poll_until(other, 3)
        assert values(got) == [(first + i, b"j%d" % i, 2) for i in range(3)]
        for record in held:
            holder.acknowledge(record)
        result = holder.commit_sync(timeout=10)
        assert isinstance(result[TopicPartition("t", 0)], InvalidRecordStateError)


def test_renew_keeps_the_lock(cluster: MemoryCluster) -> None:
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as holder,
        member(cluster) as other,
    ):
        started(cluster, holder, producer)
        first = produce(producer, b"r")
        [record] = poll_until(holder, 1)
        cluster.advance(LOCK_MS * 0.75 / 1000)
        holder.acknowledge(record, AcknowledgeType.RENEW)
        assert holder.commit_sync(timeout=10) == {TopicPartition("t", 0): None}
        cluster.advance(LOCK_MS * 0.75 / 1000)  # past the first lock, within the renewed one
        assert other.poll(timeout=0.3) == []
        assert holder.poll(timeout=0) == []  # renewed counts as acknowledged
        holder.acknowledge(record, AcknowledgeType.ACCEPT)
        assert holder.commit_sync(timeout=10) == {TopicPartition("t", 0): None}
        cluster.advance(LOCK_MS / 1000 + 1)
        assert other.poll(timeout=0.3) == []
        assert record.offset == first


def test_the_delivery_count_limit_archives(cluster: MemoryCluster) -> None:
    """group.share.delivery.count.limit=3: released three times, the record is archived."""
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as consumer,
    ):
        started(cluster, consumer, producer)
        first = produce(producer, b"poison")
        counts = []
        for _ in range(3):
            [record] = poll_until(consumer, 1)
            counts.append(record.delivery_count)
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
        assert counts == [1, 2, 3]
        assert consumer.poll(timeout=0.3) == []
        produce(producer, b"next")
        assert values(poll_until(consumer, 1)) == [(first + 1, b"next", 1)]


def test_close_gives_back_what_it_holds_and_leaves(cluster: MemoryCluster) -> None:
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster) as other,
    ):
        holder = member(cluster)
        started(cluster, holder, producer)
        first = produce(producer, b"h0", b"h1")
        assert len(poll_until(holder, 2)) == 2
        holder.close()
        holder.close()  # idempotent
        with pytest.raises(IllegalStateError, match="closed"):
            holder.poll(timeout=0)
        # At once, not after the lock duration: the closed session gave them back, their
        # delivery count lowered again (Kafka's SharePartition.releaseAcquiredRecords).
        assert values(poll_until(other, 2)) == [(first, b"h0", 1), (first + 1, b"h1", 1)]


def test_implicit_close_accepts_the_last_poll_and_leaves_the_group(
    cluster: MemoryCluster,
) -> None:
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster, "implicit") as other,
    ):
        holder = member(cluster, "implicit")
        started(cluster, holder, producer)
        members = cluster._broker.share_groups.groups["g"].members
        assert holder._core.membership.member_id in members
        produce(producer, b"i0", b"i1")
        assert len(poll_until(holder, 2)) == 2
        holder.close()
        assert holder._core.membership.member_id not in members  # left: epoch -1
        assert len(members) == 1
        cluster.advance(LOCK_MS / 1000 + 1)
        assert other.poll(timeout=0.3) == []  # accepted by the close


def test_records_fetched_and_never_handed_out_go_back_with_the_close(
    cluster: MemoryCluster,
) -> None:
    """A poll that finds nothing starts a fetch and returns at its timeout (0 here); the
    answer waits in the consumer, its records acquired. The close gives them back
    unaccepted (implicit mode accepts only what polls handed out) with their delivery
    count lowered, and the next poll of another member gets them at once."""
    with (
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=BATCHED) as producer,
        member(cluster, "implicit") as other,
    ):
        holder = member(cluster, "implicit")
        started(cluster, holder, producer)
        first = produce(producer, b"b0", b"b1")
        assert holder.poll(timeout=0) == []  # nothing buffered yet: a fetch goes out
        deadline = time.monotonic() + 10
        while True:  # the answer came: both acquired by the holder
            state = cluster.share_partition_state("g", "t", 0)
            member_id = holder._core.membership.member_id
            if state is not None and state.acquired == {first: member_id, first + 1: member_id}:
                break
            assert time.monotonic() < deadline, f"never acquired: {state}"
            time.sleep(0.01)
        holder.close()
        state = cluster.share_partition_state("g", "t", 0)
        assert state is not None
        assert [(r.offset, r.state, r.delivery_count) for r in state.records[-2:]] == [
            (first, "AVAILABLE", 0),
            (first + 1, "AVAILABLE", 0),
        ]
        assert values(poll_until(other, 2)) == [(first, b"b0", 1), (first + 1, b"b1", 1)]


def test_bad_settings_and_calls_fail_at_once(cluster: MemoryCluster) -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        ShareConsumer(bootstrap_servers=cluster.bootstrap_servers)
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        ShareConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            share_acknowledgement_mode="sometimes",
        )
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g") as consumer:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            consumer.poll(timeout=0)
        with pytest.raises(ValueError, match="needs topics"):
            consumer.subscribe([])
        consumer.subscribe("t")
        assert consumer.subscription() == {"t"}
        consumer.unsubscribe()
        assert consumer.subscription() == set()


def test_a_group_id_held_by_a_consumer_group_is_refused(cluster: MemoryCluster) -> None:
    """The broker's GROUP_ID_NOT_FOUND for the heartbeat is raised by poll, not retried."""
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        producer.send_and_wait("t", b"x", timeout=10)  # the topic
    with Consumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id="taken", group_protocol="consumer"
    ) as classic:
        classic.subscribe(["t"])
        deadline = time.monotonic() + 20
        while not classic.assignment():
            assert time.monotonic() < deadline, "the consumer group never formed"
            classic.poll(timeout=0.2)
        with member(cluster, group="taken") as consumer:
            with pytest.raises(GroupIdNotFoundError, match="not a share group"):
                while time.monotonic() < deadline:
                    consumer.poll(timeout=0.2)
            with pytest.raises(GroupIdNotFoundError):
                consumer.poll(timeout=0)  # still: the error stays until subscribe again


@pytest.mark.anyio
async def test_async_share_consumers_release_reject_and_accept() -> None:
    """Two explicit async members: the released record comes back with count 2, the
    rejected one never, the rest once; then an implicit one accepts by polling again."""
    async with MemoryCluster(num_partitions=1, group_share_heartbeat_interval_ms=100) as cluster:
        settings = {
            "bootstrap_servers": cluster.bootstrap_servers,
            "group_id": "ag",
            "share_acknowledgement_mode": "explicit",
        }
        done: list[tuple[dict[TopicPartition, set[int]], Exception | None]] = []

        async def remember(
            offsets: dict[TopicPartition, set[int]], error: Exception | None
        ) -> None:
            done.append((offsets, error))

        producer = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0)
        try:
            async with AsyncShareConsumer(settings) as a, AsyncShareConsumer(settings) as b:
                a.set_acknowledgement_commit_callback(remember)
                a.subscribe(["t"])
                b.subscribe(["t"])
                with anyio.fail_after(30):
                    probed = False
                    while not probed:
                        await anyio.to_thread.run_sync(producer.send_and_wait, "t", b"probe")
                        for consumer in (a, b):
                            for record in await consumer.poll(timeout=0.3):
                                consumer.acknowledge(record)
                                probed = True
                    first = (
                        await anyio.to_thread.run_sync(producer.send_and_wait, "t", b"a")
                    ).offset
                    for value in (b"b", b"c", b"d"):
                        producer.send("t", value)
                    await anyio.to_thread.run_sync(producer.flush, 10)
                    seen: list[tuple[str, int, bytes, int]] = []
                    while {v for _, _, v, c in seen} != {b"a", b"b", b"c", b"d"} or not any(
                        v == b"b" and c == 2 for _, _, v, c in seen
                    ):
                        for name, consumer in (("a", a), ("b", b)):
                            for record in await consumer.poll(timeout=0.2):
                                seen.append(
                                    (name, record.offset, record.value, record.delivery_count)
                                )
                                decision = {
                                    b"b": AcknowledgeType.RELEASE
                                    if record.delivery_count == 1
                                    else AcknowledgeType.ACCEPT,
                                    b"c": AcknowledgeType.REJECT,
                                }.get(record.value, AcknowledgeType.ACCEPT)
                                consumer.acknowledge(record, decision)
                            await consumer.commit(timeout=10)
                    assert await a.poll(timeout=0.2) == [] and await b.poll(timeout=0.2) == []
            deliveries = sorted((offset, value, count) for _, offset, value, count in seen)
            assert deliveries == [
                (first, b"a", 1),
                (first + 1, b"b", 1),
                (first + 1, b"b", 2),
                (first + 2, b"c", 1),
                (first + 3, b"d", 1),
            ]
            assert all(error is None for _, error in done) and done
            implicit = dict(settings, share_acknowledgement_mode="implicit")
            async with AsyncShareConsumer(implicit) as c:
                c.subscribe(["t"])
                with anyio.fail_after(30):
                    got = []
                    while not got:
                        await anyio.to_thread.run_sync(producer.send_and_wait, "t", b"e")
                        got = await c.poll(timeout=0.3)
                    assert [r.value for r in got] == [b"e"] * len(got)
                    assert await c.poll(timeout=0.3) == []
        finally:
            await anyio.to_thread.run_sync(producer.close)
