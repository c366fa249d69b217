"""The sync and async registry clients have the same methods, with the same parameters."""

from __future__ import annotations

import inspect

from kafkette.schema_registry import AsyncSchemaRegistryClient, SchemaRegistryClient

ONLY_SYNC = {"close", "__enter__", "__exit__"}
ONLY_ASYNC = {"aclose", "__aenter__", "__aexit__"}


def public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member)
        and (not name.startswith("_") or name.startswith("__"))
        and name not in ("__init__", "__module__")
    }


def test_every_method_has_a_twin() -> None:
    """Same names (but close/aclose and the context managers), same parameters;
    the async twins of the registry calls are coroutines, the rest not."""
    sync, async_ = public(SchemaRegistryClient), public(AsyncSchemaRegistryClient)
    assert set(sync) - ONLY_SYNC == set(async_) - ONLY_ASYNC
    for name in set(sync) - ONLY_SYNC:
        assert sync[name] == async_[name], name
        waits = inspect.iscoroutinefunction(getattr(AsyncSchemaRegistryClient, name))
        assert waits == (name != "clear_caches"), name
        assert not inspect.iscoroutinefunction(getattr(SchemaRegistryClient, name))
