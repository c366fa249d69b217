"""confluent-kafka's AvroSerializer and AvroDeserializer, with its Producer and Consumer,
through ``kafkette serve`` and our registry: records written and read back unchanged."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.brokers import BrokerProcess
from tests.schema_registry.server.servers import registry_server

ORDER_V1 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "double"}],
    }
)
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "total", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)


def test_avro_records_round_trip(memory_broker: BrokerProcess) -> None:
    """v1 and then v2 records (auto-registered, ids 1 and 2, framed with them) are read
    back by a deserializer fetching the writer schemas by id from the registry."""
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    with (
        registry_server(memory_broker.bootstrap) as url,
        SchemaRegistryClient({"url": url}) as client,
    ):
        producer = Producer({"bootstrap.servers": memory_broker.bootstrap})
        sent = [
            (AvroSerializer(client, ORDER_V1), {"id": 1, "total": 9.5}),
            (AvroSerializer(client, ORDER_V2), {"id": 2, "total": 3.0, "note": "gift"}),
        ]
        frames = []
        for serializer, value in sent:
            frame = serializer(value, SerializationContext(topic, MessageField.VALUE))
            assert frame is not None
            frames.append(frame)
            producer.produce(topic, value=frame)
        assert producer.flush(10) == 0
        assert [frame[:5] for frame in frames] == [b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x02"]
        assert client.get_versions(f"{topic}-value") == [1, 2]

        consumer = Consumer(
            {
                "bootstrap.servers": memory_broker.bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
            }
        )
        with SchemaRegistryClient({"url": url}) as fresh:  # learns the schemas by id
            deserializer = AvroDeserializer(fresh)
            try:
                consumer.subscribe([topic])
                got = []
                for _ in range(200):
                    message = consumer.poll(0.1)
                    if message is None or message.error():
                        continue
                    context = SerializationContext(topic, MessageField.VALUE)
                    got.append(deserializer(message.value(), context))
                    if len(got) == 2:
                        break
            finally:
                consumer.close()
        assert got == [{"id": 1, "total": 9.5}, {"id": 2, "total": 3.0, "note": "gift"}]
        producer.flush(1)
