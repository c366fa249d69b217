"""SchemaRegistry.handle without a transport: the REST API's answers, Confluent's errors.

The registry runs on its in-process store (LocalStore); every request goes through
``handle`` as the HTTP shell and the clients' memory:// transport send it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkette.schema_registry.server import SchemaRegistry
from kafkette.schema_registry.server.registry import LocalStore
from kafkette.schema_registry.server.state import RegistryState, Version, schema_record

pytestmark = pytest.mark.anyio

A1 = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})
A2 = json.dumps(
    {
        "type": "record",
        "name": "A",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int", "default": 0}],
    }
)


async def call(
    registry: SchemaRegistry, method: str, path: str, body: Any = None, **query: str
) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    status, answer, content_type = await registry.handle(method, path, query, data, {})
    assert content_type == "application/vnd.schemaregistry.v1+json"
    return status, json.loads(answer)


async def test_versions_latest_and_invalid_version_ids() -> None:
    """``latest`` and -1 name the newest version; 0, 2^31 and words are 42202."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/s/versions", {"schema": A1})
    await call(registry, "POST", "/subjects/s/versions", {"schema": A2})
    for name in ("latest", "-1", "2"):
        status, body = await call(registry, "GET", f"/subjects/s/versions/{name}")
        assert (status, body["version"], body["id"]) == (200, 2, 2)
    for bad in ("0", "2147483648", "first"):
        status, body = await call(registry, "GET", f"/subjects/s/versions/{bad}")
        assert (status, body["error_code"]) == (422, 42202)
        assert body["message"] == (
            f"The specified version '{bad}' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"'
        )
    status, raw = await call(registry, "GET", "/subjects/s/versions/1/schema")
    assert (status, raw) == (200, json.loads(A1))


async def test_soft_deleted_versions_show_with_deleted_true() -> None:
    """A soft-deleted version leaves the listings but ``deleted=true`` shows it; deleting
    it again is 40406, a permanent delete of a live one 40407."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/s/versions", {"schema": A1})
    await call(registry, "POST", "/subjects/s/versions", {"schema": A2})
    assert await call(registry, "DELETE", "/subjects/s/versions/2/", permanent="true") == (
        404,
        {
            "error_code": 40407,
            "message": "Subject 's' Version 2 was not deleted first before being permanently "
            "deleted",
        },
    )
    assert await call(registry, "DELETE", "/subjects/s/versions/1") == (200, 1)
    status, body = await call(registry, "DELETE", "/subjects/s/versions/1")
    assert (status, body["error_code"]) == (404, 40406)
    assert await call(registry, "GET", "/subjects/s/versions") == (200, [2])
    assert await call(registry, "GET", "/subjects/s/versions", deleted="true") == (200, [1, 2])
    status, body = await call(registry, "GET", "/subjects/s/versions/1")
    assert (status, body["error_code"]) == (404, 40402)
    status, body = await call(registry, "GET", "/subjects/s/versions/1", deleted="true")
    assert (status, body["id"]) == (200, 1)
    await call(registry, "DELETE", "/subjects/s")  # v2 soft deleted too: no live version
    assert await call(registry, "GET", "/subjects/s/versions/2") == (
        404,
        {"error_code": 40401, "message": "Subject 's' not found."},
    )
    status, body = await call(registry, "GET", "/subjects/s/versions/2", deleted="true")
    assert (status, body["version"]) == (200, 2)
    # re-registering the soft-deleted schema makes a new version with the old id, and
    # removes the soft-deleted version of that id for good (as Confluent)
    assert await call(registry, "POST", "/subjects/s/versions", {"schema": A1}) == (200, {"id": 1})
    assert await call(registry, "GET", "/subjects/s/versions") == (200, [3])
    assert await call(registry, "GET", "/subjects/s/versions", deleted="true") == (200, [2, 3])


async def test_lookup_under_a_subject() -> None:
    """POST /subjects/{s} finds the schema's version (whitespace aside); another schema is
    40403, an unknown subject 40401."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/s/versions", {"schema": A1})
    spaced = json.dumps(json.loads(A1), indent=2)
    status, body = await call(registry, "POST", "/subjects/s", {"schema": spaced})
    assert (status, body["subject"], body["version"], body["id"]) == (200, "s", 1, 1)
    assert await call(registry, "POST", "/subjects/s", {"schema": A2}) == (
        404,
        {"error_code": 40403, "message": "Schema not found"},
    )
    assert await call(registry, "POST", "/subjects/t", {"schema": A1}) == (
        404,
        {"error_code": 40401, "message": "Subject 't' not found."},
    )


