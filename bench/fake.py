"""The fake's speed: a user-style test suite on ``memory://`` against ``kafkette serve``.

Fifteen small tests, written as a user of the sync clients would (keyed
partitioning, a consumer group loop, committed offsets across a restart,
offsets_for_times, transactions and fencing, a session timeout, retried
broker errors ...), run twice on the same run:

- ``memory://``: each test gets a fresh :class:`~kafkette.testing.MemoryCluster`
  (made and closed inside the timed test, as the ``kafka_cluster`` fixture
  does); the session timeout moves the cluster's clock, faults are armed on
  the cluster;
- ``kafkette serve``: one ``kafkette serve --memory --enable-fault-injection``
  child process for the whole suite (started before the clock, its start
  printed apart), fresh topic and group names per test; the session timeout
  waits in real time; faults are armed over TCP (``RemoteFaults``, one admin
  client for the session).

Client timers are real time on both (the two-member test shortens
``heartbeat.interval.ms`` to 100 ms, as a tester would: with the default 3 s
the first member learns of the rebalance 3 s later on any broker).

Then the same fifteen tests with the async clients under trio
(bench/fake_async.py): on ``memory://`` a ``MemoryCluster(in_loop=True)`` per
test under ``MockClock(autojump_threshold=0)`` (every wait is virtual), on
``kafkette serve`` trio's real clock.

Printed: each test's seconds on both, both totals, their ratio (target: the
memory:// suite at least 3x faster), for each suite; the cost of a fresh
empty cluster, and the CPU per Produce request (acks=1, one 100 B record,
the sync and async producers): on memory:// this process's CPU; over TCP
this process's plus the broker process's (target: memory:// at most 2x TCP).

    .venv/bin/python bench/fake.py [--repeat 3] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fake_async import in_loop_cluster, run_async_suite, shared_broker
from kafkette import (
    AdminClient,
    AsyncProducer,
    Consumer,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from kafkette.errors import (
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    KafkaError,
    NotEnoughReplicasError,
    ProducerFencedError,
)
from kafkette.server.faults.table import FaultTable
from kafkette.testing import MemoryCluster, RemoteFaults
from tests.brokers import BrokerProcess

SESSION_TIMEOUT_MS = 1000
BROKER_SETTINGS = {"group.min.session.timeout.ms": "500"}
"""Both brokers allow the short session timeout of the session-timeout test."""
WAIT_S = 20.0


class Env:
    """What a test gets: servers, topics, and the fake's clock and faults where there are."""

    def __init__(
        self,
        servers: str,
        cluster: MemoryCluster | None,
        faults: FaultTable | RemoteFaults | None = None,
    ) -> None:
        self.servers = servers
        self.cluster = cluster
        self.faults = faults
        self.prefix = uuid.uuid4().hex[:8]

    def name(self, what: str) -> str:
        return f"{what}-{self.prefix}"

    def topic(self, partitions: int = 1) -> str:
        name = self.name(f"t{uuid.uuid4().hex[:6]}")
        with AdminClient(bootstrap_servers=self.servers) as admin:
            admin.create_topics([NewTopic(name, partitions)]).all()
        return name

    def producer(self, **settings: Any) -> Producer:
        return Producer(bootstrap_servers=self.servers, **settings)

    def consumer(self, **settings: Any) -> Consumer:
        settings.setdefault("auto_offset_reset", "earliest")
        return Consumer(bootstrap_servers=self.servers, **settings)

    def advance(self, seconds: float) -> None:
        """Broker time passes: the fake's clock moves, a real broker is waited for."""
        if self.cluster is not None:
            self.cluster.advance(seconds)
        else:
            time.sleep(seconds)

    def fail(self, api: str, error: type[KafkaError], times: int) -> None:
        assert self.faults is not None
        self.faults.fail(api, error, times=times)


def read(consumer: Consumer, count: int) -> list[Any]:
    """The next ``count`` records ``consumer`` polls (an error after WAIT_S)."""
    out: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(out) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"read {len(out)} of {count} records")
        for batch in consumer.poll(0.05).values():
            out += batch
    return out


# ---- the suite


def test_keyed_records_share_a_partition(env: Env) -> None:
    topic = env.topic(3)
    with env.producer() as producer:
        sent = [producer.send(topic, b"%d" % i, key=b"customer-%d" % (i % 4)) for i in range(12)]
        meta = [f.result(10) for f in sent]
    by_key: dict[int, set[int]] = {}
    for i, m in enumerate(meta):
        by_key.setdefault(i % 4, set()).add(m.partition)
    assert all(len(parts) == 1 for parts in by_key.values()), by_key


