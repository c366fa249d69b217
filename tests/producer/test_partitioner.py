"""Partitioning: murmur2 parity with confluent-kafka, and the uniform sticky choice."""

from __future__ import annotations

import collections
import random

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given
from hypothesis import strategies as st

from kafkette.producer.partitioner import StickyPartitioner, keyed_partition, murmur2
from tests.brokers import BrokerProcess


def test_murmur2_known_values() -> None:
    """Values of Kafka's Utils.murmur2 (Java client test vectors, seed 0x9747b28c)."""
    assert murmur2(b"") == 275646681
    assert keyed_partition(b"", 1) == 0
    assert murmur2(b"21") == (-973932308) & 0xFFFFFFFF
    assert murmur2(b"foobar") == (-790332482) & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-long-string") == (-985981536) & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_keyed_partition_is_in_range(key: bytes, partitions: int) -> None:
    assert 0 <= keyed_partition(key, partitions) < partitions


def test_parity_with_confluent_kafka_murmur2_random(memory_broker: BrokerProcess) -> None:
    """5,000 random keys x partition counts 1..17: the partition librdkafka picked is ours."""
    admin = AdminClient({"bootstrap.servers": memory_broker.bootstrap})
    topics = {n: f"parity-{n}" for n in range(1, 18)}
    futures = admin.create_topics([NewTopic(name, n, 1) for n, name in topics.items()])
    for future in futures.values():
        future.result(30)
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(1, 40)) for _ in range(5000)]
    delivered: list[tuple[str, bytes, int]] = []
    errors: list[object] = []

    def on_delivery(error: object, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append((message.topic(), message.key(), message.partition()))  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": memory_broker.bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "acks": 1,
        }
    )
    for key in keys:
        for name in topics.values():
            producer.produce(name, key=key, value=b"", on_delivery=on_delivery)
            producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert len(delivered) == 5000 * 17
    by_name = {name: n for n, name in topics.items()}
    mismatches = [(t, k, p) for t, k, p in delivered if keyed_partition(k, by_name[t]) != p]
    assert mismatches == []


def test_sticky_stays_until_batch_size_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(1))
    first = sticky.partition("t", 4, 60)
    assert sticky.partition("t", 4, 60) == first  # 60 bytes < 100: stay
    moved = sticky.partition("t", 4, 10)  # 120 >= 100: move
    assert moved != first
    assert sticky.partition("t", 4, 10) == moved


def test_sticky_is_per_topic_and_handles_one_partition() -> None:
    sticky = StickyPartitioner(batch_size=1, rng=random.Random(3))
    assert {sticky.partition("one", 1, 5) for _ in range(10)} == {0}
    sticky.partition("a", 3, 0)
    assert 0 <= sticky.partition("b", 3, 0) < 3


def test_sticky_spreads_evenly_over_time() -> None:
    """Many batches: every partition gets a fair share (KIP-794 uniform sticky)."""
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(11))
    counts = collections.Counter(sticky.partition("t", 6, 100) for _ in range(60_000))
    assert set(counts) == set(range(6))
    assert max(counts.values()) / min(counts.values()) < 1.25


def test_sticky_survives_partition_count_shrinking_below_current() -> None:
    sticky = StickyPartitioner(batch_size=10**9, rng=random.Random(5))
    for _ in range(20):
        if sticky.partition("t", 8, 1) >= 2:
            break
    assert sticky.partition("t", 2, 1) in (0, 1)
