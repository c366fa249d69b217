"""A registry served over HTTP from a background event loop, for tests with sync peers.

:func:`registry_server` starts :class:`RegistryHttpServer` on a free loopback
port in an anyio blocking portal (a thread with its own loop), the registry's
records in this process (no broker) or in the ``_schemas`` topic of
``bootstrap``, and stops it on exit, also on failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from anyio.from_thread import start_blocking_portal

from kafkette.schema_registry.server import SchemaRegistry, open_registry
from kafkette.schema_registry.server.http import RegistryHttpServer


@contextmanager
def registry_server(bootstrap: str | None = None, **options: Any) -> Iterator[str]:
    """The URL of a registry serving on 127.0.0.1 (state in ``bootstrap``'s topic if given)."""
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal())
        if bootstrap is None:
            registry = SchemaRegistry()
        else:
            registry = stack.enter_context(
                portal.wrap_async_context_manager(open_registry(bootstrap))
            )
        server = RegistryHttpServer(registry, "127.0.0.1", 0, **options)
        future, url = portal.start_task(server.serve)
        try:
            yield str(url)
        finally:
            future.cancel()
