"""The in-process transport: ``memory://NAME`` registry URLs, no HTTP.

A client given ``memory://NAME`` (a :class:`~kafkette.testing.MemoryCluster`'s
``schema_registry_url``) opens the registry server's core over that cluster's
``_schemas`` topic (:func:`~kafkette.schema_registry.server.open_registry`) and
hands each request to :meth:`SchemaRegistry.handle
<kafkette.schema_registry.server.SchemaRegistry.handle>` directly: the same
answers as over HTTP, without a socket. Every client opens its own registry
core; they agree, as two registries on one broker do, because the topic holds
the state. The async transport runs the core in the client's event loop, opened
by ``async with`` or the first request, and closed by ``aclose`` in the same task
(its clients' task groups require it); the sync one in a background thread with
its own loop (an anyio blocking portal).
"""

from __future__ import annotations

import threading
from contextlib import AsyncExitStack, ExitStack
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from kafkette.client.inprocess import get_cluster
from kafkette.errors import KafkaConnectionError
from kafkette.schema_registry.client.core import Request
from kafkette.schema_registry.client.http import decode
from kafkette.schema_registry.client.settings import Endpoint
from kafkette.schema_registry.client.types import SchemaRegistryError
from kafkette.schema_registry.server import SchemaRegistry, open_registry


def bootstrap_of(endpoint: Endpoint) -> str:
    """The cluster's bootstrap URL; a closed MemoryCluster's is refused here, at once
    (its clients would retry connecting until their timeout)."""
    bootstrap = f"memory://{endpoint.host}"
    try:
        get_cluster(bootstrap)
    except KafkaConnectionError as exc:
        raise SchemaRegistryError(-1, -1, f"no schema registry at {endpoint}: {exc}") from None
    return bootstrap


def _closed() -> SchemaRegistryError:
    return SchemaRegistryError(-1, -1, "the schema registry client is closed")


async def _handle(registry: SchemaRegistry, request: Request) -> Any:
    headers = {"content-type": "application/vnd.schemaregistry.v1+json"}
    answer = await registry.handle(
        request.method, request.path, request.query_map, request.body or b"", headers
    )
    return decode(answer.status, answer.body)


class AsyncMemoryTransport:
    """Requests to the registry core of a ``memory://`` cluster, in the caller's loop."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._stack = AsyncExitStack()
        self._registry: SchemaRegistry | None = None
        self._opening: anyio.Lock | None = None
        self._closed = False

    async def _open(self) -> SchemaRegistry:
        if self._opening is None:
            self._opening = anyio.Lock()
        async with self._opening:
            if self._registry is None:
                if self._closed:
                    raise _closed()
                try:
                    self._registry = await self._stack.enter_async_context(
                        open_registry(bootstrap_of(self.endpoint))
                    )
                except SchemaRegistryError:
                    raise
                except Exception as exc:
                    raise SchemaRegistryError(
                        -1, -1, f"no schema registry at {self.endpoint}: {exc}"
                    ) from exc
            return self._registry

    async def open(self) -> None:
        """Open the registry core now, in this task (``async with`` the client does)."""
        await self._open()

    async def send(self, request: Request) -> Any:
        if self._closed:
            raise _closed()
        registry = self._registry or await self._open()
        return await _handle(registry, request)

    async def aclose(self) -> None:
        self._closed = True
        self._registry = None
        await self._stack.aclose()


class BlockingMemoryTransport:
    """The same, for the sync client: the core runs in a background thread's loop,
    opened by the first request and closed by :meth:`close`, each in one task of
    that loop (the portal's context manager task)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal())
        self._registry: SchemaRegistry | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> SchemaRegistry:
        with self._lock:
            if self._closed:
                raise _closed()
            if self._registry is None:
                manager = self._portal.wrap_async_context_manager(
                    open_registry(bootstrap_of(self.endpoint))
                )
                try:
                    self._registry = self._stack.enter_context(manager)
                except Exception as exc:
                    raise SchemaRegistryError(
                        -1, -1, f"no schema registry at {self.endpoint}: {exc}"
                    ) from exc
            return self._registry

    def send(self, request: Request) -> Any:
        registry = self._registry or self._open()
        if self._closed:
            raise _closed()
        return self._portal.call(_handle, registry, request)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stack.close()
