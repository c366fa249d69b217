"""Our registry clients, sync and async, against the registry served over HTTP.

Each test starts ``kafkette``'s registry (its HTTP shell, on a free loopback
port) and checks what the client returns. The peer checks make the same calls
with confluent-kafka's ``SchemaRegistryClient`` on the same registry: the same
ids, versions, subjects and error codes, so our client reads the REST API as
confluent-kafka does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as CSchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as CSchemaRegistryError

from kafkette.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from tests.schema_registry.server.servers import registry_server


def order(*extra: dict[str, Any]) -> Schema:
    fields = [{"name": "id", "type": "long"}, *extra]
    return Schema(json.dumps({"type": "record", "name": "Order", "fields": fields}))


V1 = order()
V2 = order({"name": "note", "type": "string", "default": ""})
NO_DEFAULT = order({"name": "note", "type": "string"})
INCOMPATIBLE = Schema(
    json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})
)


@pytest.fixture
def url() -> Iterator[str]:
    with registry_server() as served:
        yield served


@pytest.fixture
def client(url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient(url) as made:
        yield made


def error_of(call: Callable[[], Any]) -> tuple[int, int]:
    try:
        call()
    except SchemaRegistryError as exc:
        return exc.http_status_code, exc.error_code
    except CSchemaRegistryError as exc:
        return exc.http_status_code, exc.error_code
    raise AssertionError("no error")


def test_register_evolve_and_read_back(client: SchemaRegistryClient) -> None:
    """Register, evolve compatibly, read by id, subject and version; 409 when incompatible."""
    first = client.register_schema("orders-value", V1)
    second = client.register_schema("orders-value", V2)
    assert second != first
    assert client.register_schema("orders-value", V1) == first  # already there
    assert client.get_subjects() == ["orders-value"]
    assert client.get_versions("orders-value") == [1, 2]
    latest = client.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version, latest.subject) == (second, 2, "orders-value")
    assert json.loads(latest.schema.schema_str) == json.loads(V2.schema_str)
    assert client.get_version("orders-value", 1).schema_id == first
    assert json.loads(client.get_schema(first).schema_str) == json.loads(V1.schema_str)
    found = client.lookup_schema("orders-value", V2)
    assert (found.schema_id, found.version) == (second, 2)
    assert client.get_subjects_by_id(first) == ["orders-value"]
    assert client.test_compatibility("orders-value", V2) is True
    assert client.test_compatibility("orders-value", NO_DEFAULT) is True  # V2 has note
    assert client.test_compatibility("orders-value", NO_DEFAULT, 1) is False
    ok, messages = client.test_compatibility_all_versions("orders-value", INCOMPATIBLE)
    assert not ok and messages
    assert error_of(lambda: client.register_schema("orders-value", INCOMPATIBLE)) == (409, 40901)
    assert client.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]


def test_configs(client: SchemaRegistryClient) -> None:
    """Global and subject levels: set, read (falling back to global), delete."""
    assert client.get_config() == "BACKWARD"
    assert client.set_config(compatibility="full") == "FULL"
    assert client.get_config("s") == "FULL"  # the global level, by default
    assert error_of(lambda: client.get_config("s", default_to_global=False)) == (404, 40408)
    assert client.set_config("s", compatibility="NONE") == "NONE"
    assert client.get_config("s") == "NONE"
    assert client.delete_config("s") == "NONE"
    assert client.get_config("s") == "FULL"
    client.register_schema("s", V1)
    assert client.set_config("s", compatibility="NONE") == "NONE"
    client.register_schema("s", INCOMPATIBLE)  # allowed under NONE
    with pytest.raises(ValueError, match="unknown compatibility level"):
        client.set_config(compatibility="SIDEWAYS")


def test_deletes(client: SchemaRegistryClient) -> None:
    """Soft then permanent deletes of versions and subjects, and the caches forget them."""
    client.register_schema("a", V1)
    client.register_schema("a", V2)
    assert client.get_version("a", 1).version == 1  # cached now
    assert client.delete_version("a", 1) == 1
    assert client.get_versions("a") == [2]
    assert client.get_versions("a", deleted=True) == [1, 2]
    assert error_of(lambda: client.get_version("a", 1)) == (404, 40402)
    assert client.delete_version("a", 1, permanent=True) == 1
    assert client.delete_subject("a") == [2]
    assert client.get_subjects() == []
    assert client.get_subjects(deleted=True) == ["a"]
    assert client.delete_subject("a", permanent=True) == [2]
    assert client.get_subjects(deleted=True) == []


def test_errors_carry_confluents_codes(client: SchemaRegistryClient) -> None:
    """Unknown subject, version, id; an invalid schema: status, code and message."""
    with pytest.raises(SchemaRegistryError) as info:
        client.get_latest_version("nope")
    assert (info.value.http_status_code, info.value.error_code) == (404, 40401)
    assert "nope" in info.value.error_message and "40401" in str(info.value)
    client.register_schema("s", V1)
    assert error_of(lambda: client.get_version("s", 7)) == (404, 40402)
    assert error_of(lambda: client.get_schema(999)) == (404, 40403)
    assert error_of(lambda: client.lookup_schema("s", V2)) == (404, 40403)
    assert error_of(lambda: client.register_schema("s", Schema("{not json"))) == (422, 42201)
    with pytest.raises(ValueError, match="a version is a number or 'latest'"):
        client.get_version("s", "first")


def test_subject_names_are_quoted(client: SchemaRegistryClient) -> None:
    """Subjects with '/', spaces, '?' and non-ASCII letters round-trip."""
    names = ["a/b", "with space", "q?x=1", "zoë-value"]
    for name in names:
        client.register_schema(name, V1)
        assert client.get_latest_version(name).subject == name
    assert sorted(client.get_subjects()) == sorted(names)


def test_same_answers_as_confluent_kafka(url: str, client: SchemaRegistryClient) -> None:
    """confluent-kafka's client and ours, on one registry, see the same ids, versions, errors."""
    with CSchemaRegistryClient({"url": url}) as theirs:
        same_answers(client, theirs)


