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
