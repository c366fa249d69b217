"""bench/fake.py's suite with the async clients under trio, for ``bench/fake.py --async``.

The same fifteen tests as bench/fake.py's sync suite, written as a user of
``AsyncProducer``/``AsyncConsumer`` would, each in a ``trio.run`` of its own:

- ``memory://``: a fresh ``MemoryCluster(in_loop=True)`` per test, under
  ``trio.testing.MockClock(autojump_threshold=0)``: the broker runs on the
  test's loop and its clock, so every wait (linger, heartbeats, long polls,
  the session timeout) is virtual time;
- ``kafkette serve``: the session-wide broker, under trio's real clock (a
  broker in another process cannot follow a fake clock).

The code of each test is the same on both: time passes with ``trio.sleep``,
faults are armed through ``env.faults`` (the cluster's, or RemoteFaults over
TCP), and the waits are bounded by ``trio.current_time()``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from kafkette import AsyncConsumer, AsyncProducer, NewTopic, OffsetAndMetadata, TopicPartition
from kafkette.admin import AsyncAdminClient
from kafkette.errors import (
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    NotEnoughReplicasError,
    ProducerFencedError,
)
from kafkette.server.faults.table import FaultTable
from kafkette.testing import MemoryCluster, RemoteFaults

SESSION_TIMEOUT_MS = 1000
WAIT_S = 20.0


class AsyncEnv:
    """What a test gets: servers, fresh names, and the faults of its broker."""

    def __init__(self, servers: str, faults: FaultTable | RemoteFaults) -> None:
        self.servers = servers
        self.faults = faults
        self.prefix = uuid.uuid4().hex[:8]

    def name(self, what: str) -> str:
        return f"{what}-{self.prefix}"

    async def topic(self, partitions: int = 1) -> str:
        name = self.name(f"t{uuid.uuid4().hex[:6]}")
        async with AsyncAdminClient(bootstrap_servers=self.servers) as admin:
            await admin.create_topics([NewTopic(name, partitions)])
        return name

    def producer(self, **settings: Any) -> AsyncProducer:
        return AsyncProducer(bootstrap_servers=self.servers, **settings)

    def consumer(self, **settings: Any) -> AsyncConsumer:
        settings.setdefault("auto_offset_reset", "earliest")
        return AsyncConsumer(bootstrap_servers=self.servers, **settings)


async def read(consumer: AsyncConsumer, count: int) -> list[Any]:
    """The next ``count`` records ``consumer`` polls (an error after WAIT_S)."""
    out: list[Any] = []
    deadline = trio.current_time() + WAIT_S
    while len(out) < count:
        if trio.current_time() > deadline:
            raise AssertionError(f"read {len(out)} of {count} records")
        for batch in (await consumer.poll(0.05)).values():
            out += batch
    return out


# ---- the suite


async def test_keyed_records_share_a_partition(env: AsyncEnv) -> None:
    topic = await env.topic(3)
    async with env.producer() as producer:
        sent = [
            await producer.send(topic, b"%d" % i, key=b"customer-%d" % (i % 4)) for i in range(12)
        ]
        meta = [await f for f in sent]
    by_key: dict[int, set[int]] = {}
    for i, m in enumerate(meta):
        by_key.setdefault(i % 4, set()).add(m.partition)
    assert all(len(parts) == 1 for parts in by_key.values()), by_key


async def test_records_come_back_in_order(env: AsyncEnv) -> None:
    topic = await env.topic()
    async with env.producer() as producer:
        for i in range(20):
            await producer.send(topic, b"v%d" % i, key=b"k")
    async with env.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = await read(consumer, 20)
    assert [r.value for r in records] == [b"v%d" % i for i in range(20)]
    assert [r.offset for r in records] == list(range(20))


async def test_headers_and_timestamps_round_trip(env: AsyncEnv) -> None:
    topic = await env.topic()
    async with env.producer() as producer:
        await producer.send(topic, b"v", headers=[("trace", b"abc")], timestamp=1_700_000_000_000)
    async with env.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        (record,) = await read(consumer, 1)
    assert list(record.headers) == [("trace", b"abc")]
    assert record.timestamp == 1_700_000_000_000


async def test_a_group_consumes_every_record_once(env: AsyncEnv) -> None:
    topic = await env.topic(3)
    async with env.producer() as producer:
        for i in range(30):
            await producer.send(topic, b"%d" % i, key=b"%d" % i)
    async with env.consumer(group_id=env.name("g")) as consumer:
        consumer.subscribe([topic])
        values = sorted(int(r.value) for r in await read(consumer, 30))
        await consumer.commit()
    assert values == list(range(30))


async def test_two_members_split_the_partitions(env: AsyncEnv) -> None:
    topic, group = await env.topic(4), env.name("g")
    settings = {"group_id": group, "heartbeat_interval_ms": 100}
    async with env.consumer(**settings) as first, env.consumer(**settings) as second:
        first.subscribe([topic])
        second.subscribe([topic])
        deadline = trio.current_time() + WAIT_S
        while True:
            await first.poll(0.02)
            await second.poll(0.02)
            mine, theirs = first.assignment(), second.assignment()
            if len(mine) + len(theirs) == 4 and mine and theirs:
                break
            assert trio.current_time() < deadline, (mine, theirs)
    assert not mine & theirs


async def test_committed_offsets_survive_a_restart(env: AsyncEnv) -> None:
    topic, group = await env.topic(), env.name("g")
    tp = TopicPartition(topic, 0)
    async with env.producer() as producer:
        for i in range(5):
            await producer.send(topic, b"%d" % i)
    async with env.consumer(
        group_id=group, enable_auto_commit=False, max_poll_records=3
    ) as consumer:
        consumer.subscribe([topic])
        assert [r.value for r in await read(consumer, 3)] == [b"0", b"1", b"2"]
        await consumer.commit()
    async with env.consumer(group_id=group, enable_auto_commit=False) as consumer:
        assert (await consumer.committed([tp]))[tp] == OffsetAndMetadata(3, "")
        consumer.subscribe([topic])
        assert [r.value for r in await read(consumer, 2)] == [b"3", b"4"]


async def test_offsets_for_times(env: AsyncEnv) -> None:
    topic = await env.topic()
    tp = TopicPartition(topic, 0)
    async with env.producer() as producer:
        for i in range(5):
            await producer.send(topic, b"%d" % i, timestamp=1_000_000 + i * 1000)
    async with env.consumer() as consumer:
        found = (await consumer.offsets_for_times({tp: 1_002_500}))[tp]
        assert found is not None and found.offset == 3
        assert (await consumer.offsets_for_times({tp: 9_999_999}))[tp] is None
        assert await consumer.end_offsets([tp]) == {tp: 5}


async def test_a_committed_transaction_is_read(env: AsyncEnv) -> None:
    topic = await env.topic()
    async with env.producer(transactional_id=env.name("tx")) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(topic, b"a")
        await producer.send(topic, b"b")
        await producer.commit_transaction()
    async with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in await read(consumer, 2)] == [b"a", b"b"]


async def test_an_aborted_transaction_is_not_read(env: AsyncEnv) -> None:
    topic = await env.topic()
    async with env.producer(transactional_id=env.name("tx")) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(topic, b"lost")
        await producer.flush()
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send(topic, b"kept")
        await producer.commit_transaction()
    async with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in await read(consumer, 1)] == [b"kept"]


async def test_a_new_producer_fences_the_old(env: AsyncEnv) -> None:
    topic, txn = await env.topic(), env.name("tx")
    old = env.producer(transactional_id=txn)
    await old.start()
    try:
        await old.init_transactions()
        old.begin_transaction()
        await (await old.send(topic, b"zombie"))
        async with env.producer(transactional_id=txn) as new:
            await new.init_transactions()  # aborts the old one's transaction
            try:
                await old.commit_transaction()
            except (ProducerFencedError, InvalidProducerEpochError):
                pass
            else:
                raise AssertionError("the fenced producer committed")
            new.begin_transaction()
            await new.send(topic, b"fresh")
            await new.commit_transaction()
    finally:
        await old.close(0)
    async with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in await read(consumer, 1)] == [b"fresh"]


async def test_consume_transform_produce_is_exactly_once(env: AsyncEnv) -> None:
    source, target, group = await env.topic(), await env.topic(), env.name("copier")
    async with env.producer() as producer:
        for word in (b"a", b"b", b"c"):
            await producer.send(source, word)
    consumer = env.consumer(
        group_id=group, enable_auto_commit=False, isolation_level="read_committed"
    )
    async with consumer, env.producer(transactional_id=env.name("copier")) as producer:
        consumer.subscribe([source])
        await producer.init_transactions()
        records = await read(consumer, 3)
        producer.begin_transaction()
        for record in records:
            await producer.send(target, record.value.upper())
        await producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): records[-1].offset + 1}, consumer.group_metadata()
        )
        await producer.commit_transaction()
    async with env.consumer(isolation_level="read_committed", group_id=group) as reader:
        tp = TopicPartition(source, 0)
        assert (await reader.committed([tp]))[tp] == OffsetAndMetadata(3, "")
        reader.assign([TopicPartition(target, 0)])
        assert [r.value for r in await read(reader, 3)] == [b"A", b"B", b"C"]


async def test_a_silent_member_is_expired(env: AsyncEnv) -> None:
    topic, group = await env.topic(2), env.name("g")
    settings = {
        "group_id": group,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": SESSION_TIMEOUT_MS // 3,
    }
    crashed = env.consumer(group_instance_id="crashed", **settings)
    async with crashed:
        crashed.subscribe([topic])
        deadline = trio.current_time() + WAIT_S
        while len(crashed.assignment()) < 2:
            await crashed.poll(0.02)
            assert trio.current_time() < deadline
    # A static member leaves no LeaveGroup: it stays until its session ends.
    await trio.sleep(SESSION_TIMEOUT_MS / 1000 + 0.5)
    async with env.consumer(**settings) as survivor:
        survivor.subscribe([topic])
        while len(survivor.assignment()) < 2:
            await survivor.poll(0.02)
            assert trio.current_time() < deadline


async def test_produce_errors_are_retried(env: AsyncEnv) -> None:
    topic = await env.topic()
    env.faults.fail("Produce", NotEnoughReplicasError, times=3)
    async with env.producer(retry_backoff_ms=1) as producer:
        assert (await (await producer.send(topic, b"v"))).offset == 0


async def test_coordinator_errors_are_retried(env: AsyncEnv) -> None:
    topic, group = await env.topic(), env.name("g")
    tp = TopicPartition(topic, 0)
    env.faults.fail("FindCoordinator", CoordinatorNotAvailableError, times=2)
    async with env.consumer(group_id=group, retry_backoff_ms=1) as consumer:
        await consumer.commit({tp: 7})
        assert (await consumer.committed([tp]))[tp] == OffsetAndMetadata(7, "")


async def test_seek_and_end_offsets(env: AsyncEnv) -> None:
    topic = await env.topic(2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    async with env.producer() as producer:
        for i in range(6):
            await producer.send(topic, b"%d" % i, partition=i % 2)
    async with env.consumer() as consumer:
        assert await consumer.end_offsets(tps) == {tps[0]: 3, tps[1]: 3}
        consumer.assign(tps)
        consumer.seek(tps[1], 2)
        consumer.seek_to_end(tps[0])
        assert [r.value for r in await read(consumer, 1)] == [b"5"]


ASYNC_SUITE: list[Callable[[AsyncEnv], Awaitable[None]]] = [
    test_keyed_records_share_a_partition,
    test_records_come_back_in_order,
    test_headers_and_timestamps_round_trip,
    test_a_group_consumes_every_record_once,
    test_two_members_split_the_partitions,
    test_committed_offsets_survive_a_restart,
    test_offsets_for_times,
    test_a_committed_transaction_is_read,
    test_an_aborted_transaction_is_not_read,
    test_a_new_producer_fences_the_old,
    test_consume_transform_produce_is_exactly_once,
    test_a_silent_member_is_expired,
    test_produce_errors_are_retried,
    test_coordinator_errors_are_retried,
    test_seek_and_end_offsets,
]


# ---- running it

EnvMaker = Callable[[], Any]
"""A fresh async context manager yielding an :class:`AsyncEnv`."""


def in_loop_cluster(broker_settings: dict[str, str]) -> EnvMaker:
    """Per test: a MemoryCluster on the test's loop."""
    settings: dict[str, Any] = {k.replace(".", "_"): v for k, v in broker_settings.items()}

    @asynccontextmanager
    async def make() -> AsyncIterator[AsyncEnv]:
        async with MemoryCluster(in_loop=True, **settings) as cluster:
            yield AsyncEnv(cluster.bootstrap_servers, cluster.faults)

    return make


def shared_broker(servers: str, faults: RemoteFaults) -> EnvMaker:
    """Per test: the session-wide broker, fresh names."""

    @asynccontextmanager
    async def make() -> AsyncIterator[AsyncEnv]:
        yield AsyncEnv(servers, faults)

    return make


def run_async_suite(make_env: EnvMaker, *, mock_clock: bool) -> dict[str, float]:
    """Real seconds per test, each in a trio.run of its own (under MockClock(0) if asked)."""
    seconds: dict[str, float] = {}
    for test in ASYNC_SUITE:

        async def main(test: Callable[[AsyncEnv], Awaitable[None]] = test) -> None:
            async with make_env() as env:
                await test(env)

        clock = trio.testing.MockClock(autojump_threshold=0) if mock_clock else None
        start = time.perf_counter()
        trio.run(main, clock=clock)
        seconds[test.__name__] = time.perf_counter() - start
    return seconds
