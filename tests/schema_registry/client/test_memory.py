"""``memory://NAME`` registry URLs: the registry core in this process, over a MemoryCluster."""

from __future__ import annotations

import json

import pytest

from kafkette import Consumer, Producer
from kafkette.schema_registry import (
    AsyncSchemaRegistryClient,
    AvroDeserializer,
    AvroSerializer,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkette.testing import MemoryCluster

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)


def test_sync_client_and_serializers_on_memory() -> None:
    """A pipeline with Avro values on memory://: registry, producer and consumer in-process."""
    with MemoryCluster() as cluster, SchemaRegistryClient(cluster.schema_registry_url) as registry:
        with Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            value_serializer=AvroSerializer(registry, USER, topic="users"),
        ) as producer:
            producer.send("users", {"name": "ann", "age": 31})
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(registry),
        ) as consumer:
            consumer.subscribe(["users"])
            values = []
            for _ in range(50):
                for batch in consumer.poll(timeout_ms=200).values():
                    values.extend(record.value for record in batch)
                if values:
                    break
        assert values == [{"name": "ann", "age": 31}]
        latest = registry.get_latest_version("users-value")
        assert (latest.schema_id, latest.version) == (1, 1)
        with pytest.raises(SchemaRegistryError) as info:
            registry.get_latest_version("nope")
        assert (info.value.http_status_code, info.value.error_code) == (404, 40401)


def test_two_clients_share_the_clusters_registry() -> None:
    """What one client registers, another client of the same cluster sees; other clusters not."""
    with MemoryCluster() as cluster, MemoryCluster() as other:
        with SchemaRegistryClient(cluster.schema_registry_url) as first:
            schema_id = first.register_schema("s", Schema(USER))
        with SchemaRegistryClient(cluster.schema_registry_url) as second:
            assert second.get_schema(schema_id).schema_type == "AVRO"
            assert second.get_subjects() == ["s"]
        with SchemaRegistryClient(other.schema_registry_url) as elsewhere:
            assert elsewhere.get_subjects() == []


@pytest.mark.anyio
async def test_async_client_on_memory() -> None:
    """The async client runs the registry core in its own event loop."""
    with MemoryCluster() as cluster:
        async with AsyncSchemaRegistryClient(cluster.schema_registry_url) as registry:
            first = await registry.register_schema("s", Schema(USER))
            assert (await registry.lookup_schema("s", Schema(USER))).schema_id == first
            assert await registry.get_versions("s") == [1]


def test_a_closed_cluster_is_an_error() -> None:
    """memory://NAME of a closed MemoryCluster: SchemaRegistryError naming the URL."""
    with MemoryCluster() as cluster:
        url = cluster.schema_registry_url
    with (
        SchemaRegistryClient(url) as registry,
        pytest.raises(SchemaRegistryError, match=f"no schema registry at {url}"),
    ):
        registry.get_subjects()


def test_the_plugins_fixture(schema_registry: SchemaRegistryClient) -> None:
    """The pytest plugin's ``schema_registry`` is a client of the test's memory cluster."""
    assert schema_registry.settings.endpoints[0].scheme == "memory"
    assert schema_registry.register_schema("s", Schema(USER)) == 1
    assert schema_registry.get_subjects() == ["s"]
