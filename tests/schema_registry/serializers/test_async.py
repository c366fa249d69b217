"""Serializers in an event loop: aserialize, adeserialize and prepare, on asyncio and trio."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kafkette import AsyncConsumer, AsyncProducer
from kafkette.errors import SerializationError
from kafkette.schema_registry import (
    AsyncSchemaRegistryClient,
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    SchemaRegistryClient,
)
from kafkette.testing import MemoryCluster
from tests.schema_registry.server.servers import registry_server

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)
ANN = {"name": "ann", "age": 31}

pytestmark = pytest.mark.anyio


@pytest.fixture
def url() -> Iterator[str]:
    with registry_server() as served:
        yield served


async def test_async_client_gives_the_sync_clients_bytes(url: str) -> None:
    """With the async client, aserialize frames as the sync path does; adeserialize reads."""
    async with AsyncSchemaRegistryClient(url) as registry:
        ours = await AvroSerializer(registry, USER, topic="users").aserialize(ANN)
        assert await AvroDeserializer(registry).adeserialize(ours) == ANN
        assert (
            await JSONDeserializer(registry).adeserialize(
                await JSONSerializer(registry, '{"type": "object"}', topic="j").aserialize(ANN)
            )
            == ANN
        )
    with SchemaRegistryClient(url) as sync_registry:
        assert AvroSerializer(sync_registry, USER, topic="users")(ANN) == ours
        assert ours is not None and ours[:5] == b"\x00\x00\x00\x00\x01"


async def test_a_sync_cache_miss_with_an_async_client_says_what_to_do(url: str) -> None:
    """Called synchronously before prepare, the serializer refuses and names prepare."""
    async with AsyncSchemaRegistryClient(url) as registry:
        serializer = AvroSerializer(registry, USER, topic="users")
        with pytest.raises(SerializationError, match="prepare"):
            serializer(ANN)
        assert await serializer.prepare() == 1
        assert serializer(ANN) == await serializer.aserialize(ANN)
        deserializer = AvroDeserializer(registry)
        with pytest.raises(SerializationError, match="adeserialize"):
            deserializer(serializer(ANN))


async def test_prepared_serializer_with_the_async_clients() -> None:
    """A prepared serializer is an AsyncProducer's value_serializer; values come back with
    adeserialize, on memory://."""
    with MemoryCluster() as cluster:
        async with AsyncSchemaRegistryClient(cluster.schema_registry_url) as registry:
            serializer = AvroSerializer(registry, USER, topic="users")
            await serializer.prepare()
            async with AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, value_serializer=serializer
            ) as producer:
                await producer.send_and_wait("users", ANN)
            deserializer = AvroDeserializer(registry)
            async with AsyncConsumer(
                bootstrap_servers=cluster.bootstrap_servers,
                group_id="g",
                auto_offset_reset="earliest",
            ) as consumer:
                consumer.subscribe(["users"])
                values = []
                for _ in range(50):
                    for records in (await consumer.poll(timeout=0.2)).values():
                        values += [await deserializer.adeserialize(r.value) for r in records]
                    if values:
                        break
    assert values == [ANN]


async def test_aserialize_with_a_sync_client(url: str) -> None:
    """With the sync client, aserialize makes its registry call in a worker thread."""
    with SchemaRegistryClient(url) as registry:
        framed = await AvroSerializer(registry, USER, topic="users").aserialize(ANN)
        assert await AvroDeserializer(registry).adeserialize(framed) == ANN
