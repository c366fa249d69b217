"""The registry's state in the ``_schemas`` topic: Confluent's records, restarts, two registries.

The registry reaches the broker only through kafkette's clients, so the same
tests run on ``memory://`` (in-process) and, for a restart that must survive a
SIGKILL, on a disk ``kafkette serve``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kafkette.consumer import AsyncConsumer
from kafkette.schema_registry.server import open_registry
from kafkette.schema_registry.server.state import RegistryState
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster
from tests.brokers import BrokerProcess
from tests.schema_registry.server.servers import registry_server

pytestmark = pytest.mark.anyio


def record_schema(name: str, *fields: str, defaults: bool = True) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [
                {"name": f, "type": "string", **({"default": ""} if defaults else {})}
                for f in fields
            ],
        }
    )


async def call(registry: Any, method: str, path: str, body: Any = None, **query: str) -> Any:
    data = json.dumps(body).encode() if body is not None else b""
    status, answer, _ = await registry.handle(method, path, query, data, {})
    return status, json.loads(answer)


async def topic_records(bootstrap: str) -> list[tuple[Any, Any]]:
    """Every record of _schemas, keys and values decoded from JSON."""
    partition = TopicPartition("_schemas", 0)
    async with AsyncConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = (await consumer.end_offsets([partition]))[partition]
        found: list[tuple[Any, Any]] = []
        with anyio.fail_after(10):
            while await consumer.position(partition) < end:
                for record in (await consumer.poll(timeout=0.5)).get(partition, []):
                    value = None if record.value is None else json.loads(record.value)
                    found.append((json.loads(record.key), value))
        return found


async def test_the_records_are_confluents() -> None:
    """Register, configure, soft delete and permanently delete write exactly the keys
    and values Confluent's registry writes (KafkaSchemaRegistry, storage/*Key, *Value)."""
    schema = record_schema("A", "x")
    with MemoryCluster() as cluster:
        async with open_registry(cluster.bootstrap_servers) as registry:
            assert await call(registry, "POST", "/subjects/s/versions", {"schema": schema}) == (
                200,
                {"id": 1},
            )
            await call(registry, "PUT", "/config/s", {"compatibility": "FULL"})
            await call(registry, "PUT", "/config", {"compatibility": "NONE"})
            await call(registry, "PUT", "/mode/s", {"mode": "READWRITE"})
            await call(registry, "DELETE", "/subjects/s")
            await call(registry, "DELETE", "/subjects/s", permanent="true")
            # bad input stores nothing
            await call(registry, "POST", "/subjects/s/versions", {"schema": "{"})
            await call(registry, "PUT", "/config/s", {"compatibility": "SIDEWAYS"})
        records = await topic_records(cluster.bootstrap_servers)
    canonical = json.dumps(json.loads(schema), separators=(",", ":"))
    assert records == [
        (
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"subject": "s", "version": 1, "id": 1, "schema": canonical, "deleted": False},
        ),
        (
            {"keytype": "CONFIG", "subject": "s", "magic": 0},
            {"subject": "s", "compatibilityLevel": "FULL"},
        ),
        ({"keytype": "CONFIG", "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, {"subject": "s", "mode": "READWRITE"}),
        ({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}, {"subject": "s", "version": 1}),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, None),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, None),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, None),
    ]


def test_records_confluent_wrote_are_read() -> None:
    """Records as Confluent writes them (schemaType AVRO spelled out, md5, an explicit
    null subject, unknown key types) rebuild the state; what cannot be read is skipped."""
    state = RegistryState()
    records = [
        ('{"keytype":"NOOP","magic":0}', None),
        (
            '{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}',
            '{"subject":"t-value","version":1,"id":7,"md5":"abc","schemaType":"AVRO",'
            '"schema":"\\"string\\"","deleted":false}',
        ),
        (
            '{"keytype":"SCHEMA","subject":"u","version":1,"magic":1}',
            '{"subject":"u","version":1,"id":8,"schemaType":"JSON","references":[],'
            '"schema":"{}","deleted":false}',
        ),
        ('{"keytype":"CONFIG","magic":0}', '{"compatibilityLevel":"FORWARD"}'),
        ('{"keytype":"CONTEXT","tenant":"default","context":".x","magic":0}', "{}"),
        ('{"keytype":"DELETE_SUBJECT","subject":"u","magic":0}', '{"subject":"u","version":1}'),
        ("not json", "{}"),
    ]
    applied = [state.apply(k.encode(), None if v is None else v.encode()) for k, v in records]
    assert applied == [True, True, True, True, False, True, False]
    assert [(v.subject, v.version, v.id) for v in state.versions("t-value")] == [("t-value", 1, 7)]
    assert state.versions("u") == []
    assert state.versions("u", deleted=True)[0].schema_type == "JSON"
    assert state.configs == {None: "FORWARD"}
    assert state.max_id == 8


