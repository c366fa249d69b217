"""The consumer group protocol (KIP-848, ``group.protocol=consumer``) of librdkafka
(confluent-kafka 2.16) and of our consumer against ``kafkette serve``.

A group of three members consumes 100,000 records while they are produced, and
every few seconds (each fifth of the records) a member joins or one leaves (a
clean close, epoch -1): join, leave, join, leave.
Every record is processed once: none lost, none seen twice, each partition's offsets
in order. Members run in child processes (:mod:`tests.group_member`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafkette import Consumer
from kafkette.errors import UnsupportedVersionError
from tests.brokers import BrokerProcess, TansuProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 6
RECORDS = 100_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", args=("--set", f"num.partitions={PARTITIONS}"))
    try:
        yield broker.start()
    finally:
        broker.close()


class SlowProducer(threading.Thread):
    """Produces records ``0..count`` (record ``i`` to partition ``i % PARTITIONS``) in
    steps, so that the group is consuming while its membership changes."""

    def __init__(self, bootstrap: str, topic: str, count: int, steps: int = 40) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.count, self.steps = bootstrap, topic, count, steps
        self.sent = 0
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
            step = self.count // self.steps
            for start in range(0, self.count, step):
                for i in range(start, min(start + step, self.count)):
                    producer.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS)
                assert producer.flush(30) == 0
                self.sent = min(start + step, self.count)
                threading.Event().wait(0.2)
        except BaseException as exc:  # reported by the test
            self.failed = exc


def distinct(members: list[MemberProcess]) -> set[tuple[int, int]]:
    return {(p, o) for m in members for p, o, _ in m.records()}


@pytest.mark.parametrize(
    "clients",
    [
        ("confluent", "confluent", "confluent", "confluent"),
        ("kafkette", "kafkette", "kafkette", "kafkette"),
        ("kafkette", "confluent", "kafkette", "confluent"),
    ],
    ids=["librdkafka", "kafkette", "mixed"],
)
def test_group_while_members_join_and_leave(
    server: BrokerProcess, clients: tuple[str, ...]
) -> None:
    """Three members split six partitions 2/2/2; while 100,000 records are produced a
    member joins, one leaves, another joins and another leaves, a few seconds apart,
    without waiting for the group to settle in between; every record is processed
    exactly once, in offset order per partition, and the three members left own every
    partition. With librdkafka members, with ours, and with both in one group."""
    topic, group = "kip848", "kip848-group"
    Producer({"bootstrap.servers": server.bootstrap}).list_topics(topic)  # auto-create

    def member(client: str) -> MemberProcess:
        return MemberProcess(client, server.bootstrap, group, topic, group_protocol="consumer")

    members = [member(client) for client in clients[:3]]
    try:
        # KIP-848 reconciles step by step: a partition moves to the newest member only
        # once its owner has released it, so a split of 1/2/3 that covers all six is a
        # passing state on the way to 2/2/2. Wait for the target itself.
        wait_until(
            lambda: (
                partitions_split(members, PARTITIONS)
                and sorted(len(m.assigned) for m in members) == [2, 2, 2]
            ),
            "3 members split 6 two each",
            members,
        )
        producer = SlowProducer(server.bootstrap, topic, RECORDS, steps=50)
        producer.start()
        for fifth, change in enumerate(("join", "leave", "join", "leave"), start=1):
            wait_until(lambda f=fifth: producer.sent >= RECORDS * f // 5, f"{fifth}/5 produced")
            if change == "join":
                members.append(member(clients[len(members) % len(clients)]))
            else:
                next(m for m in members if m.process.poll() is None).stop()
        staying = [m for m in members if m.process.poll() is None]
        assert len(staying) == 3
        wait_until(lambda: partitions_split(staying, PARTITIONS), "3 members split 6", staying)
        producer.join(60)
        assert producer.failed is None
        assert producer.sent == RECORDS
        wait_until(lambda: len(distinct(members)) >= RECORDS, f"{RECORDS} processed", members)
        for m in staying:
            m.stop()
        processed = [r for m in members for r in m.records()]
        assert len(processed) == RECORDS  # nothing seen twice
        assert sorted(int(v) for _, _, v in processed) == list(range(RECORDS))  # nothing lost
        for partition in range(PARTITIONS):
            offsets = sorted(o for p, o, _ in processed if p == partition)
            assert offsets == list(
                range(RECORDS // PARTITIONS + (partition < RECORDS % PARTITIONS))
            )
            values = [int(v) for p, o, v in sorted(processed, key=lambda r: r[1]) if p == partition]
            assert values == list(range(partition, RECORDS, PARTITIONS))
        # A commit sent just before a heartbeat bumps the member's epoch is refused with
        # STALE_MEMBER_EPOCH, as Kafka refuses it and Java's commitSync reports it
        # (CommitFailedException); the member still owns the partitions and its next
        # commit covers them. No other commit failure is expected.
        failures = [f for m in members for f in m.commit_failures]
        assert all("STALE_MEMBER_EPOCH" in f for f in failures), failures
    finally:
        for m in members:
            m.close()


def test_against_tansu_which_does_not_serve_the_protocol(tansu: TansuProcess) -> None:
    """Tansu (the broker nobody here wrote that the other conformance tests use) serves no
    ConsumerGroupHeartbeat: our consumer says so from poll, naming the setting to change,
    instead of waiting for an assignment that never comes."""
    tansu.create_topic("t", 2)
    with Consumer(
        bootstrap_servers=tansu.bootstrap, group_id="g", group_protocol="consumer"
    ) as consumer:
        consumer.subscribe(["t"])
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match=r"use group\.protocol=classic"):
            while time.monotonic() - started < 30:
                consumer.poll(0.2)
        assert time.monotonic() - started < 10