def same_answers(client: SchemaRegistryClient, theirs: CSchemaRegistryClient) -> None:
    def c(schema: Schema) -> CSchema:
        return CSchema(schema.schema_str, schema.schema_type)

    assert client.register_schema("t-value", V1) == theirs.register_schema("t-value", c(V1))
    assert theirs.register_schema("t-value", c(V2)) == client.register_schema("t-value", V2)
    for version in (1, 2, "latest"):
        ours, their = client.get_version("t-value", version), theirs.get_version("t-value", version)
        assert (ours.schema_id, ours.version, ours.subject, ours.schema.schema_str) == (
            their.schema_id,
            their.version,
            their.subject,
            their.schema.schema_str,
        )
    assert client.get_subjects() == theirs.get_subjects()
    assert client.get_versions("t-value") == theirs.get_versions("t-value")
    assert (
        client.lookup_schema("t-value", V1).schema_id
        == theirs.lookup_schema("t-value", c(V1)).schema_id
    )
    assert client.test_compatibility("t-value", INCOMPATIBLE) == theirs.test_compatibility(
        "t-value", c(INCOMPATIBLE)
    )
    for ours_call, their_call in [
        (lambda: client.get_latest_version("x"), lambda: theirs.get_latest_version("x")),
        (lambda: client.get_schema(404), lambda: theirs.get_schema(404)),
        (
            lambda: client.register_schema("t-value", INCOMPATIBLE),
            lambda: theirs.register_schema("t-value", c(INCOMPATIBLE)),
        ),
        (
            lambda: client.register_schema("t-value", Schema("[")),
            lambda: theirs.register_schema("t-value", CSchema("[", "AVRO")),
        ),
    ]:
        assert error_of(ours_call) == error_of(their_call)
    assert client.delete_subject("t-value") == [1, 2]
    assert theirs.get_subjects() == []


@pytest.mark.anyio
async def test_async_client(url: str) -> None:
    """The async client makes the same calls, on asyncio and trio."""
    async with AsyncSchemaRegistryClient(url) as client:
        first = await client.register_schema("orders-value", V1)
        second = await client.register_schema("orders-value", V2)
        assert (await client.get_latest_version("orders-value")).schema_id == second
        assert (await client.lookup_schema("orders-value", V1)).version == 1
        assert json.loads((await client.get_schema(first)).schema_str) == json.loads(V1.schema_str)
        assert await client.get_subjects() == ["orders-value"]
        assert await client.test_compatibility("orders-value", INCOMPATIBLE) is False
        assert await client.set_config("orders-value", compatibility="NONE") == "NONE"
        with pytest.raises(SchemaRegistryError) as info:
            await client.get_version("nope", 1)
        assert info.value.error_code == 40401
        assert await client.delete_subject("orders-value") == [1, 2]
