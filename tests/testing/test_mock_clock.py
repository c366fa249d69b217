"""Clients and broker under trio's MockClock(autojump_threshold=0): virtual time, no waiting.

A client keeps time on its event loop's clock (kafkette.clocks.loop_clock_ms),
and a ``MemoryCluster(in_loop=True)`` entered in the test runs its broker core
as tasks of that loop, on that loop's clock: nothing waits outside trio, so
trio jumps its clock only when clients and broker are all idle, to the
earliest deadline of either. Each test asserts the virtual time at which
something happens (to the millisecond: the broker keeps whole milliseconds)
and the records, and takes well under a second of real time.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from kafkette import AsyncConsumer, AsyncProducer, NewTopic, TopicPartition
from kafkette.admin import AsyncAdminClient
from kafkette.client import backoff
from kafkette.client.connection import BrokerConnection
from kafkette.client.inprocess import get_cluster
from kafkette.clocks import loop_clock_ms, monotonic_ms
from kafkette.consumer.assignors.base import Assignment, Subscription
from kafkette.consumer.assignors.protocol import encode_assignment, encode_subscription
from kafkette.errors import KafkaTimeoutError, MemberIdRequiredError, ProducerFencedError
from kafkette.protocol.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    MetadataRequest,
    MetadataResponse,
    SyncGroupRequest,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.testing import MemoryCluster

REAL_BUDGET_S = 1.0
"""Real seconds a test may take (its virtual time is 10 s or more)."""

MS = 0.001


def run_virtual(main: Callable[[], Awaitable[float]]) -> tuple[float, float]:
    """Run ``main`` under trio with MockClock(autojump_threshold=0); (what it returned,
    real seconds)."""
    started = time.monotonic()
    virtual = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return virtual, time.monotonic() - started


async def create(cluster: MemoryCluster, topic: str, partitions: int = 1) -> None:
    async with AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        await admin.create_topics([NewTopic(topic, partitions)])


def test_linger_runs_in_virtual_time() -> None:
    """A record sent with linger.ms=60000 is delivered after exactly 60 s of virtual time
    (under trio the sender sleeps to the deadline: no timer slack, see TIMER_SLACK_MS)."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True) as cluster:
            await create(cluster, "t")
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000
            ) as producer:
                started = trio.current_time()
                future = await producer.send("t", b"v", key=b"k")
                metadata = await future
                elapsed = trio.current_time() - started
            assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 0, 0)
            assert [(r.key, r.value, r.offset) for r in cluster.records("t")] == [(b"k", b"v", 0)]
            return elapsed

    virtual, real = run_virtual(main)
    assert virtual == pytest.approx(60.0, abs=1e-6)
    assert real < REAL_BUDGET_S


async def join_and_go_silent(
    connection: BrokerConnection, group: str, session_ms: int, rebalance_ms: int
) -> str:
    """A consumer-group member by hand (JoinGroup twice as KIP-394 asks, SyncGroup taking
    both partitions of "t"), which then never heartbeats; its member id."""
    subscription = encode_subscription(Subscription(topics=("t",)))
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription)],
    )
    first = await connection.request(request)
    assert isinstance(first, JoinGroupResponse)
    assert first.error_code == MemberIdRequiredError.code
    request.member_id = first.member_id
    joined = await connection.request(request)
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0
    both = (TopicPartition("t", 0), TopicPartition("t", 1))
    await connection.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                SyncGroupRequestAssignment(
                    member_id=joined.member_id,
                    assignment=encode_assignment(Assignment(partitions=both)),
                )
            ],
        )
    )
    return joined.member_id


