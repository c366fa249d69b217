"""Produce and consume round trips with independent clients against ``kafkette serve``.

Each client produces 10,000 keyed records with headers to a 3-partition topic
(record ``i`` to partition ``i % 3``) with one codec, and consumes them back:
every partition must hold exactly its records, in order, at contiguous
offsets from 0. Acks vary with the codec (0, 1 and all are each covered by
every client). The topic is auto-created by the clients' Metadata requests
with ``num.partitions=3``; consumers assign partitions (no group).

Peers' limits: kcat (-P) sets the same headers on every record, so its
records carry the codec name rather than the record index.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from tests.brokers import BrokerProcess, kafkette_broker

N = 10_000
PARTITIONS = 3
TIMEOUT_S = 60.0
RUNS = [
    ("none", 0, "memory"),
    ("gzip", 1, "disk"),
    ("snappy", -1, "memory"),
    ("lz4", 0, "disk"),
    ("zstd", -1, "memory"),
]
"""Codec, acks and storage of each run: every client covers acks 0, 1 and all, and both
backends (each run starts its own broker; the full cross-product would double the time)."""
CODECS = pytest.mark.parametrize(
    ("codec", "acks", "server"),
    RUNS,
    indirect=["server"],
    ids=[f"{codec}-acks{acks}-{storage}" for codec, acks, storage in RUNS],
)

Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]
Consumed = dict[int, list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]]


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """``kafkette serve`` on the run's backend, auto-creating topics with 3 partitions."""
    data_dir = tmp_path / "data" if request.param == "disk" else None
    yield from kafkette_broker(data_dir, "--set", f"num.partitions={PARTITIONS}")


def record(i: int) -> tuple[int, bytes, bytes, list[tuple[str, bytes]]]:
    value = b"value-%05d-" % i + b"x" * (i % 50)
    return i % PARTITIONS, b"key-%05d" % i, value, [("source", b"conformance"), ("i", b"%d" % i)]


def expected(headers: list[tuple[str, bytes]] | None = None) -> dict[int, list[Row]]:
    rows: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    for i in range(N):
        partition, key, value, own = record(i)
        rows[partition].append((key, value, own if headers is None else headers))
    return rows


def check(consumed: Consumed, headers: list[tuple[str, bytes]] | None = None) -> None:
    want = expected(headers)
    for partition in range(PARTITIONS):
        got = consumed.get(partition, [])
        assert [o for o, *_ in got] == list(range(len(want[partition])))
        assert [(k, v, h) for _, k, v, h in got] == want[partition]


def ack_name(acks: int) -> str:
    return "all" if acks == -1 else str(acks)


@CODECS
def test_confluent_kafka(server: BrokerProcess, codec: str, acks: int) -> None:
    topic = f"ck-{codec}"
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "compression.type": codec,
            "acks": ack_name(acks),
            "linger.ms": 5,
        }
    )
    for i in range(N):
        partition, key, value, own = record(i)
        headers: list[tuple[str, str | bytes | None]] = list(own)
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    consumed: Consumed = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    while count < N and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            assert message.error() is None, message.error()
            got = [(str(k), v) for k, v in message.headers() or [] if isinstance(v, bytes)]
            consumed.setdefault(message.partition() or 0, []).append(
                (message.offset() or 0, message.key(), message.value(), got)
            )
            count += 1
    consumer.close()
    check(consumed)


@CODECS
def test_kafka_python(server: BrokerProcess, codec: str, acks: int) -> None:
    topic = f"kp-{codec}"
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=ack_name(acks) if acks == -1 else acks,
        enable_idempotence=False,
        linger_ms=5,
    )
    for i in range(N):
        partition, key, value, headers = record(i)
        producer.send(topic, value=value, key=key, partition=partition, headers=headers)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    consumed: Consumed = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    while count < N and time.monotonic() < deadline:
        for tp, messages in consumer.poll(timeout_ms=500).items():
            for m in messages:
                consumed.setdefault(tp.partition, []).append(
                    (m.offset, m.key, m.value, list(m.headers))
                )
                count += 1
    consumer.close()
    check(consumed)


@CODECS
def test_aiokafka(server: BrokerProcess, codec: str, acks: int) -> None:
    topic = f"aio-{codec}"

    async def run() -> Consumed:
        producer = AIOKafkaProducer(
            bootstrap_servers=server.bootstrap,
            compression_type=None if codec == "none" else codec,
            acks=ack_name(acks) if acks == -1 else acks,
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = []
            for i in range(N):
                partition, key, value, headers = record(i)
                futures.append(
                    await producer.send(
                        topic, value=value, key=key, partition=partition, headers=headers
                    )
                )
            await producer.flush()
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=server.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        consumed: Consumed = {}
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            count = 0
            deadline = time.monotonic() + TIMEOUT_S
            while count < N and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, messages in batches.items():
                    for m in messages:
                        consumed.setdefault(tp.partition, []).append(
                            (m.offset, m.key, m.value, list(m.headers))
                        )
                        count += 1
        finally:
            await consumer.stop()
        return consumed

    check(asyncio.run(run()))


@CODECS
def test_kcat(server: BrokerProcess, codec: str, acks: int) -> None:
    topic = f"kcat-{codec}"
    headers = [("source", b"kcat"), ("codec", codec.encode())]
    for partition in range(PARTITIONS):
        lines = b"".join(
            key + b":" + value + b"\n"
            for i in range(N)
            for p, key, value, _ in [record(i)]
            if p == partition
        )
        command = ["kcat", "-P", "-b", server.bootstrap, "-t", topic, "-p", str(partition)]
        command += ["-K:", "-z", codec, "-X", f"acks={ack_name(acks)}", "-X", "linger.ms=5"]
        command += ["-H", "source=kcat", "-H", f"codec={codec}"]
        subprocess.run(
            command,
            input=lines,
            check=True,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    consumed: Consumed = {}
    for partition in range(PARTITIONS):
        command = ["kcat", "-C", "-b", server.bootstrap, "-t", topic, "-p", str(partition)]
        command += ["-o", "beginning", "-e", "-f", "%o|%k|%s|%h\n"]
        result = subprocess.run(
            command,
            check=True,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
        rows = consumed.setdefault(partition, [])
        for line in result.stdout.splitlines():
            offset, key, value, header_text = line.split(b"|")
            parsed = [
                (name.decode(), val)
                for name, _, val in (h.partition(b"=") for h in header_text.split(b","))
            ]
            rows.append((int(offset), key, value, parsed))
    check(consumed, headers)
