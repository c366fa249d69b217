"""confluent-kafka's ``ShareConsumer`` (librdkafka's KIP-932 preview, confluent-kafka
2.16) against ``kafkette serve``, memory and disk.

Three members of one share group, explicit acknowledgement, read a topic of three
partitions. Every tenth record (offset-independent: by its value) is RELEASEd on its
first delivery and must come back with ``delivery_count() >= 2``; another tenth is
REJECTed and must never come back; the rest are ACCEPTed and never redelivered. In the
end every record was accepted exactly once or rejected once, none lost.

Share partitions start at the log end (``share.auto.offset.reset`` latest, Kafka's
default), so the test first produces probes until each partition has delivered one,
and only then the records it counts.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer

from tests.brokers import BrokerProcess

PARTITIONS = 3
RECORDS = 60
TOPIC = "queue"


@pytest.fixture(params=["memory", "disk"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    data_dir = tmp_path / "data" if request.param == "disk" else None
    broker = BrokerProcess(data_dir, args=("--set", f"num.partitions={PARTITIONS}"))
    try:
        yield broker.start()
    finally:
        broker.close()


def kind(value: bytes) -> str:
    """What the test does with a record: by its number, every tenth released once,
    every tenth rejected, the rest accepted."""
    number = int(value.split(b"-")[1])
    return {3: "release", 7: "reject"}.get(number % 10, "accept")


def ack_type(message: Message) -> AcknowledgeType:
    value = message.value()
    assert isinstance(value, bytes)
    if value.startswith(b"probe"):
        return AcknowledgeType.ACCEPT
    what = kind(value)
    if what == "reject":
        return AcknowledgeType.REJECT
    if what == "release" and message.delivery_count() == 1:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def poll_all(members: list[ShareConsumer], seen: list[tuple[bytes, int, int]]) -> None:
    """One poll of each member, each record acknowledged and committed."""
    for member in members:
        messages = member.poll(0.2)
        for message in messages:
            assert message.error() is None, message.error()
            value = message.value()
            assert isinstance(value, bytes)
            kind_of = ack_type(message)
            seen.append((value, message.delivery_count(), int(kind_of)))
            member.acknowledge(message, kind_of)
        if messages:
            assert all(error is None for error in member.commit_sync(10).values())


def test_three_members_accept_release_and_reject(server: BrokerProcess) -> None:
    """Records are delivered to the group's members, RELEASEd ones come back with
    delivery count 2, REJECTed ones never, ACCEPTed ones exactly once."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    members = [
        ShareConsumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "share-group",
                "share.acknowledgement.mode": "explicit",
            }
        )
        for _ in range(3)
    ]
    try:
        for member in members:
            member.subscribe([TOPIC])
        seen: list[tuple[bytes, int, int]] = []
        probed: set[int] = set()
        deadline = time.monotonic() + 60
        while len(probed) < PARTITIONS:
            assert time.monotonic() < deadline, f"probes delivered from {sorted(probed)} only"
            for partition in range(PARTITIONS):
                if partition not in probed:
                    producer.produce(TOPIC, f"probe-{partition}".encode(), partition=partition)
            producer.flush(10)
            poll_all(members, seen)
            probed |= {int(v.split(b"-")[1]) for v, _, _ in seen if v.startswith(b"probe")}
        seen.clear()
        for number in range(RECORDS):
            producer.produce(TOPIC, f"record-{number}".encode(), partition=number % PARTITIONS)
        assert producer.flush(10) == 0
        expected = {f"record-{n}".encode() for n in range(RECORDS)}
        deadline = time.monotonic() + 60
        while True:
            poll_all(members, seen)
            finished = {v for v, _, t in seen if t != AcknowledgeType.RELEASE}
            if finished >= expected or time.monotonic() > deadline:
                break
        settle = time.monotonic() + 2  # nothing more comes
        while time.monotonic() < settle:
            poll_all(members, seen)
    finally:
        for member in members:
            member.close()
    records = [(v, count, t) for v, count, t in seen if not v.startswith(b"probe")]
    by_value = Counter(v for v, _, _ in records)
    accepted = sorted(v for v, _, t in records if t == AcknowledgeType.ACCEPT)
    rejected = sorted(v for v, _, t in records if t == AcknowledgeType.REJECT)
    released = [(v, count) for v, count, t in records if t == AcknowledgeType.RELEASE]
    assert sorted(accepted + rejected) == sorted(expected)
    assert len(accepted) == len(set(accepted))
    assert all(kind(v) == "reject" for v in rejected) and len(rejected) == RECORDS // 10
    assert sorted(v for v, _ in released) == sorted(v for v in expected if kind(v) == "release")
    assert all(count == 1 for _, count in released)
    for value, count, t in records:
        if kind(value) == "release" and t == AcknowledgeType.ACCEPT:
            assert count >= 2
        elif kind(value) != "release":
            assert count == 1 and by_value[value] == 1