def test_session_timeout_runs_in_virtual_time() -> None:
    """A member that stops heartbeating is expired at exactly session.timeout.ms (10 s)
    of virtual time after its last request (its rebalance timeout is 60 s), and a second
    member, whose join waited for it, then gets both partitions and their records."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True, group_initial_rebalance_delay_ms=0) as cluster:
            await create(cluster, "t", 2)
            async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
                for partition in (0, 1):
                    await (await producer.send("t", b"p%d" % partition, partition=partition))
            stream = get_cluster(cluster.bootstrap_servers).open_stream()
            connection = await BrokerConnection.over_stream(stream, address="silent")
            async with connection:
                silent = await join_and_go_silent(connection, "g", 10_000, 60_000)
                last_request = trio.current_time()
                both = {TopicPartition("t", 0), TopicPartition("t", 1)}
                assert cluster.assignment("g") == {silent: both}
                assigned_at: list[float] = []
                async with AsyncConsumer(
                    bootstrap_servers=cluster.bootstrap_servers,
                    group_id="g",
                    auto_offset_reset="earliest",
                ) as survivor:
                    survivor.subscribe(["t"])
                    records: list[bytes] = []
                    while len(records) < 2:
                        polled = await survivor.poll(timeout_ms=1000)
                        if polled and not assigned_at:
                            assigned_at.append(trio.current_time())
                        records += [r.value for batch in polled.values() for r in batch]
                        if trio.current_time() - last_request < 10.0 - MS:
                            assert silent in cluster.assignment("g")  # rebalancing, waiting
                    assert sorted(records) == [b"p0", b"p1"]
                    me = survivor.group_metadata().member_id
                    assert cluster.assignment("g") == {me: both}
            return assigned_at[0] - last_request

    virtual, real = run_virtual(main)
    # The survivor's JoinGroup waits for the silent member; the coordinator expires it
    # at 10 s, answers the join, and the survivor syncs and fetches at that instant.
    assert virtual == pytest.approx(10.0, abs=MS)
    assert real < REAL_BUDGET_S


def test_transaction_timeout_runs_in_virtual_time() -> None:
    """A transaction left open is aborted by the coordinator at exactly
    transaction.timeout.ms (5 s) of virtual time; its record is never read committed,
    and the producer that left it is fenced."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True) as cluster:
            await create(cluster, "t")
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers,
                transactional_id="slow",
                transaction_timeout_ms=5_000,
                linger_ms=0,
            ) as producer:
                await producer.init_transactions()
                producer.begin_transaction()
                await (await producer.send("t", b"late"))
                started = trio.current_time()  # AddPartitionsToTxn and Produce: one instant
                await trio.sleep(5.0 - MS)
                assert cluster.transactions() == {"slow": "Ongoing"}
                assert cluster.last_stable_offset("t", 0) == 0
                await trio.sleep(2 * MS)
                assert cluster.transactions() == {"slow": "CompleteAbort"}
                aborted_by = trio.current_time() - started
                with pytest.raises(ProducerFencedError):
                    await producer.commit_transaction()
            assert [r.value for r in cluster.records("t")] == [b"late"]
            assert cluster.records("t", isolation="read_committed") == []
            assert cluster.last_stable_offset("t", 0) == 2  # the record and the abort marker
            return aborted_by

    virtual, real = run_virtual(main)
    assert virtual == pytest.approx(5.001, abs=1e-6)
    assert real < REAL_BUDGET_S


def test_request_timeout_runs_in_virtual_time() -> None:
    """A Produce the broker holds for a minute (a delay fault) fails at exactly
    delivery.timeout.ms (10 s) of virtual time; the broker still serves it at 60 s,
    as a broker serves a request whose client gave up."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True) as cluster:
            await create(cluster, "t")
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers,
                linger_ms=0,
                request_timeout_ms=10_000,
                delivery_timeout_ms=10_000,
                retries=0,
            ) as producer:
                cluster.faults.delay("Produce", 60, times=1)
                started = trio.current_time()
                future = await producer.send("t", b"v")
                with pytest.raises(KafkaTimeoutError):
                    await future
                timed_out = trio.current_time() - started
            assert cluster.records("t") == []
            await trio.sleep(60 - timed_out - MS)
            assert cluster.records("t") == []
            await trio.sleep(2 * MS)
            assert [(r.value, r.offset) for r in cluster.records("t")] == [(b"v", 0)]
            return timed_out

    virtual, real = run_virtual(main)
    assert virtual == pytest.approx(10.0, abs=1e-6)
    assert real < REAL_BUDGET_S


def test_reconnect_backoff_runs_in_virtual_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every node stopped, an admin client retries its bootstrap connection every
    reconnect.backoff.ms (10 s, jitter off): a node started at 25 s is reached by the
    attempt at exactly 30 s of virtual time."""
    monkeypatch.setattr(backoff, "JITTER", 0.0)

    async def main() -> float:
        async with MemoryCluster(brokers=2, in_loop=True) as cluster:
            cluster.stop_broker(1)
            cluster.stop_broker(2)

            async def start_later() -> None:
                await trio.sleep(25)
                cluster.start_broker(2)

            async with (
                trio.open_nursery() as nursery,
                AsyncAdminClient(
                    bootstrap_servers=cluster.bootstrap_servers,
                    reconnect_backoff_ms=10_000,
                    reconnect_backoff_max_ms=10_000,
                ) as admin,
            ):
                started = trio.current_time()
                nursery.start_soon(start_later)
                described = await admin.describe_cluster(timeout_ms=60_000)
                reached = trio.current_time() - started
            assert [node.id for node in described.nodes] == [2]
            return reached

    virtual, real = run_virtual(main)
    assert virtual == pytest.approx(30.0, abs=1e-6)
    assert real < REAL_BUDGET_S


