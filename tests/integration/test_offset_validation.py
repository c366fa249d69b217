"""Kafka's OffsetValidationTest invariants for kafkette's group consumer.

Three kafkette members (child processes, committing after processing) read a
6-partition topic on ``kafkette serve`` while members are bounced one after
another and more records arrive:

- clean bounce (close, then a new member): every record is processed exactly
  once; no duplicates, since each member committed what it processed before
  it left and the next owner starts there;
- hard bounce (SIGKILL, then a new member): every record is processed at
  least once; none is skipped.

And, in process: with manual commits, the last committed offset of each
partition equals the consumer's position.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafkette import Consumer, TopicPartition
from kafkette import Producer as KafketteProducer
from kafkette.testing import close_memory_cluster, memory_cluster
from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 6
MEMBERS = 3
SESSION_MS = 2_000
BATCH = 1_500


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "data",
        args=("--set", f"num.partitions={PARTITIONS}", "--set", "group.min.session.timeout.ms=500"),
    )
    try:
        yield broker.start()
    finally:
        broker.close()


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def bounce_rounds(server: BrokerProcess, topic: str, hard: bool) -> list[MemberProcess]:
    """Run the group through a bounce of every member; returns every member that ran."""

    def member() -> MemberProcess:
        return MemberProcess(
            "kafkette", server.bootstrap, topic, topic, session_timeout_ms=SESSION_MS
        )

    produce(server.bootstrap, topic, 0, BATCH)
    active = [member() for _ in range(MEMBERS)]
    everyone = list(active)
    produced = BATCH

    def processed() -> set[int]:
        return {int(v) for m in everyone for _, _, v in m.records()}

    for index in range(MEMBERS):
        wait_until(lambda: partitions_split(active, PARTITIONS), "a stable split", active)
        wait_until(lambda n=produced: len(processed()) == n, f"{produced} processed", active)
        leaving = active[index]
        if hard:
            leaving.kill()
        else:
            leaving.stop()
        active[index] = member()
        everyone.append(active[index])
        produce(server.bootstrap, topic, produced, BATCH)
        produced += BATCH
    wait_until(lambda: partitions_split(active, PARTITIONS), "a stable split", active)
    wait_until(lambda: len(processed()) == produced, f"{produced} processed", active)
    for m in active:
        m.stop()
    return everyone


def test_clean_bounce_processes_every_record_exactly_once(server: BrokerProcess) -> None:
    everyone = bounce_rounds(server, "clean-bounce", hard=False)
    try:
        counts = Counter((p, o) for m in everyone for p, o, _ in m.records())
        assert len(counts) == BATCH * (MEMBERS + 1)
        assert [key for key, n in counts.items() if n > 1] == []
        assert [m.commit_failures for m in everyone] == [[]] * len(everyone)
    finally:
        for m in everyone:
            m.close()


def test_hard_bounce_skips_no_record(server: BrokerProcess) -> None:
    everyone = bounce_rounds(server, "hard-bounce", hard=True)
    try:
        values = {int(v) for m in everyone for _, _, v in m.records()}
        assert values == set(range(BATCH * (MEMBERS + 1)))
        # Per partition, offsets seen are contiguous from 0: nothing skipped in between.
        for partition in range(PARTITIONS):
            offsets = {o for m in everyone for p, o, _ in m.records() if p == partition}
            assert offsets == set(range(len(offsets)))
    finally:
        for m in everyone:
            m.close()


def test_manual_commit_equals_position() -> None:
    url = memory_cluster("offset-validation-manual", properties={"num.partitions": "3"})
    try:
        check_manual_commits(url)
    finally:
        close_memory_cluster("offset-validation-manual")


def check_manual_commits(url: str) -> None:
    with KafketteProducer(bootstrap_servers=url) as producer:
        for i in range(300):
            producer.send("manual", value=b"%d" % i, partition=i % 3)
    settings = {
        "bootstrap_servers": url,
        "group_id": "manual",
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    seen = 0
    with Consumer(settings) as consumer:
        consumer.subscribe(["manual"])
        while seen < 300:
            batches = consumer.poll(timeout_ms=5_000)
            assert batches, "no records within 5 s"
            seen += sum(len(records) for records in batches.values())
            consumer.commit()
        partitions = [TopicPartition("manual", p) for p in range(3)]
        committed = consumer.committed(partitions)
        positions = {tp: consumer.position(tp) for tp in partitions}
    assert {tp: c.offset if c else None for tp, c in committed.items()} == positions
    assert positions == dict.fromkeys(partitions, 100)
