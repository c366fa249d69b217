"""A group member's blocking calls keep their timeouts while a rebalance is in flight.

Under trio's MockClock(autojump_threshold=0) with the broker core on the test's loop
(``MemoryCluster(in_loop=True)``): client and broker share one virtual time, so each
test asserts the virtual instant at which a call returns, to the millisecond, and
runs in well under a second of real time. The rebalance is held by a member made of
raw requests that then goes silent (a consumer killed with SIGKILL), or by a commit
the broker holds (a ``delay`` fault).
"""

from __future__ import annotations

import pytest
import trio

from kafkette import AsyncConsumer, AsyncProducer, TopicPartition
from kafkette.client.connection import BrokerConnection
from kafkette.client.inprocess import get_cluster
from kafkette.errors import KafkaTimeoutError
from kafkette.testing import MemoryCluster
from tests.testing.test_mock_clock import MS, REAL_BUDGET_S, create, join_and_go_silent, run_virtual

SESSION_MS = 10_000
"""The silent member's session: the rebalance waits this long for it."""

HOLD_S = 29
"""How long the broker holds the commit before the rebalance: within default.api.timeout.ms,
and ending amid a poll."""

BOTH = {TopicPartition("t", 0), TopicPartition("t", 1)}


async def produce(cluster: MemoryCluster, *values: tuple[int, bytes]) -> None:
    async with AsyncProducer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for partition, value in values:
            await (await producer.send("t", value, partition=partition))


async def silent_member(cluster: MemoryCluster) -> tuple[BrokerConnection, str]:
    stream = get_cluster(cluster.bootstrap_servers).open_stream()
    connection = await BrokerConnection.over_stream(stream, address="silent")
    return connection, await join_and_go_silent(connection, "g", SESSION_MS, 60_000)


def test_calls_return_at_their_timeouts_while_a_dead_member_holds_the_rebalance() -> None:
    """The silent member has the group; a second member's join waits for the silent
    one's session to end. Meanwhile each poll returns at its timeout, committed()
    raises at its own, and close() leaves the group within its timeout: its LeaveGroup
    does not queue behind the JoinGroup parked at the coordinator."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True, group_initial_rebalance_delay_ms=0) as cluster:
            await create(cluster, "t", 2)
            connection, silent = await silent_member(cluster)
            async with connection:
                silent_since = trio.current_time()
                member = AsyncConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g")
                async with member:
                    member.subscribe(["t"])
                    for timeout in (2.0, 1.5, 2.0):
                        started = trio.current_time()
                        assert await member.poll(timeout) == {}
                        assert trio.current_time() - started == pytest.approx(timeout, abs=MS)
                    joining = member.group_metadata().member_id
                    assert joining and set(cluster.assignment("g")) == {silent, joining}
                    started = trio.current_time()
                    with pytest.raises(KafkaTimeoutError, match="within 1000 ms"):
                        await member.committed([TopicPartition("t", 0)], timeout=1.0)
                    assert trio.current_time() - started == pytest.approx(1.0, abs=MS)
                    started = trio.current_time()
                    await member.close(timeout=1.0)
                    closed_in = trio.current_time() - started
                    assert closed_in <= 1.0 + MS
                    assert set(cluster.assignment("g")) == {silent}  # the member left
                assert trio.current_time() - silent_since < SESSION_MS / 1000
            return closed_in

    closed_in, real = run_virtual(main)
    assert closed_in < 0.1  # FindCoordinator and LeaveGroup on a new connection
    assert real < REAL_BUDGET_S


def test_poll_returns_while_the_commit_before_a_rebalance_is_held() -> None:
    """A member with both partitions rejoins when a second member arrives, committing
    its positions first; the broker holds that commit 29 s. Meanwhile every poll
    returns at its timeout, and the records produced since are not handed out (their
    partitions are being revoked at the committed positions). Once the commit is
    answered, the member revokes, joins, and reads on from the committed offsets: each
    record exactly once."""

    async def main() -> float:
        async with MemoryCluster(in_loop=True, group_initial_rebalance_delay_ms=0) as cluster:
            await create(cluster, "t", 2)
            await produce(cluster, (0, b"a0"), (1, b"a1"))
            member = AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                auto_offset_reset="earliest",
                auto_commit_interval_ms=3_600_000,  # only the commit before the rebalance
                heartbeat_interval_ms=100,
            )
            async with member:
                member.subscribe(["t"])
                records: list[bytes] = []
                while len(records) < 2:
                    polled = await member.poll(1.0)
                    records += [r.value for batch in polled.values() for r in batch]
                assert sorted(records) == [b"a0", b"a1"]
                assert member.assignment() == BOTH
                cluster.faults.delay("OffsetCommit", HOLD_S, times=1)
                async with trio.open_nursery() as nursery:
                    connection = await nursery.start(_second_member, cluster)
                    arrived = trio.current_time()
                    # A heartbeat tells of the rebalance; the next poll starts the commit.
                    for _ in range(2):
                        started = trio.current_time()
                        assert await member.poll(2.0) == {}
                        assert trio.current_time() - started == pytest.approx(2.0, abs=MS)
                    await produce(cluster, (0, b"b0"), (1, b"b1"))
                    answered_at = arrived + 2.0 + HOLD_S
                    late: list[bytes] = []
                    while not late:
                        started = trio.current_time()
                        polled = await member.poll(2.0)
                        late = [r.value for batch in polled.values() for r in batch]
                        if trio.current_time() < answered_at:
                            assert late == []
                            assert trio.current_time() - started == pytest.approx(2.0, abs=MS)
                    held = trio.current_time() - arrived
                    (kept,) = member.assignment()
                    assert late == [b"b%d" % kept.partition]
                    assert cluster.committed("g") == {
                        TopicPartition("t", 0): 1,
                        TopicPartition("t", 1): 1,
                    }
                    nursery.cancel_scope.cancel()
                    await connection.aclose()
            return held

    held, real = run_virtual(main)
    # A poll, then the commit held; the poll that sees it answered joins, and the
    # record of the partition kept arrives at that instant.
    assert held == pytest.approx(2.0 + HOLD_S, abs=MS)
    assert real < REAL_BUDGET_S


async def _second_member(
    cluster: MemoryCluster, *, task_status: trio.TaskStatus[BrokerConnection]
) -> None:
    """A member joining the group by hand (its join waits for the first member to
    rejoin); it then goes silent."""
    stream = get_cluster(cluster.bootstrap_servers).open_stream()
    connection = await BrokerConnection.over_stream(stream, address="second", request_timeout_s=300)
    task_status.started(connection)
    await join_and_go_silent(connection, "g", SESSION_MS, 120_000)
    await trio.sleep_forever()