def test_reconnect_backoff_against_a_closed_cluster() -> None:
    """An admin client retrying a closed cluster times out at exactly timeout_ms of
    virtual time."""
    cluster = MemoryCluster()
    cluster.close()

    async def main() -> float:
        async with AsyncAdminClient(
            bootstrap_servers=cluster.bootstrap_servers,
            reconnect_backoff_ms=10_000,
            reconnect_backoff_max_ms=10_000,
        ) as admin:
            started = trio.current_time()
            with pytest.raises(KafkaTimeoutError):
                await admin.describe_cluster(timeout_ms=60_000)
            return trio.current_time() - started

    virtual, real = run_virtual(main)
    assert virtual == pytest.approx(60.0, abs=1e-6)
    assert real < REAL_BUDGET_S


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_max_poll_interval_runs_in_virtual_time(group_protocol: str) -> None:
    """A group member that stops polling keeps heartbeating, then leaves the group once
    max.poll.interval.ms (32.5 s, between two heartbeats) of virtual time has passed
    since its last poll, under either group protocol."""

    async def main() -> float:
        # (heartbeats every 10 s: the client's setting, or the broker's for KIP-848)
        heartbeat = {"classic": {"heartbeat_interval_ms": 10_000}, "consumer": {}}[group_protocol]
        async with MemoryCluster(
            in_loop=True,
            group_initial_rebalance_delay_ms=0,
            group_consumer_heartbeat_interval_ms=10_000,
        ) as cluster:
            await create(cluster, "t")
            async with AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                group_protocol=group_protocol,
                max_poll_interval_ms=32_500,
                **heartbeat,
            ) as consumer:
                consumer.subscribe(["t"])
                while not consumer.assignment():
                    await consumer.poll(timeout_ms=100)
                [member] = cluster.assignment("g")
                await consumer.poll(timeout_ms=0)
                polled = trio.current_time()
                await trio.sleep(32.5 - MS)
                assert cluster.assignment("g") == {member: {TopicPartition("t", 0)}}
                while cluster.assignment("g"):
                    await trio.sleep(MS / 10)
                return trio.current_time() - polled

    virtual, real = run_virtual(main)
    # The member leaves once 32.5 s have passed, as Java's poll timer expires
    # (now >= deadline), not at the next heartbeat nor a millisecond later.
    assert virtual == pytest.approx(32.5, abs=MS / 10)
    assert real < REAL_BUDGET_S


def test_loop_clock_outside_a_loop_is_the_monotonic_clock() -> None:
    """A client created outside a running loop keeps time.monotonic."""
    assert loop_clock_ms() is monotonic_ms


def test_loop_clock_reads_trios_clock() -> None:
    """Under trio, the clock is the run's clock in milliseconds (MockClock: virtual)."""

    async def main() -> float:
        clock = loop_clock_ms()
        before = clock()
        await trio.sleep(12.5)
        return clock() - before

    elapsed_ms, real = run_virtual(main)
    assert elapsed_ms == pytest.approx(12_500.0, abs=1e-6)
    assert real < REAL_BUDGET_S