HOLDER = """
import sys
from confluent_kafka import AcknowledgeType, ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "killed",
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[2]])
held = 0
while True:
    messages = consumer.poll(0.2)
    for message in messages:
        if message.error() is not None:
            continue
        if message.value().startswith(b"probe"):
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            print("ready", flush=True)
        else:
            held += 1
            print("held", message.offset(), flush=True)
    if any(m.error() is None and m.value().startswith(b"probe") for m in messages):
        consumer.commit_sync(10)
    if held >= int(sys.argv[3]):
        break
import time
time.sleep(600)  # holding its records until SIGKILL
"""


def test_records_of_a_killed_member_go_to_another_when_its_connection_closes(
    tmp_path: Path,
) -> None:
    """A member killed with SIGKILL while it holds 10 records (never acknowledged):
    another member of the group receives exactly those records. Its connection closes,
    so, as Kafka's ShareSessionCache disconnect listener, the broker ends its share
    session and releases its records at once (before their 2 s locks expire), with the
    delivery count lowered as for records fetched but not delivered: they come back with
    delivery count 1."""
    count = 10
    broker = BrokerProcess(
        tmp_path / "data",
        args=("--set", "group.share.record.lock.duration.ms=2000", "--set", "num.partitions=1"),
    ).start()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, broker.bootstrap, "jobs", str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(
            target=lambda: [lines.put(line) for line in holder.stdout or ()], daemon=True
        )
        reader.start()
        deadline = time.monotonic() + 60
        seen_lines: list[str] = []
        while "ready\n" not in seen_lines:
            assert time.monotonic() < deadline, "the holder never received a probe"
            producer.produce("jobs", b"probe")
            producer.flush(10)
            with contextlib.suppress(queue.Empty):
                seen_lines.append(lines.get(timeout=0.5))
        for number in range(count):
            producer.produce("jobs", f"job-{number}".encode())
        assert producer.flush(10) == 0
        while sum(line.startswith("held") for line in seen_lines) < count:
            assert time.monotonic() < deadline, f"the holder got only {seen_lines}"
            seen_lines.append(lines.get(timeout=30))
        holder.kill()
        holder.wait()
        consumer = ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "killed",
                "share.acknowledgement.mode": "explicit",
            }
        )
        got: list[tuple[bytes, int]] = []
        try:
            consumer.subscribe(["jobs"])
            settle: float | None = None
            while settle is None or time.monotonic() < settle:
                assert time.monotonic() < deadline, f"received only {got}"
                messages = consumer.poll(0.3)
                for message in messages:
                    assert message.error() is None, message.error()
                    value = message.value()
                    assert isinstance(value, bytes)
                    got.append((value, message.delivery_count()))
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                if messages:
                    consumer.commit_sync(10)
                if settle is None and len(got) >= count:
                    settle = time.monotonic() + 1
        finally:
            consumer.close()
        assert sorted(got) == sorted((f"job-{n}".encode(), 1) for n in range(count))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        broker.close()
