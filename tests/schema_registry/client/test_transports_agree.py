"""The in-process transport (memory://) and HTTP give the client the same answers.

One scenario of calls, errors included, runs on a registry served over HTTP
(its state in a memory cluster's ``_schemas`` topic) and through ``memory://``
on another cluster; every result and every error's (status, code, message)
must be equal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kafkette.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from kafkette.testing import MemoryCluster
from tests.schema_registry.server.servers import registry_server


def record(*types: str) -> Schema:
    fields = [{"name": f"f{i}", "type": kind} for i, kind in enumerate(types)]
    return Schema(json.dumps({"type": "record", "name": "R", "fields": fields}))


def scenario(client: SchemaRegistryClient) -> list[Any]:
    """Calls through a subject's life; each result, or the error's fields."""
    results: list[Any] = []

    def step(call: Callable[[], Any]) -> None:
        try:
            value = call()
        except SchemaRegistryError as exc:
            value = ("error", exc.http_status_code, exc.error_code, exc.error_message)
        results.append(value)

    step(lambda: client.register_schema("a", record("int")))
    step(lambda: client.register_schema("a", record("long")))  # int -> long: BACKWARD fine
    step(lambda: client.register_schema("a", record("string")))  # 409
    step(lambda: client.register_schema("b", record("int")))  # the same id as a's first
    step(lambda: client.register_schema("a", Schema("{")))  # 422
    step(lambda: client.get_versions("a"))
    step(lambda: client.get_latest_version("a"))
    step(lambda: client.get_version("a", 9))
    step(lambda: client.get_schema(1))
    step(lambda: client.get_schema(99))
    step(lambda: client.get_subjects_by_id(1))
    step(lambda: client.lookup_schema("b", record("long")))
    step(lambda: client.test_compatibility("a", record("string")))
    step(lambda: client.set_config("a", compatibility="NONE"))
    step(lambda: client.get_config("a"))
    step(lambda: client.register_schema("a", record("string")))
    step(lambda: client.delete_version("a", 1))
    step(lambda: client.delete_version("a", 1))  # 40406: already soft-deleted
    step(lambda: client.get_subjects())
    step(lambda: client.delete_subject("b"))
    step(lambda: client.delete_subject("b", permanent=True))
    step(lambda: client.get_subjects(deleted=True))
    step(lambda: client.get_latest_version("b"))
    return results


def test_memory_and_http_agree() -> None:
    """Every answer and error is the same over both transports."""
    with MemoryCluster() as served_state, MemoryCluster() as in_process:
        with (
            registry_server(served_state.bootstrap_servers) as url,
            SchemaRegistryClient(url) as over_http,
        ):
            http_results = scenario(over_http)
        with SchemaRegistryClient(in_process.schema_registry_url) as in_memory:
            memory_results = scenario(in_memory)
    assert memory_results == http_results
    assert http_results[2][:3] == ("error", 409, 40901)
    assert http_results[3] == http_results[0]
