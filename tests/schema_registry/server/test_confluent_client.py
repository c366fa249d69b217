"""confluent-kafka's SchemaRegistryClient (a peer nobody here wrote) against our registry.

Each test starts the registry's HTTP server on a free loopback port and talks to
it with the client unchanged: registering, evolving, Confluent's 409 at every
level, lookups by id and subject, deletes, and Confluent's error bodies.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.schema_registry.server.servers import registry_server


def avro(*fields: tuple[str, Any], default: dict[str, Any] | None = None) -> Schema:
    defaults = default or {}
    body = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {
                "name": name,
                "type": kind,
                **({"default": defaults[name]} if name in defaults else {}),
            }
            for name, kind in fields
        ],
    }
    return Schema(json.dumps(body), "AVRO")


V1 = avro(("id", "long"), ("total", "double"))
V2 = avro(("id", "long"), ("total", "double"), ("note", "string"), default={"note": ""})


@pytest.fixture
def url() -> Iterator[str]:
    with registry_server() as found:
        yield found


@pytest.fixture
def client(url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": url}) as opened:
        yield opened


def error_of(call: Any, *args: Any, **kwargs: Any) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as raised:
        call(*args, **kwargs)
    return raised.value


def test_register_evolve_and_read_back(client: SchemaRegistryClient) -> None:
    """Ids are global and stable: the same schema again, or under another subject, keeps
    its id; a compatible change is the next version with a new id."""
    first = client.register_schema("orders-value", V1)
    assert first == 1
    assert client.register_schema("orders-value", V1) == 1
    assert client.register_schema("audit-value", V1) == 1
    second = client.register_schema("orders-value", V2)
    assert second == 2
    latest = client.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version, latest.subject) == (2, 2, "orders-value")
    assert json.loads(latest.schema.schema_str) == json.loads(V2.schema_str)
    assert client.get_versions("orders-value") == [1, 2]
    assert json.loads(client.get_schema(1).schema_str) == json.loads(V1.schema_str)
    assert client.get_version("orders-value", 1).schema_id == 1
    assert sorted(client.get_subjects()) == ["audit-value", "orders-value"]
    found = client.lookup_schema("orders-value", V1)
    assert (found.schema_id, found.version) == (1, 1)
    assert client.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"] or set(
        client.get_schema_types()
    ) == {"AVRO", "JSON", "PROTOBUF"}


def test_soft_then_permanent_delete(url: str, client: SchemaRegistryClient) -> None:
    """A soft-deleted subject leaves the listings but its ids still resolve; a permanent
    delete needs the soft one first; a new registration after it gets a new version."""
    client.register_schema("orders-value", V1)
    client.register_schema("orders-value", V2)
    assert client.delete_version("orders-value", 2) == 2
    assert client.get_versions("orders-value") == [1]
    assert client.delete_subject("orders-value") == [1]
    assert client.get_subjects() == []
    assert json.loads(client.get_schema(2).schema_str) == json.loads(V2.schema_str)
    error = error_of(client.delete_subject, "orders-value")
    assert (error.http_status_code, error.error_code) == (404, 40404)
    assert client.delete_subject("orders-value", permanent=True) == [1, 2]
    with SchemaRegistryClient({"url": url}) as fresh:  # the first one caches schema 2
        error = error_of(fresh.get_schema, 2)
    assert (error.http_status_code, error.error_code) == (404, 40403)
    assert client.register_schema("orders-value", V2) == 3  # ids are never reused


INCOMPATIBLE = {
    # a reader field without a default: new cannot read old data
    "BACKWARD": avro(("id", "long"), ("total", "double"), ("must", "string")),
    # old readers need 'total', which the new schema no longer writes
    "FORWARD": avro(("id", "long")),
    "FULL": avro(("id", "long"), ("total", "double"), ("must", "string")),
}


@pytest.mark.parametrize(
    "level",
    [
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
    ],
)
def test_an_incompatible_change_is_409_at_each_level(
    client: SchemaRegistryClient, level: str
) -> None:
    """Each level refuses a change it forbids with Confluent's 409/40901, stores nothing,
    and the compatibility endpoint says the same."""
    client.set_compatibility("orders-value", level)
    assert client.get_compatibility("orders-value") == level
    client.register_schema("orders-value", V1)
    bad = INCOMPATIBLE[level.removesuffix("_TRANSITIVE")]
    assert client.test_compatibility("orders-value", bad) is False
    error = error_of(client.register_schema, "orders-value", bad)
    assert (error.http_status_code, error.error_code) == (409, 40901)
    assert "incompatible with an earlier schema" in error.error_message
    assert client.get_versions("orders-value") == [1]
    assert client.test_compatibility("orders-value", V2) is True
    assert client.register_schema("orders-value", V2) == 2


def test_none_accepts_any_change(client: SchemaRegistryClient) -> None:
    """NONE: the incompatible changes of every other level are registered."""
    client.set_compatibility(level="NONE")
    client.register_schema("orders-value", V1)
    assert client.register_schema("orders-value", INCOMPATIBLE["BACKWARD"]) == 2
    assert client.register_schema("orders-value", INCOMPATIBLE["FORWARD"]) == 3
    assert client.get_compatibility() == "NONE"


def test_error_bodies(client: SchemaRegistryClient) -> None:
    """Confluent's statuses and codes for a malformed schema, an unknown subject, version
    and id, and an invalid level; nothing is stored."""
    error = error_of(client.register_schema, "orders-value", Schema('{"type": "record"', "AVRO"))
    assert (error.http_status_code, error.error_code) == (422, 42201)
    error = error_of(client.register_schema, "orders-value", Schema('{"type": "nope"}', "AVRO"))
    assert (error.http_status_code, error.error_code) == (422, 42201)
    error = error_of(client.get_latest_version, "nobody")
    assert (error.http_status_code, error.error_code) == (404, 40401)
    assert error.error_message == "Subject 'nobody' not found."
    error = error_of(client.get_schema, 999)
    assert (error.http_status_code, error.error_code) == (404, 40403)
    client.register_schema("orders-value", V1)
    error = error_of(client.get_version, "orders-value", 7)
    assert (error.http_status_code, error.error_code) == (404, 40402)
    error = error_of(client.set_compatibility, "orders-value", "SIDEWAYS")
    assert (error.http_status_code, error.error_code) == (422, 42203)
    assert client.get_subjects() == ["orders-value"]
    assert client.get_versions("orders-value") == [1]


def raw(url: str, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, Any]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/vnd.schemaregistry.v1+json"
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_oversized_bodies(url: str, client: SchemaRegistryClient) -> None:
    """A schema whose record the topic would refuse is Confluent's 422/42209; a body past
    the server's bound is 413 before it is read; nothing is stored either way."""
    fields = [{"name": f"f{i}", "type": "string", "doc": "x" * 1000} for i in range(1100)]
    big = {"type": "record", "name": "Big", "fields": fields}
    body = json.dumps({"schema": json.dumps(big)}).encode()
    status, answer = raw(url, "POST", "/subjects/big/versions", body)
    assert (status, answer["error_code"]) == (422, 42209)
    with registry_server(max_body_bytes=64 * 1024) as small:
        status, answer = raw(small, "POST", "/subjects/big/versions", body)
        assert (status, answer["error_code"]) == (413, 413)
        assert raw(small, "GET", "/subjects") == (200, [])
    assert client.get_subjects() == []