def test_records_come_back_in_order(env: Env) -> None:
    topic = env.topic()
    with env.producer() as producer:
        for i in range(20):
            producer.send(topic, b"v%d" % i, key=b"k")
    with env.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = read(consumer, 20)
    assert [r.value for r in records] == [b"v%d" % i for i in range(20)]
    assert [r.offset for r in records] == list(range(20))


def test_headers_and_timestamps_round_trip(env: Env) -> None:
    topic = env.topic()
    with env.producer() as producer:
        producer.send(topic, b"v", headers=[("trace", b"abc")], timestamp=1_700_000_000_000)
    with env.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        (record,) = read(consumer, 1)
    assert list(record.headers) == [("trace", b"abc")]
    assert record.timestamp == 1_700_000_000_000


def test_a_group_consumes_every_record_once(env: Env) -> None:
    topic = env.topic(3)
    with env.producer() as producer:
        for i in range(30):
            producer.send(topic, b"%d" % i, key=b"%d" % i)
    with env.consumer(group_id=env.name("g")) as consumer:
        consumer.subscribe([topic])
        values = sorted(int(r.value) for r in read(consumer, 30))
        consumer.commit()
    assert values == list(range(30))


def test_two_members_split_the_partitions(env: Env) -> None:
    topic, group = env.topic(4), env.name("g")
    # The first member hears of the second at its next heartbeat: a client timer, the
    # same on any broker (3 s by default), so the test shortens it as a tester would.
    settings = {"group_id": group, "heartbeat_interval_ms": 100}
    with env.consumer(**settings) as first, env.consumer(**settings) as second:
        first.subscribe([topic])
        second.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while True:
            first.poll(0.02)
            second.poll(0.02)
            mine, theirs = first.assignment(), second.assignment()
            if len(mine) + len(theirs) == 4 and mine and theirs:
                break
            assert time.monotonic() < deadline, (mine, theirs)
    assert not mine & theirs


def test_committed_offsets_survive_a_restart(env: Env) -> None:
    topic, group = env.topic(), env.name("g")
    tp = TopicPartition(topic, 0)
    with env.producer() as producer:
        for i in range(5):
            producer.send(topic, b"%d" % i)
    with env.consumer(group_id=group, enable_auto_commit=False, max_poll_records=3) as consumer:
        consumer.subscribe([topic])
        assert [r.value for r in read(consumer, 3)] == [b"0", b"1", b"2"]
        consumer.commit()
    with env.consumer(group_id=group, enable_auto_commit=False) as consumer:
        assert consumer.committed([tp])[tp] == OffsetAndMetadata(3, "")
        consumer.subscribe([topic])
        assert [r.value for r in read(consumer, 2)] == [b"3", b"4"]


def test_offsets_for_times(env: Env) -> None:
    topic = env.topic()
    tp = TopicPartition(topic, 0)
    with env.producer() as producer:
        for i in range(5):
            producer.send(topic, b"%d" % i, timestamp=1_000_000 + i * 1000)
    with env.consumer() as consumer:
        found = consumer.offsets_for_times({tp: 1_002_500})[tp]
        assert found is not None and found.offset == 3
        assert consumer.offsets_for_times({tp: 9_999_999})[tp] is None
        assert consumer.end_offsets([tp]) == {tp: 5}


def test_a_committed_transaction_is_read(env: Env) -> None:
    topic = env.topic()
    with env.producer(transactional_id=env.name("tx")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"a")
        producer.send(topic, b"b")
        producer.commit_transaction()
    with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in read(consumer, 2)] == [b"a", b"b"]


def test_an_aborted_transaction_is_not_read(env: Env) -> None:
    topic = env.topic()
    with env.producer(transactional_id=env.name("tx")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"lost")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kept")
        producer.commit_transaction()
    with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in read(consumer, 1)] == [b"kept"]


def test_a_new_producer_fences_the_old(env: Env) -> None:
    topic, txn = env.topic(), env.name("tx")
    old = env.producer(transactional_id=txn)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie").result(10)
        with env.producer(transactional_id=txn) as new:
            new.init_transactions()  # aborts the old one's transaction
            try:
                old.commit_transaction()
            except (ProducerFencedError, InvalidProducerEpochError):
                pass
            else:
                raise AssertionError("the fenced producer committed")
            new.begin_transaction()
            new.send(topic, b"fresh")
            new.commit_transaction()
    finally:
        old.close(0)
    with env.consumer(isolation_level="read_committed") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in read(consumer, 1)] == [b"fresh"]


