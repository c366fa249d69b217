"""Trace context across clients nobody here wrote, over ``kafkette serve``: our producer's
send continues in a confluent-kafka consumer instrumented by
opentelemetry-instrumentation-confluent-kafka, and the sends of an instrumented
confluent-kafka producer and of an instrumented aiokafka producer continue in our
consumer; a kafka-python consumer instrumented by opentelemetry-instrumentation-kafka-python
makes its receive span a child of our send. One broker process for the module; each case
its own topic."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import confluent_kafka
import pytest
from aiokafka import AIOKafkaProducer
from kafka import KafkaConsumer
from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor
from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor
from opentelemetry.instrumentation.kafka import KafkaInstrumentor
from opentelemetry.trace import SpanKind

from kafkette import AsyncConsumer, Consumer, Producer, TopicPartition
from tests.brokers import BrokerProcess, kafkette_broker
from tests.observability.conftest import Telemetry, links, parent_id, span_id, trace_id

_numbers = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None)


def new_topic() -> str:
    return f"traced-{next(_numbers)}"


def test_our_send_continues_in_an_instrumented_confluent_consumer(
    server: BrokerProcess, telemetry: Telemetry
) -> None:
    """The instrumentation's ``{topic} process`` span links to our ``send {topic}`` span
    (same trace id and span id), read from the traceparent header we wrote."""
    topic = new_topic()
    with Producer(bootstrap_servers=server.bootstrap, **telemetry.settings) as producer:
        producer.send(topic, b"v", key=b"k").result(10)
    (send,) = telemetry.spans(f"send {topic}")
    plain = confluent_kafka.Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "peer", "enable.auto.commit": False}
    )
    consumer = ConfluentKafkaInstrumentor.instrument_consumer(
        plain, tracer_provider=telemetry.tracer_provider
    )
    try:
        plain.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        message = None
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None:
                break
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (0, b"v")
    finally:
        consumer.close()
    (process,) = telemetry.spans(f"{topic} process")
    assert process.kind == SpanKind.CONSUMER
    assert [(link.context.trace_id, link.context.span_id) for link in process.links] == [
        (trace_id(send), span_id(send))
    ]


def _poll_one(consumer: Consumer, topic: str) -> None:
    consumer.assign([TopicPartition(topic, 0)])
    taken: list[object] = []
    while not taken:
        taken = consumer.poll(timeout=5).get(TopicPartition(topic, 0), [])


def test_an_instrumented_confluent_send_continues_in_our_consumer(
    server: BrokerProcess, telemetry: Telemetry
) -> None:
    """Our ``poll {topic}`` span links to the instrumentation's ``{topic} send`` span."""
    topic = new_topic()
    producer = ConfluentKafkaInstrumentor.instrument_producer(
        confluent_kafka.Producer({"bootstrap.servers": server.bootstrap}),
        tracer_provider=telemetry.tracer_provider,
    )
    producer.produce(topic, b"v", key=b"k")
    assert producer.flush(10) == 0
    (send,) = telemetry.spans(f"{topic} send")
    assert send.kind == SpanKind.PRODUCER
    with Consumer(
        bootstrap_servers=server.bootstrap, auto_offset_reset="earliest", **telemetry.settings
    ) as consumer:
        _poll_one(consumer, topic)
    (poll,) = telemetry.spans(f"poll {topic}")
    assert links(poll) == [
        (
            span_id(send),
            {
                "messaging.destination.name": topic,
                "messaging.destination.partition.id": "0",
                "messaging.kafka.offset": 0,
            },
        )
    ]
    assert poll.links[0].context.trace_id == trace_id(send)


def test_an_instrumented_aiokafka_send_continues_in_our_consumer(
    server: BrokerProcess, telemetry: Telemetry
) -> None:
    """Our async consumer's ``poll {topic}`` span links to aiokafka's ``{topic} send``."""
    topic = new_topic()
    instrumentor = AIOKafkaInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:

        async def produce() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap)
            await producer.start()
            try:
                await producer.send_and_wait(topic, b"v", key=b"k")
            finally:
                await producer.stop()

        asyncio.run(produce())
    finally:
        instrumentor.uninstrument()
    (send,) = telemetry.spans(f"{topic} send")

    async def consume() -> None:
        async with AsyncConsumer(
            bootstrap_servers=server.bootstrap, auto_offset_reset="earliest", **telemetry.settings
        ) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            taken: list[object] = []
            while not taken:
                taken = (await consumer.poll(timeout=5)).get(TopicPartition(topic, 0), [])

    asyncio.run(consume())
    (poll,) = telemetry.spans(f"poll {topic}")
    assert [(link.context.trace_id, link.context.span_id) for link in poll.links] == [
        (trace_id(send), span_id(send))
    ]


def test_our_send_is_the_parent_of_an_instrumented_kafka_python_receive(
    server: BrokerProcess, telemetry: Telemetry
) -> None:
    """opentelemetry-instrumentation-kafka-python makes the creation context it reads from
    our traceparent header the parent of its ``{topic} receive`` span."""
    topic = new_topic()
    with Producer(bootstrap_servers=server.bootstrap, **telemetry.settings) as producer:
        producer.send(topic, b"v", key=b"k").result(10)
    (send,) = telemetry.spans(f"send {topic}")
    instrumentor = KafkaInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=server.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
        )
        try:
            record = next(consumer)
        finally:
            consumer.close()
    finally:
        instrumentor.uninstrument()
    assert (record.offset, record.value) == (0, b"v")
    (receive,) = telemetry.spans(f"{topic} receive")
    assert (receive.kind, trace_id(receive), parent_id(receive)) == (
        SpanKind.CONSUMER,
        trace_id(send),
        span_id(send),
    )
