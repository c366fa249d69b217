"""Consumer groups of independent clients against ``kafkette serve`` (disk).

For confluent-kafka, kafka-python and aiokafka, in the way Apache Kafka
serves them: one member joins a 4-partition topic and gets every partition;
a second joins and the partitions are split 2/2 (range) with no overlap; the
second leaves and the first owns all again; every record is processed, with
offsets committed after processing; after the members close and the broker
restarts, a new member resumes exactly at the committed offsets.

Members run in child processes (:mod:`tests.group_member`), as a group's
members do in practice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 4
ALL = set(range(PARTITIONS))
GROUP_BROKER_SETTINGS = (
    "--set",
    f"num.partitions={PARTITIONS}",
    "--set",
    "group.min.session.timeout.ms=500",
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", args=GROUP_BROKER_SETTINGS)
    try:
        yield broker.start()
    finally:
        broker.close()


def produce(bootstrap: str, topic: str, start: int, count: int) -> list[tuple[int, str]]:
    """Records ``start..start+count``, record ``i`` to partition ``i % 4``; returns them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = []
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
        sent.append((i % PARTITIONS, str(i)))
    assert producer.flush(30) == 0
    return sent


def values_by_partition(records: list[tuple[int, int, str]]) -> dict[int, list[str]]:
    """Processed values per partition in offset order, duplicates removed."""
    seen: dict[int, dict[int, str]] = {}
    for partition, offset, value in records:
        seen.setdefault(partition, {})[offset] = value
    return {p: [v for _, v in sorted(seen[p].items())] for p in sorted(seen)}


def expected(sent: list[tuple[int, str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for partition, value in sent:
        out.setdefault(partition, []).append(value)
    return dict(sorted(out.items()))


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_group_lifecycle(server: BrokerProcess, client: str) -> None:
    topic, group = f"groups-{client}", f"group-{client}"
    sent = produce(server.bootstrap, topic, 0, 400)

    first = MemberProcess(client, server.bootstrap, group, topic)
    second: MemberProcess | None = None
    try:
        wait_until(lambda: first.assigned == ALL, "first member owns all", [first])
        wait_until(lambda: len(first.records()) >= 400, "first member read 400", [first])

        second = MemberProcess(client, server.bootstrap, group, topic)
        members = [first, second]
        wait_until(lambda: partitions_split(members, PARTITIONS), "2/2 split", members)
        assert sorted(len(m.assigned) for m in members) == [2, 2]

        sent += produce(server.bootstrap, topic, 400, 400)
        wait_until(
            lambda: len({(p, o) for m in members for p, o, _ in m.records()}) >= 800,
            "800 records processed",
            members,
        )
        second.stop()
        wait_until(lambda: first.assigned == ALL, "first owns all again", [first])
        sent += produce(server.bootstrap, topic, 800, 40)
        wait_until(
            lambda: len({(p, o) for m in members for p, o, _ in m.records()}) >= 840,
            "840 records processed",
            members,
        )
        first.stop()
        processed = first.records() + second.records()
        assert values_by_partition(processed) == expected(sent)
    finally:
        first.close()
        if second is not None:
            second.close()

    server.stop()
    server.start()
    resumed_from = len(sent)
    sent_after = produce(server.bootstrap, topic, resumed_from, 20)
    third = MemberProcess(client, server.bootstrap, group, topic)
    try:
        wait_until(lambda: len(third.records()) >= 20, "restarted member read 20", [third])
        third.stop()
        # Exactly the records after the committed offsets: nothing older is read again.
        assert values_by_partition(third.records()) == expected(sent_after)
        assert sorted(o for p, o, _ in third.records() if p == 0) == list(range(210, 215))
    finally:
        third.close()
