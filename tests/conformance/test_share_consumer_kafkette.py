"""Our ``ShareConsumer`` against ``kafkette serve``, memory and disk, alone and in one
share group with confluent-kafka's ``ShareConsumer`` (librdkafka's KIP-932 preview).

The scenario (:mod:`tests.consumer.share.scenario`): three members, explicit
acknowledgement, 60 records over three partitions; every tenth RELEASEd on its first
delivery and back with a higher delivery count, another tenth REJECTed and never back,
each record accepted exactly once or rejected, none lost. Then a member in another
process, killed with SIGKILL while it holds records (renewed, so that it may poll on in
explicit mode): another member receives exactly those records, with delivery count 1,
as the broker releases them when the killed member's connection closes (Kafka's
ShareSessionCache disconnect listener lowers the count of records released so).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from kafkette import AcknowledgeType, AdminClient, NewTopic, Producer, ShareConsumer
from tests.brokers import BrokerProcess
from tests.consumer.share import scenario

LOCK_MS = 2_000


@pytest.fixture(scope="module", params=["memory", "disk"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("share") / "data" if request.param == "disk" else None
    broker = BrokerProcess(
        data_dir,
        args=(
            "--set",
            "group.share.heartbeat.interval.ms=200",
            "--set",
            f"group.share.record.lock.duration.ms={LOCK_MS}",
        ),
    )
    try:
        broker.start()
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics(
                [NewTopic("ours", 3), NewTopic("mixed", 3), NewTopic("jobs", 1)], timeout=30
            ).all()
        yield broker
    finally:
        broker.close()


def three(server: BrokerProcess, topic: str, members: list[scenario.Member]) -> None:
    with Producer(bootstrap_servers=server.bootstrap, linger_ms=0) as producer:
        try:
            seen = scenario.run(producer, members, topic, partitions=3, count=60)
        finally:
            for member in members:
                member.close()
    scenario.check(seen, 60)


def test_three_of_ours(server: BrokerProcess) -> None:
    three(server, "ours", [scenario.Ours(server.bootstrap, "ours", "ours") for _ in range(3)])


def test_ours_and_confluent_kafka_in_one_group(server: BrokerProcess) -> None:
    """Two of ours and one of librdkafka's in one group share the records, each settled
    once (the check does not depend on who got what)."""
    members: list[scenario.Member] = [
        scenario.Ours(server.bootstrap, "mixed", "mixed"),
        scenario.Confluent(server.bootstrap, "mixed", "mixed"),
        scenario.Ours(server.bootstrap, "mixed", "mixed"),
    ]
    three(server, "mixed", members)


HOLDER = """
import sys
import time
from kafkette import AcknowledgeType, ShareConsumer

consumer = ShareConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                         share_acknowledgement_mode="explicit")
consumer.subscribe(["jobs"])
held = 0
while held < int(sys.argv[3]):
    for record in consumer.poll(timeout=0.2):
        if record.value.startswith(b"probe"):
            consumer.acknowledge(record)
            consumer.commit_sync(timeout=10)
            print("ready", flush=True)
        else:  # RENEW: still held, and the next poll is allowed (explicit mode)
            consumer.acknowledge(record, AcknowledgeType.RENEW)
            held += 1
            print("held", record.offset, flush=True)
time.sleep(600)  # holding its records until SIGKILL
"""


def test_records_of_a_killed_member_go_to_another_when_its_connection_closes(
    server: BrokerProcess,
) -> None:
    count = 10
    group = f"killed-{time.monotonic_ns()}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, server.bootstrap, group, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in holder.stdout or ()], daemon=True
    )
    reader.start()
    try:
        with Producer(bootstrap_servers=server.bootstrap, linger_ms=0) as producer:
            deadline = time.monotonic() + 60
            seen_lines: list[str] = []
            while "ready\n" not in seen_lines:
                assert time.monotonic() < deadline, "the holder never received a probe"
                producer.send_and_wait("jobs", b"probe", timeout=10)
                with contextlib.suppress(queue.Empty):
                    seen_lines.append(lines.get(timeout=0.5))
            first = producer.send_and_wait("jobs", b"job-0", timeout=10).offset
            for number in range(1, count):
                producer.send("jobs", f"job-{number}".encode())
            producer.flush(10)
        while sum(line.startswith("held") for line in seen_lines) < count:
            assert time.monotonic() < deadline, f"the holder got only {seen_lines}"
            with contextlib.suppress(queue.Empty):
                seen_lines.append(lines.get(timeout=1))
        assert sorted(int(line.split()[1]) for line in seen_lines if line.startswith("held")) == [
            first + n for n in range(count)
        ]
        holder.kill()
        holder.wait()
        got: list[tuple[int, bytes, int]] = []
        with ShareConsumer(
            bootstrap_servers=server.bootstrap,
            group_id=group,
            share_acknowledgement_mode="explicit",
        ) as consumer:
            consumer.subscribe(["jobs"])
            settle: float | None = None
            while settle is None or time.monotonic() < settle:
                assert time.monotonic() < deadline, f"received only {got}"
                for record in consumer.poll(timeout=0.3):
                    got.append((record.offset, record.value, record.delivery_count))
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                consumer.commit_sync(timeout=10)
                if settle is None and len(got) >= count:
                    settle = time.monotonic() + 1
        assert sorted(got) == [(first + n, f"job-{n}".encode(), 1) for n in range(count)]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