def test_references(client: SchemaRegistryClient) -> None:
    """A schema naming a type of another subject's version registers with the reference;
    the referenced version cannot be deleted while referred to (42206)."""
    from confluent_kafka.schema_registry import SchemaReference

    address = {
        "type": "record",
        "name": "Address",
        "namespace": "shop",
        "fields": [{"name": "city", "type": "string"}],
    }
    client.register_schema("address", Schema(json.dumps(address), "AVRO"))
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "shop.Address"}],
    }
    refs = [SchemaReference("shop.Address", "address", 1)]
    schema_id = client.register_schema("customer", Schema(json.dumps(customer), "AVRO", refs))
    assert schema_id == 2
    assert client.get_schema(schema_id).references[0].subject == "address"
    assert client.get_referenced_by("address", 1) == [2]
    error = error_of(client.delete_version, "address", 1)
    assert (error.http_status_code, error.error_code) == (422, 42206)
    unresolved = Schema(json.dumps(customer), "AVRO")
    error = error_of(client.register_schema, "customer2", unresolved)
    assert (error.http_status_code, error.error_code) == (422, 42201)


def test_json_schema_evolution(client: SchemaRegistryClient) -> None:
    """JSON Schema: widening a bound is registered, a typed property added to an open
    object is Confluent's 409 at BACKWARD, and the same change to a closed one is not."""

    def json_schema(properties: dict[str, Any], **extra: Any) -> Schema:
        body = {"type": "object", "properties": properties, **extra}
        return Schema(json.dumps(body), "JSON")

    v1 = json_schema({"sku": {"type": "string", "maxLength": 8}})
    assert client.register_schema("items-value", v1) == 1
    wider = json_schema({"sku": {"type": "string", "maxLength": 16}})
    assert client.register_schema("items-value", wider) == 2
    added = json_schema({"sku": {"type": "string"}, "qty": {"type": "integer"}})
    error = error_of(client.register_schema, "items-value", added)
    assert (error.http_status_code, error.error_code) == (409, 40901)
    closed = json_schema({"sku": {"type": "string"}}, additionalProperties=False)
    assert client.register_schema("closed-value", closed) == 3
    closed_added = json_schema(
        {"sku": {"type": "string"}, "qty": {"type": "integer"}}, additionalProperties=False
    )
    assert client.register_schema("closed-value", closed_added) == 4
    assert client.get_latest_version("items-value").schema.schema_type == "JSON"


def test_protobuf_evolution(client: SchemaRegistryClient) -> None:
    """Protobuf: a field added registers, a field's type changed across wire classes is
    Confluent's 409 at BACKWARD, and a malformed .proto is 422/42201."""

    def proto(fields: str) -> Schema:
        return Schema(
            f'syntax = "proto3";\npackage shop;\nmessage Order {{ {fields} }}\n', "PROTOBUF"
        )

    assert client.register_schema("orders-proto", proto("int64 id = 1;")) == 1
    assert client.register_schema("orders-proto", proto("int64 id = 1; string note = 2;")) == 2
    error = error_of(client.register_schema, "orders-proto", proto("string id = 1;"))
    assert (error.http_status_code, error.error_code) == (409, 40901)
    error = error_of(client.register_schema, "orders-proto", proto("int64 id = ;"))
    assert (error.http_status_code, error.error_code) == (422, 42201)
    latest = client.get_latest_version("orders-proto")
    assert (latest.version, latest.schema.schema_type) == (2, "PROTOBUF")