def test_consume_transform_produce_is_exactly_once(env: Env) -> None:
    source, target, group = env.topic(), env.topic(), env.name("copier")
    with env.producer() as producer:
        for word in (b"a", b"b", b"c"):
            producer.send(source, word)
    consumer = env.consumer(
        group_id=group, enable_auto_commit=False, isolation_level="read_committed"
    )
    with consumer, env.producer(transactional_id=env.name("copier")) as producer:
        consumer.subscribe([source])
        producer.init_transactions()
        records = read(consumer, 3)
        producer.begin_transaction()
        for record in records:
            producer.send(target, record.value.upper())
        producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): records[-1].offset + 1}, consumer.group_metadata()
        )
        producer.commit_transaction()
    with env.consumer(isolation_level="read_committed", group_id=group) as reader:
        tp = TopicPartition(source, 0)
        assert reader.committed([tp])[tp] == OffsetAndMetadata(3, "")
        reader.assign([TopicPartition(target, 0)])
        assert [r.value for r in read(reader, 3)] == [b"A", b"B", b"C"]


def test_a_silent_member_is_expired(env: Env) -> None:
    topic, group = env.topic(2), env.name("g")
    settings = {
        "group_id": group,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": SESSION_TIMEOUT_MS // 3,
    }
    crashed = env.consumer(group_instance_id="crashed", **settings)
    crashed.subscribe([topic])
    deadline = time.monotonic() + WAIT_S
    while len(crashed.assignment()) < 2:
        crashed.poll(0.02)
        assert time.monotonic() < deadline
    crashed.close()  # a static member leaves no LeaveGroup: it stays until its session ends
    env.advance(SESSION_TIMEOUT_MS / 1000 + 0.5)
    with env.consumer(**settings) as survivor:
        survivor.subscribe([topic])
        while len(survivor.assignment()) < 2:
            survivor.poll(0.02)
            assert time.monotonic() < deadline


def test_produce_errors_are_retried(env: Env) -> None:
    topic = env.topic()
    env.fail("Produce", NotEnoughReplicasError, 3)
    with env.producer(retry_backoff_ms=1) as producer:
        assert producer.send(topic, b"v").result(10).offset == 0


def test_coordinator_errors_are_retried(env: Env) -> None:
    topic, group = env.topic(), env.name("g")
    tp = TopicPartition(topic, 0)
    env.fail("FindCoordinator", CoordinatorNotAvailableError, 2)
    with env.consumer(group_id=group, retry_backoff_ms=1) as consumer:
        consumer.commit({tp: 7})
        assert consumer.committed([tp])[tp] == OffsetAndMetadata(7, "")