async def test_a_second_registry_sees_the_first_and_continues_its_ids() -> None:
    """Two registries on one cluster: each answers what the other wrote, ids never clash,
    the same schema gets the same id from either."""
    with MemoryCluster() as cluster:
        async with (
            open_registry(cluster.bootstrap_servers) as first,
            open_registry(cluster.bootstrap_servers) as second,
        ):
            a, b = record_schema("A", "x"), record_schema("B", "y")
            assert await call(first, "POST", "/subjects/a/versions", {"schema": a}) == (
                200,
                {"id": 1},
            )
            assert await call(second, "GET", "/subjects/a/versions/1") == (
                200,
                {
                    "subject": "a",
                    "version": 1,
                    "id": 1,
                    "schema": json.dumps(json.loads(a), separators=(",", ":")),
                },
            )
            assert await call(second, "POST", "/subjects/b/versions", {"schema": b}) == (
                200,
                {"id": 2},
            )
            assert await call(first, "POST", "/subjects/c/versions", {"schema": b}) == (
                200,
                {"id": 2},
            )

            async def register(registry: Any, subject: str, n: int, out: list[int]) -> None:
                status, body = await call(
                    registry,
                    "POST",
                    f"/subjects/{subject}/versions",
                    {"schema": record_schema(f"N{n}", "z")},
                )
                assert status == 200
                out.append(body["id"])

            ids: list[int] = []
            async with anyio.create_task_group() as group:
                for n in range(6):
                    group.start_soon(register, first if n % 2 else second, f"n{n}", n, ids)
            assert sorted(ids) == [3, 4, 5, 6, 7, 8]
            one = await call(first, "GET", "/schemas/ids/8/versions")
            two = await call(second, "GET", "/schemas/ids/8/versions")
            assert one == two and one[0] == 200 and len(one[1]) == 1


def test_a_disk_broker_killed_and_restarted_keeps_every_id(tmp_path: Path) -> None:
    """SIGKILL the disk broker under the registry: a registry started on the restarted
    broker gives every subject, version and id as before, and the next id is new."""
    broker = BrokerProcess(tmp_path / "data")
    try:
        broker.start()
        before: dict[str, Any] = {}
        with registry_server(broker.bootstrap) as url, SchemaRegistryClient({"url": url}) as client:
            client.register_schema("a", Schema(record_schema("A", "x"), "AVRO"))
            client.register_schema("a", Schema(record_schema("A", "x", "y"), "AVRO"))
            client.register_schema("b", Schema(record_schema("B", "x"), "AVRO"))
            client.register_schema("c", Schema(record_schema("A", "x"), "AVRO"))
            client.set_compatibility("b", "FULL_TRANSITIVE")
            client.delete_version("a", 1)
            for subject in ("a", "b", "c"):
                versions = client.get_versions(subject)
                before[subject] = [(v, client.get_version(subject, v).schema_id) for v in versions]
        broker.kill()
        broker.start()
        with registry_server(broker.bootstrap) as url, SchemaRegistryClient({"url": url}) as client:
            after = {
                subject: [
                    (v, client.get_version(subject, v).schema_id)
                    for v in client.get_versions(subject)
                ]
                for subject in ("a", "b", "c")
            }
            assert after == before == {"a": [(2, 2)], "b": [(1, 3)], "c": [(1, 1)]}
            assert client.get_compatibility("b") == "FULL_TRANSITIVE"
            assert client.register_schema("d", Schema(record_schema("D", "x"), "AVRO")) == 4
    finally:
        broker.close()
