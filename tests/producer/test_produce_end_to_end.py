"""AsyncProducer (asyncio, trio) and Producer against kafkette serve and Tansu, read back."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette import AsyncProducer, Producer, RecordMetadata
from kafkette.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
    SerializationError,
    UnknownTopicOrPartitionError,
)
from kafkette.producer.futures import RecordFuture
from kafkette.producer.partitioner import keyed_partition
from tests.brokers import BrokerProcess, TansuProcess, free_port, kafkette_broker, tansu_broker
from tests.producer.helpers import DroppingProxy, Stored, create_topic, read_back

PARTITIONS = 3
T0 = 1_600_000_000_000

Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None, int]

RECORDS: list[Rec] = [
    # key, value, headers, explicit partition, timestamp
    (b"k1", b"v1", [], None, T0),
    (None, b"no key", [("h1", b"x"), ("h2", None)], 2, T0 + 1),
    (b"k2", None, [("only", b"")], None, T0 + 2),  # a tombstone
    (None, None, [], 0, T0 + 3),
    (b"k1", b"v2" * 500, [("dup", b"1"), ("dup", b"2")], None, T0 + 10),
    (b"", b"", [], 1, 1_700_000_000_000),
    (None, b"keyless", [], None, T0 + 4),
    *(
        (f"key-{i % 7}".encode(), b"%05d" % i * 20, [("i", b"%d" % i)], None, T0 + 100 + i)
        for i in range(60)
    ),
]

# every codec and every API meet each broker, in six runs per broker
CASES = [
    ("sync", "none"),
    ("asyncio", "gzip"),
    ("trio", "snappy"),
    ("sync", "lz4"),
    ("asyncio", "zstd"),
    ("trio", "none"),
]

_topics = itertools.count()


def new_topic(prefix: str) -> str:
    return f"{prefix}-{next(_topics)}-{time.monotonic_ns()}"


@pytest.fixture(scope="module")
def kafkette_server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None)


@pytest.fixture(scope="module")
def tansu_server() -> Iterator[TansuProcess]:
    yield from tansu_broker()


class Target:
    """A broker under test, with its way of creating topics."""

    def __init__(self, name: str, server: BrokerProcess | TansuProcess) -> None:
        self.name = name
        self.server = server
        self.bootstrap = server.bootstrap

    def topic(self, partitions: int = PARTITIONS) -> str:
        name = new_topic(f"{self.name}-t")
        if isinstance(self.server, TansuProcess):
            self.server.create_topic(name, partitions)
        else:
            create_topic(self.bootstrap, name, partitions)
        return name


@pytest.fixture(params=["kafkette", "tansu"])
def target(request: pytest.FixtureRequest) -> Target:
    server = request.getfixturevalue(f"{request.param}_server")
    return Target(request.param, server)


def produce(
    api: str, bootstrap: str, topic: str, records: list[Rec], **settings: Any
) -> list[RecordMetadata]:
    """Send ``records`` with the chosen API and return their metadata, in order."""
    settings = {"bootstrap_servers": bootstrap, "max_block_ms": 20_000, **settings}
    if api == "sync":
        with Producer(**settings) as producer:
            futures = [
                producer.send(topic, value=v, key=k, headers=h, partition=p, timestamp=ts)
                for k, v, h, p, ts in records
            ]
            producer.flush(30)
            return [f.result(0) for f in futures]

    async def run() -> list[RecordMetadata]:
        async with AsyncProducer(**settings) as producer:
            futures = [
                await producer.send(topic, value=v, key=k, headers=h, partition=p, timestamp=ts)
                for k, v, h, p, ts in records
            ]
            return [await f for f in futures]

    return anyio.run(run, backend=api)


def expected_stored(topic: str, records: list[Rec], metadata: list[RecordMetadata]) -> list[Stored]:
    stored = [
        Stored(topic, md.partition, md.offset, k, v, tuple(h), ts)
        for (k, v, h, _, ts), md in zip(records, metadata, strict=True)
    ]
    return sorted(stored, key=lambda r: (r.partition, r.offset))


@pytest.mark.parametrize(("api", "codec"), CASES)
def test_records_are_stored_exactly(target: Target, api: str, codec: str) -> None:
    """Keys, null keys and values, headers, timestamps, explicit partitions: stored as sent."""
    topic = target.topic()
    metadata = produce(api, target.bootstrap, topic, RECORDS, compression_type=codec, linger_ms=20)
    for (key, _, _, partition, ts), md in zip(RECORDS, metadata, strict=True):
        assert (md.topic, md.timestamp) == (topic, ts)
        if partition is not None:
            assert md.partition == partition
        elif key is not None:
            assert md.partition == keyed_partition(key, PARTITIONS)
    by_partition: dict[int, list[int]] = {}
    for md in metadata:
        by_partition.setdefault(md.partition, []).append(md.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # in send order, no gaps
    stored = read_back(target.bootstrap, topic, PARTITIONS, len(RECORDS))
    assert stored == expected_stored(topic, RECORDS, metadata)


def test_acks_one_and_zero(target: Target) -> None:
    """acks=1 reports offsets; acks=0 cannot (-1), but the records are stored."""
    topic = target.topic(1)
    records: list[Rec] = [(None, b"%d" % i, [], None, T0 + i) for i in range(20)]
    ones = produce("sync", target.bootstrap, topic, records[:10], acks=1)
    assert [md.offset for md in ones] == list(range(10))
    zeros = produce(
        "asyncio", target.bootstrap, topic, records[10:], acks=0, enable_idempotence=False
    )
    assert [md.offset for md in zeros] == [-1] * 10
    stored = read_back(target.bootstrap, topic, 1, 20)
    assert [(r.offset, r.value) for r in stored] == [(i, b"%d" % i) for i in range(20)]


def test_many_records_each_acknowledged_once(kafkette_server: BrokerProcess) -> None:
    """Idempotent by default: 20,000 keyless records over 3 partitions, no gap, no duplicate."""
    topic = new_topic("many")
    create_topic(kafkette_server.bootstrap, topic, PARTITIONS)
    acked: list[tuple[int, int]] = []
    with Producer(bootstrap_servers=kafkette_server.bootstrap, batch_size=4000) as producer:
        for i in range(20_000):
            producer.send(
                topic,
                b"%06d" % i,
                on_delivery=lambda err, md: acked.append((md.partition, md.offset)),
            )
        producer.flush(30)
        metrics = producer.metrics()
    assert len(acked) == 20_000 == len(set(acked))
    assert metrics["records_sent"] == 20_000 and metrics["errors"] == 0
    assert metrics["buffer_bytes_used"] == 0 and metrics["batches_sent"] >= 20_000 * 11 // 4000
    stored = read_back(kafkette_server.bootstrap, topic, PARTITIONS, 20_000)
    assert sorted((r.partition, r.offset) for r in stored) == sorted(acked)
    assert sorted(int(r.value or b"") for r in stored) == list(range(20_000))


def test_dropped_connections_are_retried_transparently() -> None:
    """Connections cut while records are in flight: every record stored once, in order."""
    proxy_port = free_port()
    with BrokerProcess(args=("--advertised-listener", f"127.0.0.1:{proxy_port}")) as broker:
        proxy = DroppingProxy(proxy_port, ("127.0.0.1", broker.port))
        try:
            topic = new_topic("drops")
            create_topic(broker.bootstrap, topic, 1)
            cut = 0
            with Producer(
                bootstrap_servers=f"127.0.0.1:{proxy_port}", batch_size=2000, linger_ms=1
            ) as producer:
                futures = []
                for round_ in range(4):
                    sent = [
                        producer.send(topic, b"%06d" % (round_ * 7_500 + i)) for i in range(7_500)
                    ]
                    sent[0].result(10)  # the connection is in use: cut it under the rest
                    cut += proxy.drop_all()
                    futures += sent
                producer.flush(60)
                metadata = [f.result(0) for f in futures]
                retries = producer.metrics()["retries"]
            assert cut >= 4 and proxy.accepted >= 5
            assert [md.offset for md in metadata] == list(range(30_000))
            stored = read_back(broker.bootstrap, topic, 1, 30_000)
            assert [r.value for r in stored] == [b"%06d" % i for i in range(30_000)]
            assert retries > 0  # the cuts did fail requests, retried unseen
        finally:
            proxy.close()


def test_unreachable_bootstrap_server_fails_within_max_block_ms() -> None:
    port = free_port()
    started = time.monotonic()
    with (
        Producer(bootstrap_servers=f"127.0.0.1:{port}", max_block_ms=1000) as producer,
        pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{port}"),
    ):
        producer.send("topic", b"v")
    assert time.monotonic() - started < 5


@pytest.mark.anyio
async def test_unreachable_bootstrap_server_fails_within_max_block_ms_async() -> None:
    port = free_port()
    started = time.monotonic()
    async with AsyncProducer(bootstrap_servers=f"127.0.0.1:{port}", max_block_ms=800) as producer:
        with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
            await producer.send("topic", b"v")
    assert time.monotonic() - started < 5


def test_buffer_memory_exhaustion_blocks_then_raises(memory_broker: BrokerProcess) -> None:
    """With the broker gone, buffer.memory fills; send blocks max.block.ms, then raises."""
    topic = new_topic("full")
    with Producer(
        bootstrap_servers=memory_broker.bootstrap,
        buffer_memory=20_000,
        max_block_ms=700,
        delivery_timeout_ms=60_000,
    ) as producer:
        producer.send(topic, b"first").result(10)
        memory_broker.kill()
        for _ in range(19):  # 19 * 1021 bytes: the 20th does not fit in 20,000
            producer.send(topic, b"x" * 1000)
        started = time.monotonic()
        with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=700"):
            producer.send(topic, b"x" * 1000)
        assert 0.65 <= time.monotonic() - started < 3
        assert producer.metrics()["buffer_bytes_used"] == 19 * 1021
        with pytest.raises(KafkaTimeoutError):
            producer.flush(0.2)
        producer.close(timeout=0.2)


@pytest.mark.anyio
async def test_buffer_memory_exhaustion_async(memory_broker: BrokerProcess) -> None:
    topic = new_topic("full-async")
    async with AsyncProducer(
        bootstrap_servers=memory_broker.bootstrap, buffer_memory=20_000, max_block_ms=500
    ) as producer:
        await (await producer.send(topic, b"first"))
        memory_broker.kill()
        pending = [await producer.send(topic, b"x" * 1000) for _ in range(19)]
        started = time.monotonic()
        with pytest.raises(BufferExhaustedError):
            await producer.send(topic, b"x" * 1000)
        assert 0.45 <= time.monotonic() - started < 3
        await producer.close(timeout=0.2)
    for future in pending:
        assert isinstance(future.exception(0), KafkaTimeoutError)


def test_close_with_timeout_fails_undelivered_records(memory_broker: BrokerProcess) -> None:
    topic = new_topic("close")
    producer = Producer(bootstrap_servers=memory_broker.bootstrap)
    producer.send(topic, b"first").result(10)
    memory_broker.kill()
    errors: list[BaseException | None] = []
    future = producer.send(topic, b"lost", on_delivery=lambda e, m: errors.append(e))
    started = time.monotonic()
    producer.close(timeout=0.5)
    assert time.monotonic() - started < 3
    assert isinstance(future.exception(0), KafkaTimeoutError)
    assert errors == [future.exception(0)]
    with pytest.raises(IllegalStateError):
        producer.send(topic, b"after")


def test_unknown_topic_without_auto_creation_times_out() -> None:
    with (
        BrokerProcess(args=("--set", "auto.create.topics.enable=false")) as broker,
        Producer(bootstrap_servers=broker.bootstrap, max_block_ms=600) as producer,
    ):
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="'nope' not present in metadata"):
            producer.send("nope", b"v")
        assert time.monotonic() - started < 4


def test_auto_created_topic_and_partition_out_of_range(kafkette_server: BrokerProcess) -> None:
    topic = new_topic("auto")
    with Producer(bootstrap_servers=kafkette_server.bootstrap, max_block_ms=500) as producer:
        first = producer.send(topic, b"v", timestamp=T0).result(10)
        assert first == RecordMetadata(topic, 0, 0, T0)
        with pytest.raises(UnknownTopicOrPartitionError, match="has 1 partition"):
            producer.send(topic, b"v", partition=5)
        with pytest.raises(ValueError, match="non-negative"):
            producer.send(topic, b"v", partition=-1)


def test_serializers_and_partitioner(kafkette_server: BrokerProcess) -> None:
    """str needs a serializer; serializers and a user partitioner are applied."""
    topic = new_topic("ser")
    create_topic(kafkette_server.bootstrap, topic, PARTITIONS)
    with Producer(bootstrap_servers=kafkette_server.bootstrap) as producer:
        with pytest.raises(SerializationError, match="value_serializer"):
            producer.send(topic, "text")
        with pytest.raises(SerializationError, match="key must be bytes"):
            producer.send(topic, b"v", key=42)
        with pytest.raises(SerializationError, match="header key"):
            producer.send(topic, b"v", headers=[(b"k", b"v")])
    seen: list[tuple[bytes | None, int]] = []

    def last_partition(key: bytes | None, count: int) -> int:
        seen.append((key, count))
        return count - 1

    with Producer(
        bootstrap_servers=kafkette_server.bootstrap,
        key_serializer=str.encode,
        value_serializer=lambda v: repr(v).encode(),
        partitioner=last_partition,
    ) as producer:
        md = producer.send(topic, {"a": 1}, key="ké", headers={"h": "é"}, timestamp=T0).result(10)
    assert md == RecordMetadata(topic, PARTITIONS - 1, 0, T0)
    assert seen == [("ké".encode(), PARTITIONS)]
    [stored] = read_back(kafkette_server.bootstrap, topic, PARTITIONS, 1)
    assert stored == Stored(topic, 2, 0, "ké".encode(), b"{'a': 1}", (("h", "é".encode()),), T0)


@pytest.mark.anyio
async def test_async_delivery_callbacks_and_flush(kafkette_server: BrokerProcess) -> None:
    topic = new_topic("callbacks")
    delivered: list[tuple[BaseException | None, RecordMetadata | None]] = []
    async with AsyncProducer(bootstrap_servers=kafkette_server.bootstrap, linger_ms=10_000) as p:
        futures = [
            await p.send(topic, b"%d" % i, on_delivery=lambda e, m: delivered.append((e, m)))
            for i in range(5)
        ]
        assert not any(f.done() for f in futures)
        await p.flush(10)
        assert all(f.done() for f in futures)
        assert [m.offset for e, m in delivered if m is not None] == list(range(5))
        assert p.metrics()["records_sent"] == 5
    with pytest.raises(IllegalStateError):
        await p.send(topic, b"closed")


def test_send_from_a_delivery_callback(kafkette_server: BrokerProcess) -> None:
    """A callback runs in the producer's thread and may send; the chained record is delivered."""
    topic = new_topic("chain")
    chained: list[RecordFuture] = []
    with Producer(bootstrap_servers=kafkette_server.bootstrap) as producer:

        def again(error: BaseException | None, md: RecordMetadata | None) -> None:
            chained.append(producer.send(topic, b"second"))

        producer.send(topic, b"first", on_delivery=again).result(10)
        producer.flush(10)
        assert chained[0].result(10).offset == 1


