"""Records across clients through ``kafkette serve --schema-registry`` (memory and disk).

confluent-kafka's Producer with its AvroSerializer and JSONSerializer writes,
our Consumer with our deserializers (our client, over HTTP) reads; and the
other way round. The registry is the one the broker process serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as CConsumer
from confluent_kafka import Producer as CProducer
from confluent_kafka.schema_registry import SchemaRegistryClient as CSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkette import Consumer, Producer
from kafkette.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    SchemaRegistryClient,
)
from tests.brokers import BrokerProcess
from tests.schema_registry.server.test_serve import registry_url

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
    }
)
ORDERS = [{"id": n, "item": f"item-{n}"} for n in range(5)]


@pytest.fixture(params=["memory", "disk"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(bootstrap, registry URL) of a kafkette serve with a registry."""
    data_dir = tmp_path / "data" if request.param == "disk" else None
    broker = BrokerProcess(data_dir, args=("--schema-registry", "127.0.0.1:0"))
    try:
        broker.start()
        yield broker.bootstrap, registry_url(broker)
    finally:
        broker.close()


def our_values(bootstrap: str, topic: str, count: int, deserializer: Any) -> list[Any]:
    with Consumer(
        bootstrap_servers=bootstrap,
        group_id=f"ours-{topic}",
        auto_offset_reset="earliest",
        value_deserializer=deserializer,
    ) as consumer:
        consumer.subscribe([topic])
        values: list[Any] = []
        for _ in range(100):
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in records)
            if len(values) >= count:
                break
        return values


def test_confluent_writes_we_read(served: tuple[str, str]) -> None:
    """Avro and JSON records from confluent-kafka's producer, read by ours."""
    bootstrap, url = served
    with CSchemaRegistryClient({"url": url}) as theirs:
        producer = CProducer({"bootstrap.servers": bootstrap})
        avro = CAvroSerializer(theirs, ORDER)
        as_json = CJSONSerializer('{"type": "object"}', theirs)
        for order in ORDERS:
            producer.produce(
                "avro-orders", avro(order, SerializationContext("avro-orders", MessageField.VALUE))
            )
            producer.produce(
                "json-orders",
                as_json(order, SerializationContext("json-orders", MessageField.VALUE)),
            )
        assert producer.flush(30) == 0
    with SchemaRegistryClient(url) as ours:
        assert our_values(bootstrap, "avro-orders", 5, AvroDeserializer(ours)) == ORDERS
        assert our_values(bootstrap, "json-orders", 5, JSONDeserializer(ours)) == ORDERS


def test_we_write_confluent_reads(served: tuple[str, str]) -> None:
    """Avro records from our producer, read by confluent-kafka's consumer and deserializer."""
    bootstrap, url = served
    with (
        SchemaRegistryClient(url) as ours,
        Producer(
            bootstrap_servers=bootstrap,
            value_serializer=AvroSerializer(ours, ORDER, topic="orders"),
        ) as producer,
    ):
        for order in ORDERS:
            producer.send("orders", order)
    consumer = CConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "theirs", "auto.offset.reset": "earliest"}
    )
    values: list[Any] = []
    with CSchemaRegistryClient({"url": url}) as theirs:
        read = CAvroDeserializer(theirs)
        try:
            consumer.subscribe(["orders"])
            for _ in range(100):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    context = SerializationContext("orders", MessageField.VALUE)
                    values.append(read(message.value(), context))
                if len(values) == len(ORDERS):
                    break
        finally:
            consumer.close()
    assert values == ORDERS
