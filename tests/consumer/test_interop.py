"""Records written by confluent-kafka (librdkafka) and kafka-python, read by our consumer.

Every codec, headers (repeated, empty, null where the producer allows it),
null keys and values (both at once with confluent-kafka; kafka-python refuses
that), explicit timestamps, two partitions: offsets, keys,
values, headers, timestamps and partitions must come back exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer  # type: ignore[import-untyped]

from kafkette import AsyncConsumer, Consumer, ConsumerRecord, TopicPartition
from kafkette.consumer import CREATE_TIME
from tests.brokers import BrokerProcess, TansuProcess
from tests.consumer.helpers import apoll_n, poll_n
from tests.consumer.targets import Target

N = 40
BASE_TS = 1_600_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

Headers = list[tuple[str, str | bytes | None]]
Row = tuple[int, bytes | None, bytes | None, Headers]
Expected = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, object], ...], int]


def row(i: int, null_header_values: bool) -> Row:
    key = None if i % 5 == 0 else b"key-%d" % i
    value = None if i % 7 == 3 else b"value-%d-" % i + b"x" * (i * 13 % 200)
    if key is None and value is None and not null_header_values:
        value = b"kafka-python refuses a record with neither key nor value"
    headers: Headers = []
    if i % 3 == 0:
        headers = [("id", b"%d" % i), ("id", b"again"), ("empty", b"")]
    if i % 4 == 1 and null_header_values:
        headers.append(("null", None))
    return i % 2, key, value, headers


def expected(null_header_values: bool) -> list[Expected]:
    offsets = [0, 0]
    rows: list[Expected] = []
    for i in range(N):
        partition, key, value, headers = row(i, null_header_values)
        rows.append((partition, offsets[partition], key, value, tuple(headers), BASE_TS + i))
        offsets[partition] += 1
    return sorted(rows)


def produce_confluent(bootstrap: str, topic: str, codec: str) -> None:
    producer = ConfluentProducer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
    )
    for i in range(N):
        partition, key, value, headers = row(i, True)
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp=BASE_TS + i,
            headers=list(headers),
        )
    assert producer.flush(30) == 0


def produce_kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
    )
    for i in range(N):
        partition, key, value, headers = row(i, False)
        producer.send(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp_ms=BASE_TS + i,
            headers=headers,
        )
    producer.flush(30)
    producer.close()


PRODUCERS = {"confluent": (produce_confluent, True), "kafka-python": (produce_kafka_python, False)}


@pytest.fixture(params=["serve", "tansu"])
def tcp_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "serve":
        broker: BrokerProcess = request.getfixturevalue("serve_broker")
        t = Target("serve", broker.bootstrap)
    else:
        tansu: TansuProcess = request.getfixturevalue("tansu_process")
        t = Target("tansu", tansu.bootstrap, tansu)
    try:
        yield t
    finally:
        t.close()


def as_expected(records: list[ConsumerRecord]) -> list[Expected]:
    assert all(r.timestamp_type == CREATE_TIME for r in records)
    return sorted(
        (r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records
    )


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_peer_records_read_exactly(
    tcp_target: Target, topic: str, producer: str, codec: str
) -> None:
    produce, null_headers = PRODUCERS[producer]
    tcp_target.create_topic(topic, 2)
    produce(tcp_target.bootstrap, topic, codec)
    with Consumer(bootstrap_servers=tcp_target.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = poll_n(consumer, N)
    assert as_expected(got) == expected(null_headers)


@pytest.mark.anyio
@pytest.mark.parametrize("producer", list(PRODUCERS))
async def test_peer_records_read_exactly_async(
    tcp_target: Target, topic: str, producer: str
) -> None:
    produce, null_headers = PRODUCERS[producer]
    tcp_target.create_topic(topic, 2)
    produce(tcp_target.bootstrap, topic, "zstd")
    async with AsyncConsumer(
        bootstrap_servers=tcp_target.bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = await apoll_n(consumer, N)
    assert as_expected(got) == expected(null_headers)
