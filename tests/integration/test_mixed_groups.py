"""Groups that mix kafkette and confluent-kafka (librdkafka) consumers on ``kafkette serve``.

Two kafkette and two confluent-kafka members share a 12-partition topic of
20,000 records, committing after processing. At every stable point each
partition is owned by exactly one member; a member killed without leaving
loses its partitions once its session times out; in the end every record has
been processed at least once and none is skipped.

Static membership: a static member that restarts within its session timeout
gets its partitions back and the other members see no rebalance.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 12
SESSION_MS = 2_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "data",
        args=(
            "--set",
            f"num.partitions={PARTITIONS}",
            "--set",
            "group.min.session.timeout.ms=500",
        ),
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


def balanced(members: list[MemberProcess], sizes: list[int]) -> bool:
    """Every partition owned by exactly one member, in shares of ``sizes``."""
    shares = sorted(len(m.assigned) for m in members)
    return partitions_split(members, PARTITIONS) and shares == sizes


def processed_values(members: list[MemberProcess]) -> set[int]:
    return {int(value) for m in members for _, _, value in m.records()}


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_mixed_group_with_a_hard_kill(server: BrokerProcess, assignor: str) -> None:
    topic, group = f"mixed-{assignor}", f"mixed-{assignor}"
    produce(server.bootstrap, topic, 0, 10_000)
    members = [
        MemberProcess(
            client, server.bootstrap, group, topic, assignor=assignor, session_timeout_ms=SESSION_MS
        )
        for client in ("kafkette", "confluent", "kafkette", "confluent")
    ]
    try:
        # (cooperative rebalancing passes through unbalanced splits on its way)
        wait_until(lambda: balanced(members, [3, 3, 3, 3]), "a 3/3/3/3 split", members)

        produce(server.bootstrap, topic, 10_000, 10_000)
        wait_until(lambda: len(processed_values(members)) >= 12_000, "12,000 processed", members)

        victim, survivors = members[1], [m for i, m in enumerate(members) if i != 1]
        victim.kill()
        killed_at = time.monotonic()
        wait_until(lambda: balanced(survivors, [4, 4, 4]), "a 4/4/4 split", survivors)
        # The dead member's partitions move only once its session has timed out.
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.9

        wait_until(lambda: processed_values(members) == set(range(20_000)), "all 20,000", survivors)
        for member in survivors:
            member.stop()
        # Per partition, the values seen are exactly the partition's records: none skipped.
        by_partition: dict[int, set[int]] = {}
        for m in members:
            for partition, _, value in m.records():
                by_partition.setdefault(partition, set()).add(int(value))
        assert by_partition == {p: set(range(p, 20_000, PARTITIONS)) for p in range(PARTITIONS)}
    finally:
        for member in members:
            member.close()


@pytest.mark.parametrize("client", ["kafkette", "confluent"])
def test_static_member_restart_keeps_its_partitions(server: BrokerProcess, client: str) -> None:
    topic, group = f"static-{client}", f"static-{client}"
    produce(server.bootstrap, topic, 0, 1_200)
    session_ms = 10_000

    def member(instance: str) -> MemberProcess:
        return MemberProcess(
            client,
            server.bootstrap,
            group,
            topic,
            instance_id=instance,
            session_timeout_ms=session_ms,
        )

    stable, bouncing = member("static-a"), member("static-b")
    restarted: MemberProcess | None = None
    try:
        both = [stable, bouncing]
        wait_until(lambda: partitions_split(both, PARTITIONS), "a 6/6 split", both)
        before = set(bouncing.assigned)
        rebalances_seen = len(stable.rebalances)

        bouncing.kill()
        killed_at = time.monotonic()
        restarted = member("static-b")
        wait_until(lambda: restarted.assigned == before, "same partitions back", [restarted])
        assert time.monotonic() - killed_at < session_ms / 1000
        # The other member took part in no rebalance: it kept its partitions throughout.
        assert len(stable.rebalances) == rebalances_seen
        assert stable.assigned | restarted.assigned == set(range(PARTITIONS))
    finally:
        for m in (stable, bouncing, restarted):
            if m is not None:
                m.close()
