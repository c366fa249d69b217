"""The share-group scenario the share consumer tests run against each broker: members
of one group read a topic; by its number, every tenth record is RELEASEd on its first
delivery, another tenth REJECTed, the rest ACCEPTed; in the end each record was accepted
exactly once or rejected once, none lost, released ones came back with a higher count.

Members are wrapped (:class:`Member`) so that one scenario drives our
:class:`~kafkette.ShareConsumer` and confluent-kafka's ``ShareConsumer`` alike. Share
partitions start at the log end (``share.auto.offset.reset`` latest), so the scenario
first produces probes until every partition delivered one (:func:`probe`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Protocol

from kafkette import AcknowledgeType, Producer, ShareConsumer

Seen = list[tuple[bytes, int, AcknowledgeType]]
"""(value, delivery count, how it was acknowledged), in delivery order."""


class Member(Protocol):
    def poll(self, timeout_s: float) -> list[tuple[Any, bytes, int]]:
        """(handle, value, delivery count) of each record one poll gave."""

    def acknowledge(self, handle: Any, kind: AcknowledgeType) -> None: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...


class Ours:
    """Our ShareConsumer, explicit acknowledgement."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = ShareConsumer(
            bootstrap_servers=bootstrap, group_id=group, share_acknowledgement_mode="explicit"
        )
        self.consumer.subscribe([topic])

    def poll(self, timeout_s: float) -> list[tuple[Any, bytes, int]]:
        return [(r, r.value, r.delivery_count) for r in self.consumer.poll(timeout=timeout_s)]

    def acknowledge(self, handle: Any, kind: AcknowledgeType) -> None:
        self.consumer.acknowledge(handle, kind)

    def commit(self) -> None:
        results = self.consumer.commit_sync(timeout=10)
        assert all(error is None for error in results.values()), results

    def close(self) -> None:
        self.consumer.close(timeout=10)


class Confluent:
    """confluent-kafka's ShareConsumer (librdkafka's preview), explicit acknowledgement."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import ShareConsumer as LibrdkafkaShareConsumer

        self.consumer = LibrdkafkaShareConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
            }
        )
        self.consumer.subscribe([topic])

    def poll(self, timeout_s: float) -> list[tuple[Any, bytes, int]]:
        out = []
        for message in self.consumer.poll(timeout_s):
            assert message.error() is None, message.error()
            out.append((message, message.value(), message.delivery_count()))
        return out

    def acknowledge(self, handle: Any, kind: AcknowledgeType) -> None:
        from confluent_kafka import AcknowledgeType as LibrdkafkaType

        self.consumer.acknowledge(handle, LibrdkafkaType(int(kind)))

    def commit(self) -> None:
        assert all(error is None for error in self.consumer.commit_sync(10).values())

    def close(self) -> None:
        self.consumer.close()


def kind(value: bytes) -> str:
    """What the scenario does with a record, by its number."""
    number = int(value.split(b"-")[1])
    return {3: "release", 7: "reject"}.get(number % 10, "accept")


def decide(value: bytes, count: int) -> AcknowledgeType:
    if value.startswith(b"probe"):
        return AcknowledgeType.ACCEPT
    what = kind(value)
    if what == "reject":
        return AcknowledgeType.REJECT
    if what == "release" and count == 1:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def poll_all(members: list[Member], seen: Seen, timeout_s: float = 0.2) -> None:
    """One poll of each member, each record acknowledged as :func:`decide` says, committed."""
    for member in members:
        records = member.poll(timeout_s)
        for handle, value, count in records:
            decision = decide(value, count)
            seen.append((value, count, decision))
            member.acknowledge(handle, decision)
        if records:
            member.commit()


def probe(producer: Producer, members: list[Member], topic: str, partitions: int) -> None:
    """Produce probes until every partition delivered one to some member."""
    seen: Seen = []
    probed: set[int] = set()
    deadline = time.monotonic() + 60
    while len(probed) < partitions:
        assert time.monotonic() < deadline, f"probes delivered from {sorted(probed)} only"
        for partition in range(partitions):
            if partition not in probed:
                producer.send(topic, f"probe-{partition}".encode(), partition=partition)
        producer.flush(10)
        poll_all(members, seen)
        probed |= {int(v.split(b"-")[1]) for v, _, _ in seen if v.startswith(b"probe")}


def run(producer: Producer, members: list[Member], topic: str, partitions: int, count: int) -> Seen:
    """Probe, produce ``count`` records round the partitions, and poll every member
    until each record was accepted or rejected (then a little longer: nothing more
    may come)."""
    probe(producer, members, topic, partitions)
    for number in range(count):
        producer.send(topic, f"record-{number}".encode(), partition=number % partitions)
    producer.flush(10)
    expected = {f"record-{n}".encode() for n in range(count)}
    seen: Seen = []
    deadline = time.monotonic() + 60
    while {v for v, _, t in seen if t != AcknowledgeType.RELEASE} < expected:
        assert time.monotonic() < deadline, f"settled only {len(seen)}: {seen}"
        poll_all(members, seen)
    settle = time.monotonic() + 1
    while time.monotonic() < settle:
        poll_all(members, seen, timeout_s=0.1)
    return [(v, c, t) for v, c, t in seen if not v.startswith(b"probe")]


def check(seen: Seen, count: int) -> None:
    """Every record accepted exactly once or rejected once; released ones once, with
    delivery count 1, then accepted with count 2 or more; the rest delivered once."""
    expected = sorted(f"record-{n}".encode() for n in range(count))
    accepted = sorted(v for v, _, t in seen if t == AcknowledgeType.ACCEPT)
    rejected = sorted(v for v, _, t in seen if t == AcknowledgeType.REJECT)
    released = sorted((v, c) for v, c, t in seen if t == AcknowledgeType.RELEASE)
    assert sorted(accepted + rejected) == expected
    assert len(accepted) == len(set(accepted))
    assert rejected == sorted(v for v in expected if kind(v) == "reject")
    assert released == sorted((v, 1) for v in expected if kind(v) == "release")
    deliveries = Counter(v for v, _, _ in seen)
    for value, delivery_count, decision in seen:
        if kind(value) == "release" and decision == AcknowledgeType.ACCEPT:
            assert delivery_count >= 2, value
        elif kind(value) != "release":
            assert (delivery_count, deliveries[value]) == (1, 1), value
