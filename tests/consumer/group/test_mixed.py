"""One group, two clients: a kafkette Consumer and a confluent-kafka (librdkafka) member
in a child process, with the same assignor, split the partitions with no overlap."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkette import Consumer, ConsumerRecord, TopicPartition
from tests.brokers import BrokerProcess
from tests.consumer.group.helpers import numbers, poll_until
from tests.consumer.group.test_membership import settings
from tests.consumer.targets import Target
from tests.group_harness import MemberProcess


@pytest.fixture
def serve_target(group_serve_broker: BrokerProcess) -> Iterator[Target]:
    target = Target("serve", group_serve_broker.bootstrap)
    try:
        yield target
    finally:
        target.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_kafkette_and_confluent_members_split_the_partitions(
    serve_target: Target, topic: str, group: str, assignor: str
) -> None:
    serve_target.create_topic(topic, 4)
    other = MemberProcess("confluent", serve_target.bootstrap, group, topic, assignor=assignor)
    try:
        config = settings(
            serve_target, group, partition_assignment_strategy=[assignor], enable_auto_commit=False
        )
        got: list[ConsumerRecord] = []
        with Consumer(config) as ours:
            ours.subscribe([topic])

            def split() -> bool:
                mine = set(numbers(ours.assignment()))
                return (
                    len(mine) == 2
                    and mine | other.assigned == {0, 1, 2, 3}
                    and not (mine & other.assigned)
                )

            poll_until([ours], split, got)
            assert got == []
            mine = numbers(ours.assignment())
            for p in range(4):
                serve_target.produce_values(TopicPartition(topic, p), 3)
            if assignor == "range":
                assert {tuple(mine), tuple(sorted(other.assigned))} == {(0, 1), (2, 3)}

            def all_read() -> bool:
                theirs = {(p, o) for p, o, _ in other.records()}
                return len(theirs) + len(got) >= 12

            poll_until([ours], all_read, got)
            ours_read = sorted((r.partition, r.offset, r.value) for r in got)
            assert ours_read == [(p, i, b"v%d" % i) for p in mine for i in range(3)]
            theirs_read = sorted(other.records())
            assert theirs_read == [
                (p, i, f"v{i}") for p in sorted({0, 1, 2, 3} - set(mine)) for i in range(3)
            ]
        other.stop()
    finally:
        other.close()
