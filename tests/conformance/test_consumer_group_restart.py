"""A consumer group (KIP-848, ``group.protocol=consumer``) across a restart of
``kafkette serve --data-dir``: two members, librdkafka's (confluent-kafka 2.16) or ours,
consume 20,000 records while they are produced; half way the broker is stopped and
started again on the same directory and port. The group is read back from
``__consumer_offsets``: the members carry on with their partitions (no new assignment,
no fencing), and every record is processed exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.conformance.test_consumer_protocol import PARTITIONS, SlowProducer
from tests.group_harness import MemberProcess, partitions_split, wait_until

RECORDS = 20_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", args=("--set", f"num.partitions={PARTITIONS}"))
    try:
        yield broker.start()
    finally:
        broker.close()


@pytest.mark.parametrize("client", ["confluent", "kafkette"], ids=["librdkafka", "kafkette"])
def test_group_carries_on_across_a_broker_restart(server: BrokerProcess, client: str) -> None:
    """Two members split six partitions 3/3; 20,000 records are produced in steps; when
    half are produced the broker restarts. Afterwards the members hold the partitions they
    held before and were not given them again (no rebalance callback, so not fenced), and
    every record was processed once: none lost, none twice."""
    topic, group = "restart", "restart-group"
    Producer({"bootstrap.servers": server.bootstrap}).list_topics(topic)  # auto-create
    members = [
        MemberProcess(client, server.bootstrap, group, topic, group_protocol="consumer")
        for _ in range(2)
    ]
    try:
        wait_until(lambda: partitions_split(members, PARTITIONS), "2 members split 6", members)
        held = [set(m.assigned) for m in members]
        assert sorted(len(h) for h in held) == [3, 3]
        callbacks = [len(m.rebalances) for m in members]
        producer = SlowProducer(server.bootstrap, topic, RECORDS, steps=20)
        producer.start()
        wait_until(lambda: producer.sent >= RECORDS // 2, "half produced")
        consumed = sum(len(m.records()) for m in members)
        started = time.monotonic()
        server.stop()
        server.start()
        restart_s = time.monotonic() - started
        producer.join(60)
        assert producer.failed is None
        assert producer.sent == RECORDS
        wait_until(
            lambda: sum(len(m.records()) for m in members) >= RECORDS,
            f"{RECORDS} processed",
            members,
        )
        for m in members:
            m.stop()
        assert [set(m.assigned) for m in members] == held
        assert [len(m.rebalances) for m in members] == callbacks
        processed = [r for m in members for r in m.records()]
        assert len(processed) == RECORDS  # nothing seen twice
        assert sorted(int(v) for _, _, v in processed) == list(range(RECORDS))  # nothing lost
        assert 0 < consumed < RECORDS, (consumed, restart_s)
    finally:
        for m in members:
            m.close()