def test_a_throttled_producer_holds_back_as_the_broker_asks() -> None:
    """KIP-219: an answer carrying throttle_time_ms=500 comes at once, and the producer
    sends that broker nothing more until 500 ms later (then the next record goes, the
    throttle cleared); every record is written once, in order."""

    async def main() -> tuple[float, float]:
        async with MemoryCluster(in_loop=True) as cluster:
            await create(cluster, "t")
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, linger_ms=0
            ) as producer:
                await (await producer.send("t", b"a"))  # connected, metadata known
                cluster.faults.throttle(500)
                started = trio.current_time()
                await (await producer.send("t", b"b"))
                answered = trio.current_time() - started
                cluster.faults.clear()
                await (await producer.send("t", b"c"))
                next_answered = trio.current_time() - started
            assert [(r.value, r.offset) for r in cluster.records("t")] == [
                (b"a", 0),
                (b"b", 1),
                (b"c", 2),
            ]
            return answered, next_answered

    (answered, next_answered), real = run_virtual(main)
    assert answered == pytest.approx(0.0, abs=MS)
    assert next_answered == pytest.approx(0.5, abs=MS)
    assert real < REAL_BUDGET_S


def test_requests_on_a_throttled_connection_wait_for_the_throttle() -> None:
    """Any request on a connection the broker throttled (Metadata v12 answered with
    throttle_time_ms=300) is sent only once the 300 ms have passed."""

    async def main() -> list[float]:
        async with MemoryCluster(in_loop=True) as cluster:
            connection = await BrokerConnection.over_stream(
                get_cluster(cluster.bootstrap_servers).open_stream(1),
                address=cluster.bootstrap_servers,
                clock=loop_clock_ms(),
            )
            async with connection:
                cluster.faults.throttle(300)
                times = []
                for _ in range(3):
                    response = await connection.request(MetadataRequest(topics=[]), version=12)
                    assert isinstance(response, MetadataResponse)
                    assert response.throttle_time_ms == 300
                    times.append(trio.current_time())
                return times

    times, real = run_virtual(main)
    assert [round(b - a, 6) for a, b in itertools.pairwise(times)] == [0.3, 0.3]
    assert real < REAL_BUDGET_S


@pytest.mark.parametrize("metadata_delay_s", [0.0, 30.0])
def test_a_consumer_follows_a_leader_move_by_the_fetch_answer_s_hint(
    metadata_delay_s: float,
) -> None:
    """KIP-951: after the partition's leader moves, the old leader's NOT_LEADER_OR_FOLLOWER
    answer names the new one, and the consumer fetches from it at once; the metadata
    refresh it also asks for goes on in the background (here held 30 s in one run) and
    holds nothing up. Every record is read once, in order."""

    async def main() -> tuple[float, list[tuple[bytes, int]]]:
        async with MemoryCluster(in_loop=True, brokers=3) as cluster:
            await create(cluster, "t")
            tp = TopicPartition("t", 0)
            async with (
                AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer,
                AsyncConsumer(bootstrap_servers=cluster.bootstrap_servers) as consumer,
            ):
                for value in (b"a", b"b"):
                    await (await producer.send("t", value, partition=0))
                consumer.assign([tp])
                consumer.seek(tp, 0)
                got: list[tuple[bytes, int]] = []
                while len(got) < 2:
                    records = (await consumer.poll(timeout_ms=100)).get(tp, [])
                    got.extend((record.value, record.offset) for record in records)
                if metadata_delay_s:
                    cluster.faults.delay("Metadata", metadata_delay_s)
                old = cluster.leader("t", 0)
                cluster.move_leader("t", 0, old % 3 + 1)
                moved = trio.current_time()
                for value in (b"c", b"d"):
                    await (await producer.send("t", value, partition=0))
                with trio.fail_after(10):  # (virtual: no refresh answers within 30 s)
                    while len(got) < 4:
                        records = (await consumer.poll(timeout_ms=100)).get(tp, [])
                        got.extend((record.value, record.offset) for record in records)
                return trio.current_time() - moved, got

    (elapsed, got), real = run_virtual(main)
    assert got == [(b"a", 0), (b"b", 1), (b"c", 2), (b"d", 3)]
    assert elapsed < 1.0
    assert real < REAL_BUDGET_S
