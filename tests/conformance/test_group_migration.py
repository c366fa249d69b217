"""Online migration of a consumer group against ``kafkette serve`` (KIP-848,
``group.consumer.migration.policy=bidirectional``, Kafka 4's default).

A classic group of two kafkette consumers (range, or cooperative-sticky) consumes keyed
records while they are produced; midway a ``group.protocol=consumer`` member joins
(ours, or librdkafka's): the broker converts the group into a consumer group whose two
classic members stay, and hands partitions to the new member once a classic member gave
them up on its rejoin. Then the new member leaves: the group becomes classic again and
the two take every partition back while more records are produced. Every record is
processed once, and the committed offsets reach each partition's end.
Members run in child processes (:mod:`tests.group_member`), committing synchronously
after processing each poll.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer, TopicPartition

from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 6
RECORDS = 20_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", args=("--set", f"num.partitions={PARTITIONS}"))
    try:
        yield broker.start()
    finally:
        broker.close()


class KeyedProducer(threading.Thread):
    """Produces records ``first..first+count`` with key ``k<i>`` (the partitioner picks the
    partition) in steps, so that the group is consuming while its membership changes."""

    def __init__(
        self, bootstrap: str, topic: str, count: int, steps: int = 40, first: int = 0
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.count, self.steps = bootstrap, topic, count, steps
        self.first = first
        self.sent = 0
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
            step = self.count // self.steps
            for start in range(0, self.count, step):
                for i in range(self.first + start, self.first + min(start + step, self.count)):
                    producer.produce(self.topic, key=f"k{i}".encode(), value=str(i).encode())
                assert producer.flush(30) == 0
                self.sent = min(start + step, self.count)
                threading.Event().wait(0.2)
        except BaseException as exc:  # reported by the test
            self.failed = exc


def committed_and_ends(bootstrap: str, group: str, topic: str) -> tuple[list[int], list[int]]:
    """The group's committed offset and the end offset of every partition."""
    reader = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = [tp.offset for tp in reader.committed(parts, timeout=10)]
        ends = [reader.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
    finally:
        reader.close()
    return committed, ends


@pytest.mark.parametrize(
    ("assignor", "newcomer"),
    [("range", "kafkette"), ("range", "confluent"), ("cooperative-sticky", "kafkette")],
)
def test_classic_group_joined_by_a_consumer_member(
    server: BrokerProcess, assignor: str, newcomer: str
) -> None:
    """Two classic kafkette members (range: eager; cooperative-sticky: they report what they
    own when they rejoin) split six partitions 3/3; a consumer-protocol member
    (ours, or librdkafka's) joins while 20,000 keyed records are produced; the group is
    upgraded and the three split the partitions; once all are processed the newcomer
    leaves, the group is downgraded and the two split the partitions again while 10,000
    more are produced. Every record is processed exactly once (the exact set of values, no
    repeats) and the committed offsets are the partitions' ends."""
    topic, group = "migrate", "migrate-group"
    Producer({"bootstrap.servers": server.bootstrap}).list_topics(topic)  # auto-create
    members = [
        MemberProcess("kafkette", server.bootstrap, group, topic, assignor=assignor)
        for _ in range(2)
    ]

    def processed_values() -> set[str]:
        return {v for m in members for _, _, v in m.records()}

    try:
        wait_until(lambda: partitions_split(members, PARTITIONS), "2 members split 6", members)
        assert sorted(len(m.assigned) for m in members) == [3, 3]
        producer = KeyedProducer(server.bootstrap, topic, RECORDS)
        producer.start()
        wait_until(lambda: producer.sent >= RECORDS // 4, "a quarter produced")
        members.append(
            MemberProcess(newcomer, server.bootstrap, group, topic, group_protocol="consumer")
        )
        wait_until(lambda: partitions_split(members, PARTITIONS), "3 members split 6", members)
        assert "upgraded to a consumer group with 2 member(s)" in server.log()
        producer.join(60)
        assert (producer.failed, producer.sent) == (None, RECORDS)
        wait_until(lambda: len(processed_values()) >= RECORDS, f"{RECORDS} processed", members)
        assert members[2].records()  # the newcomer processed records too

        members[2].stop()
        classic = members[:2]
        wait_until(lambda: partitions_split(classic, PARTITIONS), "2 members split 6", classic)
        assert "downgraded to a classic group with 2 member(s)" in server.log()
        more = KeyedProducer(server.bootstrap, topic, RECORDS // 2, first=RECORDS)
        more.start()
        more.join(60)
        assert (more.failed, more.sent) == (None, RECORDS // 2)
        total = RECORDS + RECORDS // 2
        wait_until(lambda: len(processed_values()) >= total, f"{total} processed", members)
        committed, ends = committed_and_ends(server.bootstrap, group, topic)
        assert committed == ends
        assert sum(ends) == total
        for m in classic:
            m.stop()
        processed = [r for m in members for r in m.records()]
        assert len(processed) == total  # nothing seen twice
        assert sorted(int(v) for _, _, v in processed) == list(range(total))  # nothing lost
        assert all(m.commit_failures == [] for m in members), [m.commit_failures for m in members]
    finally:
        for m in members:
            m.close()
