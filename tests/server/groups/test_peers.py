"""Other clients' group consumers on a ``kafkette serve`` broker: they split the partitions,
commit, resume from their commits after a restart, and take over from a crashed member."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer  # type: ignore[import-untyped]
from kafka.admin import NewTopic  # type: ignore[import-untyped]

from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, partitions_split, wait_until

PARTITIONS = 4
PER_PARTITION = 5


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(
        args=(
            "--set",
            f"num.partitions={PARTITIONS}",
            "--set",
            "group.min.session.timeout.ms=500",
            # Kafka's default is 3 s: a new group's first member waits a little, by when
            # kafka-python knows the topic's partitions. Assigning before it does makes it
            # rejoin at once, where kafka-python 3.0 can drop its own SyncGroup answer.
            "--set",
            "group.initial.rebalance.delay.ms=300",
        )
    ) as running:
        yield running


def produce(bootstrap: str, round_: int) -> set[tuple[int, int, str]]:
    """PER_PARTITION records to each partition; returns (partition, offset, value)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(PER_PARTITION):
            for p in range(PARTITIONS):
                producer.send("t", value=f"r{round_}-p{p}-{i}".encode(), partition=p)
        producer.flush()
    finally:
        producer.close()
    base = round_ * PER_PARTITION
    return {
        (p, base + i, f"r{round_}-p{p}-{i}")
        for p in range(PARTITIONS)
        for i in range(PER_PARTITION)
    }


def processed(members: list[MemberProcess]) -> list[tuple[int, int, str]]:
    return [record for m in members for record in m.records()]


def create_topic(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])
    finally:
        admin.close()


def start_pair(client: str, bootstrap: str) -> list[MemberProcess]:
    """Two members of group ``g`` on ``t``, once they own two partitions each.

    The second starts once the first owns every partition, so that the first's early
    rebalances (while it learns the topic's partitions) are over.
    """
    members: list[MemberProcess] = []
    try:
        members.append(MemberProcess(client, bootstrap, "g", "t", session_timeout_ms=2_000))
        wait_until(lambda: members[0].assigned == set(range(PARTITIONS)), "a first member", members)
        members.append(MemberProcess(client, bootstrap, "g", "t", session_timeout_ms=2_000))
        wait_until(lambda: partitions_split(members, PARTITIONS), "a 2+2 split", members)
    except BaseException:
        for m in members:
            m.close()
        raise
    assert sorted(len(m.assigned) for m in members) == [2, 2]
    return members


@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_group_of_two_splits_commits_and_resumes(broker: BrokerProcess, client: str) -> None:
    """Two members get two partitions each and consume every record once; a new pair resumes
    after the committed offsets; when one member is killed, the other takes all four."""
    create_topic(broker.bootstrap)
    members = start_pair(client, broker.bootstrap)
    try:
        first = produce(broker.bootstrap, 0)
        wait_until(lambda: len(processed(members)) >= len(first), "every record", members)
        assert sorted(processed(members)) == sorted(first)
        assert [{p for p, _, _ in m.records()} for m in members] == [m.assigned for m in members]
        for m in members:
            m.stop()
    finally:
        for m in members:
            m.close()

    # A new pair (records only once it is split: a member alone would consume them, and its
    # commits could then fail in the rebalance, which the harness's members do not survive).
    resumed = start_pair(client, broker.bootstrap)
    try:
        produced = produce(broker.bootstrap, 1)
        wait_until(lambda: len(processed(resumed)) >= len(produced), "the new records", resumed)
        # From the committed offsets: nothing of round 0 again.
        assert sorted(processed(resumed)) == sorted(produced)
        victim, survivor = resumed
        victim.kill()
        wait_until(lambda: survivor.assigned == set(range(PARTITIONS)), "take-over", resumed)
        final = produce(broker.bootstrap, 2)
        wait_until(
            lambda: {r for r in survivor.records() if r[2].startswith("r2-")} >= final,
            "records after the take-over",
            resumed,
        )
        assert sorted(r for r in survivor.records() if r[2].startswith("r2-")) == sorted(final)
        survivor.stop()
    finally:
        for m in resumed:
            m.close()
