"""``kafkette groups`` on a share group made by confluent-kafka's ``ShareConsumer`` on a
disk ``kafkette serve``: listed with type share, described with start offset, end and
lag, reset to the earliest offset, and the reset start offset kept across a restart
(the next ShareConsumer receives the same records again). The commands run in this
process (``kafkette.cli.main``): the broker and the consumers are the slow part."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer

from kafkette import AdminClient, NewTopic, Producer, TopicPartition
from kafkette.cli import main
from tests.brokers import BrokerProcess

GROUP, TOPIC = "workers", "jobs"
JOBS0 = TopicPartition(TOPIC, 0)


def run(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, str, str]:
    """``kafkette ARGS -b bootstrap``: exit status, stdout, stderr."""
    capsys.readouterr()
    code = main([*args, "-b", bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def ok(answer: tuple[int, str, str]) -> str:
    assert answer[0::2] == (0, ""), answer
    return answer[1]


def consumer(bootstrap: str) -> ShareConsumer:
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    member.subscribe([TOPIC])
    return member


def take(member: ShareConsumer, count: int) -> list[bytes]:
    """The values of the next ``count`` records (implicit acknowledgement: accepted)."""
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count:
        assert time.monotonic() < deadline, f"only {values} delivered"
        for message in member.poll(0.2):
            assert message.error() is None, message.error()
            value = message.value()
            assert isinstance(value, bytes)
            values.append(value)
    assert all(error is None for error in member.commit_sync(10).values())
    return values


def test_share_group_listed_described_and_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)]).all()
            member = consumer(bootstrap)
            deadline = time.monotonic() + 30
            # The share partition starts at the log end once the member first fetches.
            while admin.list_share_group_offsets(GROUP, [JOBS0]).all()[JOBS0] is None:
                assert time.monotonic() < deadline, "the share partition never started"
                member.poll(0.2)
        with Producer(bootstrap_servers=bootstrap) as producer:
            for n in range(5):
                producer.send(TOPIC, f"job-{n}".encode(), partition=0)
        assert sorted(take(member, 5)) == [f"job-{n}".encode() for n in range(5)]

        assert ok(run(capsys, bootstrap, "groups", "list")) == (
            "GROUP    TYPE   STATE   SIMPLE  COORDINATOR\nworkers  share  Stable  false   1\n"
        )
        refused = run(
            capsys, bootstrap, "groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest"
        )
        assert refused[0::2] == (
            1,
            "kafkette groups reset-offsets: ILLEGAL_STATE: the offsets of group 'workers' can "
            "only be reset while it has no active members; it has 1 and is Stable\n",
        )
        member.close()

        described = json.loads(ok(run(capsys, bootstrap, "groups", "describe", GROUP, "--json")))
        assert described == {
            "group": GROUP,
            "type": "share",
            "state": "Empty",
            "assignor": "simple",
            "members": 0,
            "partitions": [
                {"topic": TOPIC, "partition": 0, "start": 5, "end": 5, "lag": 0, "members": None}
            ],
            "assignments": [],
        }
        reset = ("groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest", "--execute")
        assert ok(run(capsys, bootstrap, *reset)) == (
            "GROUP    TOPIC  PARTITION  CURRENT  NEW\nworkers  jobs   0          5        0\n"
        )

        broker.stop()
        broker.start()  # the same port and data directory
        assert ok(run(capsys, bootstrap, "groups", "describe", GROUP)) == (
            "GROUP    TYPE   STATE  ASSIGNOR  MEMBERS\n"
            "workers  share  Empty  simple    0\n"
            "\n"
            "TOPIC  PARTITION  START  END  LAG  MEMBERS\n"
            "jobs   0          0      5    5    -\n"
        )
        again = consumer(bootstrap)
        try:
            assert sorted(take(again, 5)) == [f"job-{n}".encode() for n in range(5)]
        finally:
            again.close()
    finally:
        broker.close()