def test_seek_and_end_offsets(env: Env) -> None:
    topic = env.topic(2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with env.producer() as producer:
        for i in range(6):
            producer.send(topic, b"%d" % i, partition=i % 2)
    with env.consumer() as consumer:
        assert consumer.end_offsets(tps) == {tps[0]: 3, tps[1]: 3}
        consumer.assign(tps)
        consumer.seek(tps[1], 2)
        consumer.seek_to_end(tps[0])
        assert [r.value for r in read(consumer, 1)] == [b"5"]


SUITE: list[Callable[[Env], None]] = [
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


@contextmanager
def fresh_cluster() -> Iterator[Env]:
    settings: dict[str, Any] = {k.replace(".", "_"): v for k, v in BROKER_SETTINGS.items()}
    with MemoryCluster(**settings) as cluster:
        yield Env(cluster.bootstrap_servers, cluster, cluster.faults)


def run_suite(make_env: Callable[[], Any]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for test in SUITE:
        start = time.perf_counter()
        with make_env() as env:
            test(env)
        seconds[test.__name__] = time.perf_counter() - start
    return seconds


def shared(servers: str, faults: RemoteFaults) -> Callable[[], Any]:
    @contextmanager
    def make() -> Iterator[Env]:
        yield Env(servers, None, faults)

    return make


def fresh_cluster_cost(rounds: int = 20) -> float:
    """Seconds to make and close an empty MemoryCluster."""
    start = time.perf_counter()
    for _ in range(rounds):
        with MemoryCluster():
            pass
    return (time.perf_counter() - start) / rounds


# ---- CPU per Produce request

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds of another process (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def produce_sync(servers: str, topic: str, requests: int) -> float:
    with Producer(bootstrap_servers=servers, acks=1, linger_ms=0) as producer:
        for _ in range(50):
            producer.send(topic, b"x" * 100).result(10)
        cpu = time.process_time()
        for _ in range(requests):
            producer.send(topic, b"x" * 100).result(10)
        return time.process_time() - cpu


def produce_async(servers: str, topic: str, requests: int) -> float:
    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=servers, acks=1, linger_ms=0) as producer:
            for _ in range(50):
                await producer.send_and_wait(topic, b"x" * 100)
            cpu = time.process_time()
            for _ in range(requests):
                await producer.send_and_wait(topic, b"x" * 100)
            return time.process_time() - cpu

    return asyncio.run(run())


def produce_cpu(broker: BrokerProcess, requests: int) -> dict[str, tuple[float, float, float]]:
    """Per producer kind: CPU us per request on memory://, over TCP (client, server)."""
    out = {}
    for kind, run in (("sync", produce_sync), ("async", produce_async)):
        with fresh_cluster() as env:
            memory = run(env.servers, env.topic(), requests)
        env = Env(broker.bootstrap, None)
        topic = env.topic()
        assert broker.process is not None
        server_before = process_cpu(broker.process.pid)
        client = run(broker.bootstrap, topic, requests)
        server = process_cpu(broker.process.pid) - server_before
        out[kind] = (memory / requests * 1e6, client / requests * 1e6, server / requests * 1e6)
    return out


def best_of(
    rounds: int, suites: list[tuple[str, Callable[[], dict[str, float]]]], label: str
) -> dict[str, dict[str, float]]:
    """Each suite run ``rounds`` times in turn; the best round (lowest total) of each."""
    best: dict[str, dict[str, float]] = {}
    for round_ in range(rounds):
        for name, run in suites:
            seconds = run()
            total = sum(seconds.values())
            print(f"round {round_ + 1} {label:5} {name:15} {total:6.2f} s", file=sys.stderr)
            if name not in best or total < sum(best[name].values()):
                best[name] = seconds
    return best


def print_totals(title: str, best: dict[str, dict[str, float]]) -> None:
    memory, serve = best["memory://"], best["kafkette serve"]
    print(f"\n{title}")
    print(f"{'test':48} {'memory://':>10} {'serve':>10}")
    for name in memory:
        print(f"{name:48} {memory[name]:10.3f} {serve[name]:10.3f}")
    total_memory, total_serve = sum(memory.values()), sum(serve.values())
    print(f"{'total':48} {total_memory:10.3f} {total_serve:10.3f}")
    print(f"memory:// is {total_serve / total_memory:.2f}x faster (target >= 3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="suite rounds; the best is kept")
    parser.add_argument("--requests", type=int, default=2000, help="Produce requests for CPU")
    args = parser.parse_args()
    logging.getLogger("kafkette").setLevel(logging.CRITICAL)  # the fenced producer's error
    set_args = [a for key, value in BROKER_SETTINGS.items() for a in ("--set", f"{key}={value}")]
    started = time.perf_counter()
    with BrokerProcess(args=(*set_args, "--enable-fault-injection")) as broker:
        serve_start = time.perf_counter() - started
        with RemoteFaults(broker.bootstrap) as faults:
            sync = best_of(
                args.repeat,
                [
                    ("memory://", lambda: run_suite(fresh_cluster)),
                    ("kafkette serve", lambda: run_suite(shared(broker.bootstrap, faults))),
                ],
                "sync",
            )
            on_trio = best_of(
                args.repeat,
                [
                    (
                        "memory://",
                        lambda: run_async_suite(in_loop_cluster(BROKER_SETTINGS), mock_clock=True),
                    ),
                    (
                        "kafkette serve",
                        lambda: run_async_suite(
                            shared_broker(broker.bootstrap, faults), mock_clock=False
                        ),
                    ),
                ],
                "trio",
            )
        cluster_cost = fresh_cluster_cost()
        cpu = produce_cpu(broker, args.requests)
    print_totals(f"{len(SUITE)} tests, sync clients, best of {args.repeat} rounds (seconds)", sync)
    print_totals(
        f"the same {len(SUITE)} tests, async clients under trio, best of {args.repeat} rounds "
        "(seconds; memory:// = MemoryCluster(in_loop=True) under MockClock(autojump_threshold=0), "
        "serve = trio's real clock)",
        on_trio,
    )
    print(
        f"\na fresh MemoryCluster (made and closed, in each memory:// test): "
        f"{cluster_cost * 1000:.1f} ms; kafkette serve's start (once, not in its total): "
        f"{serve_start:.2f} s"
    )
    print(f"\nCPU per Produce request (acks=1, one 100 B record, {args.requests} requests), us")
    print(f"{'producer':9} {'memory://':>10} {'TCP total':>10} (client + server) ratio")
    for kind, (on_memory, client, server) in cpu.items():
        tcp = client + server
        print(
            f"{kind:9} {on_memory:10.1f} {tcp:10.1f} ({client:6.1f} + {server:6.1f}) "
            f" {on_memory / tcp:5.2f}x (target <= 2x)"
        )


if __name__ == "__main__":
    main()