async def test_config_per_subject_and_global() -> None:
    """A subject without its own level is 40408 unless defaultToGlobal; DELETE returns the
    level it removes; an unknown level is 42203 with Confluent's message."""
    registry = SchemaRegistry()
    assert await call(registry, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    status, body = await call(registry, "GET", "/config/s")
    assert (status, body["error_code"]) == (404, 40408)
    assert await call(registry, "GET", "/config/s", defaultToGlobal="true") == (
        200,
        {"compatibilityLevel": "BACKWARD"},
    )
    assert await call(registry, "PUT", "/config/s", {"compatibility": "forward"}) == (
        200,
        {"compatibility": "FORWARD"},
    )
    assert await call(registry, "GET", "/config/s") == (200, {"compatibilityLevel": "FORWARD"})
    assert await call(registry, "DELETE", "/config/s") == (200, {"compatibilityLevel": "FORWARD"})
    assert await call(registry, "PUT", "/config", {"compatibility": "FULLEST"}) == (
        422,
        {
            "error_code": 42203,
            "message": "Invalid compatibility level. Valid values are none, backward, forward, "
            "full, backward_transitive, forward_transitive, and full_transitive",
        },
    )


async def test_read_only_mode_refuses_writes() -> None:
    """READONLY refuses registrations and deletes (42205) and still answers reads."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/s/versions", {"schema": A1})
    assert await call(registry, "PUT", "/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert await call(registry, "GET", "/mode") == (200, {"mode": "READONLY"})
    status, body = await call(registry, "POST", "/subjects/s/versions", {"schema": A2})
    assert (status, body["error_code"]) == (422, 42205)
    status, body = await call(registry, "DELETE", "/subjects/s")
    assert (status, body["error_code"]) == (422, 42205)
    assert await call(registry, "GET", "/subjects") == (200, ["s"])
    assert await call(registry, "PUT", "/mode", {"mode": "SLEEPY"}) == (
        422,
        {
            "error_code": 42204,
            "message": "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.",
        },
    )


async def test_import_mode_keeps_the_given_ids_and_versions() -> None:
    """IMPORT (on an empty registry) registers with the id and version given, unchecked;
    the next id allocated afterwards is past the imported ones."""
    registry = SchemaRegistry()
    assert await call(registry, "PUT", "/mode", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    body = {"schema": A1, "id": 42, "version": 3}
    assert await call(registry, "POST", "/subjects/s/versions", body) == (200, {"id": 42})
    assert await call(registry, "GET", "/subjects/s/versions") == (200, [3])
    await call(registry, "PUT", "/mode", {"mode": "READWRITE"})
    assert await call(registry, "POST", "/subjects/t/versions", {"schema": A2}) == (200, {"id": 43})


async def test_schemas_by_id() -> None:
    """An id's schema, subjects and subject-versions; non-Avro types say their type."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/a/versions", {"schema": A1})
    await call(registry, "POST", "/subjects/b/versions", {"schema": A1})
    json_schema = {"schema": '{"type": "object"}', "schemaType": "JSON"}
    assert await call(registry, "POST", "/subjects/j/versions", json_schema) == (200, {"id": 2})
    assert await call(registry, "GET", "/schemas/ids/1") == (
        200,
        {"schema": json.dumps(json.loads(A1), separators=(",", ":"))},
    )
    assert await call(registry, "GET", "/schemas/ids/2") == (
        200,
        {"schemaType": "JSON", "schema": '{"type":"object"}'},
    )
    assert await call(registry, "GET", "/schemas/ids/1/subjects") == (200, ["a", "b"])
    assert await call(registry, "GET", "/schemas/ids/1/versions") == (
        200,
        [{"subject": "a", "version": 1}, {"subject": "b", "version": 1}],
    )
    assert await call(registry, "GET", "/schemas/ids/x") == (
        404,
        {"error_code": 404, "message": "HTTP 404 Not Found"},
    )


async def test_unknown_paths_methods_and_bodies() -> None:
    """Jersey's 404 and 405; a body that is not a schema object is 422, not JSON 400."""
    registry = SchemaRegistry()
    assert (await call(registry, "GET", "/nothing/here"))[1]["error_code"] == 404
    assert await call(registry, "PATCH", "/subjects") == (
        405,
        {"error_code": 405, "message": "HTTP 405 Method Not Allowed"},
    )
    assert (await call(registry, "POST", "/subjects/s/versions", b"[1]"))[0] == 422
    assert (await call(registry, "POST", "/subjects/s/versions", b"{oops"))[0] == 400
    assert (await call(registry, "POST", "/subjects/s/versions", {"schema": 5}))[0] == 422
    status, body = await call(
        registry, "POST", "/subjects/s/versions", {"schema": "{}", "schemaType": "XML"}
    )
    assert (status, body["error_code"]) == (422, 42201)
    assert await call(registry, "GET", "/subjects") == (200, [])


async def test_subject_names_are_percent_decoded() -> None:
    """A subject with a slash or a space arrives percent-encoded and is stored decoded."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/a%2Fb%20c/versions", {"schema": A1})
    assert await call(registry, "GET", "/subjects") == (200, ["a/b c"])


async def test_compatibility_endpoint_verbose() -> None:
    """verbose=true lists why; against 'latest' and against all versions."""
    registry = SchemaRegistry()
    await call(registry, "POST", "/subjects/s/versions", {"schema": A1})
    breaking = json.dumps(
        {"type": "record", "name": "A", "fields": [{"name": "x", "type": "string"}]}
    )
    status, body = await call(
        registry,
        "POST",
        "/compatibility/subjects/s/versions/latest",
        {"schema": breaking},
        verbose="true",
    )
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert await call(registry, "POST", "/compatibility/subjects/s/versions", {"schema": A2}) == (
        200,
        {"is_compatible": True},
    )


class RacingStore(LocalStore):
    """A store where another registry's record lands just before our first append."""

    def __init__(self, foreign: tuple[bytes, bytes]) -> None:
        super().__init__()
        self.foreign: tuple[bytes, bytes] | None = foreign

    async def append(self, state: RegistryState, records: Any) -> None:
        if self.foreign is not None:
            self.records.append(self.foreign)
            self.foreign = None
        await super().append(state, records)


async def test_a_registration_that_loses_a_race_tries_again() -> None:
    """Another registry registers version 1 (id 1) between our read and our write: our
    record is ignored, the winner's is written again after it (so compaction keeps the
    winner's), and ours becomes version 2 with id 2; a fresh replay agrees."""
    winner = Version("s", 1, 1, json.dumps(json.loads(A1), separators=(",", ":")))
    store = RacingStore(schema_record(winner))
    registry = SchemaRegistry(store)
    assert await call(registry, "POST", "/subjects/s/versions", {"schema": A2}) == (
        200,
        {"id": 2},
    )
    keys = [json.loads(key)["version"] for key, _ in store.records]
    assert keys == [1, 1, 1, 2]  # the winner's, ours (ignored), the winner's again, ours
    last = {key: index for index, (key, _) in enumerate(store.records)}
    replay = RegistryState()
    for index, (key, value) in enumerate(store.records):
        if last[key] == index:  # what compaction leaves: each key's last record, in order
            replay.apply(key, value)
    assert [(v.version, v.id) for v in replay.versions("s")] == [(1, 1), (2, 2)]
    assert replay.versions("s") == registry.state.versions("s")


async def test_stored_schemas_are_read_without_the_checks_of_new_ones() -> None:
    """A version another registry stored with a default Confluent would not check (its
    validation off) is still read to check the next version, as Confluent reads its
    store; a new schema with such a default is 42201."""
    lax = json.dumps(
        {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int", "default": "1"}]}
    )
    store = LocalStore()
    store.records.append(schema_record(Version("s", 1, 1, lax)))
    registry = SchemaRegistry(store)
    status, body = await call(registry, "POST", "/subjects/s/versions", {"schema": A2})
    assert (status, body) == (200, {"id": 2})
    status, body = await call(registry, "POST", "/subjects/t/versions", {"schema": lax})
    assert (status, body["error_code"]) == (422, 42201)


async def test_global_config_delete_contexts_and_the_schemas_listing() -> None:
    """DELETE /config puts the global level back to BACKWARD and says what it was;
    /contexts is the default context; GET /schemas lists versions (latestOnly, prefix)."""
    registry = SchemaRegistry()
    assert await call(registry, "DELETE", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    await call(registry, "PUT", "/config", {"compatibility": "NONE"})
    assert await call(registry, "DELETE", "/config") == (200, {"compatibilityLevel": "NONE"})
    assert await call(registry, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert await call(registry, "GET", "/contexts") == (200, ["."])
    await call(registry, "POST", "/subjects/a/versions", {"schema": A1})
    await call(registry, "POST", "/subjects/a/versions", {"schema": A2})
    await call(registry, "POST", "/subjects/b/versions", {"schema": A1})
    status, listed = await call(registry, "GET", "/schemas")
    assert status == 200
    assert [(s["subject"], s["version"], s["id"]) for s in listed] == [
        ("a", 1, 1),
        ("a", 2, 2),
        ("b", 1, 1),
    ]
    listed = (await call(registry, "GET", "/schemas", latestOnly="true", subjectPrefix="a"))[1]
    assert [(s["subject"], s["version"]) for s in listed] == [("a", 2)]