@pytest.mark.parametrize("idempotent", [True, False])
def test_batch_too_large_for_the_topic_is_split(
    kafkette_server: BrokerProcess, idempotent: bool
) -> None:
    """MESSAGE_TOO_LARGE for a batch of several records: sent again in halves, as Java does;
    a single record over the limit fails."""
    topic = new_topic("split")
    admin = AdminClient({"bootstrap.servers": kafkette_server.bootstrap})
    new = NewTopic(
        topic, num_partitions=1, replication_factor=1, config={"max.message.bytes": "1500"}
    )
    admin.create_topics([new])[topic].result(20)
    values = [bytes([65 + i]) * 400 for i in range(12)]
    settings: dict[str, Any] = {"enable_idempotence": idempotent}
    if not idempotent:  # in order without idempotence: one request at a time
        settings.update(acks=1, max_in_flight_requests_per_connection=1)
    with Producer(bootstrap_servers=kafkette_server.bootstrap, linger_ms=50, **settings) as p:
        futures = [p.send(topic, v, timestamp=T0 + i) for i, v in enumerate(values)]
        too_big = p.send(topic, b"z" * 1600)
        p.flush(20)
        assert [f.result(0).offset for f in futures] == list(range(12))
        assert isinstance(too_big.exception(0), MessageTooLargeError)
        assert p.metrics()["batches_split"] >= 3
    stored = read_back(kafkette_server.bootstrap, topic, 1, 12)
    assert [(r.offset, r.value, r.timestamp) for r in stored] == [
        (i, v, T0 + i) for i, v in enumerate(values)
    ]


@pytest.mark.anyio
async def test_sync_producer_used_inside_an_event_loop_waits_for_new_metadata(
    anyio_backend: str,
) -> None:
    """A sync Producer called from async code (another loop's thread) may wait for a topic's
    metadata: only its own loop's thread may not (it used to refuse any running loop)."""
    from kafkette.testing import MemoryCluster

    with MemoryCluster() as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            metadata = producer.send("fresh-topic", b"v", key=b"k").result(timeout=10)
            await anyio.sleep(0)
        assert (metadata.topic, metadata.offset) == ("fresh-topic", 0)
        assert [r.value for r in cluster.records("fresh-topic")] == [b"v"]
