"""The schema registry client: Confluent's REST API v1, sync and async, with caches.

Layers (each a module): ``types`` (the values and the error), ``core`` (every
method as a flow of requests, and the caches; no I/O), ``settings`` (URLs,
credentials, TLS), ``http`` (h11 over blocking sockets or anyio streams),
``memory`` (``memory://NAME``: the registry core in this process), and the two
clients driving the flows: ``sync_client`` and ``async_client``.
"""

from kafkette.schema_registry.client.async_client import AsyncSchemaRegistryClient
from kafkette.schema_registry.client.sync_client import SchemaRegistryClient
from kafkette.schema_registry.client.types import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryError,
)

__all__ = [
    "AsyncSchemaRegistryClient",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
]
