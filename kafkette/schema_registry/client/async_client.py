""":class:`AsyncSchemaRegistryClient`: the registry's REST API, in an event loop (asyncio or trio).

The flows of :mod:`.core` driven over anyio streams (:mod:`.http`), or over
the in-process transport for ``memory://NAME`` (:mod:`.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, TypeVar

from kafkette.schema_registry.client.core import ClientCore, Flow, Request
from kafkette.schema_registry.client.http import AsyncHttpTransport
from kafkette.schema_registry.client.settings import RegistrySettings, registry_settings
from kafkette.schema_registry.client.types import RegisteredSchema, Schema

T = TypeVar("T")


class AsyncTransport(Protocol):
    async def send(self, request: Request) -> Any: ...

    async def aclose(self) -> None: ...


class AsyncSchemaRegistryClient:
    """The async twin of :class:`~kafkette.schema_registry.SchemaRegistryClient`: the same
    methods, coroutines, in the event loop that uses it (asyncio or trio).

    ``SchemaRegistryClient("http://localhost:8081")``, several URLs comma-separated,
    ``memory://NAME`` for a :class:`~kafkette.testing.MemoryCluster`'s registry, or
    confluent-kafka's configuration dict (``{"url": ..., "basic.auth.user.info":
    "user:secret", "ssl.ca.location": ...}``); options in Python spelling too
    (``basic_auth_user_info=``). Errors answered by the registry raise
    :class:`~kafkette.schema_registry.SchemaRegistryError` with the HTTP status,
    Confluent's ``error_code`` and message. Close it (``await client.aclose()``,
    or ``async with``) to drop its connections.
    """

    def __init__(self, url_or_conf: str | Mapping[str, Any] | None = None, **options: Any) -> None:
        self.settings: RegistrySettings = registry_settings(url_or_conf, **options)
        self._core = ClientCore()
        self._transport: AsyncTransport
        if self.settings.memory:
            from kafkette.schema_registry.client.memory import AsyncMemoryTransport

            self._transport = AsyncMemoryTransport(self.settings.endpoints[0])
        else:
            self._transport = AsyncHttpTransport(self.settings)

    async def _run(self, flow: Flow[T]) -> T:
        try:
            request = next(flow)
            while True:
                request = flow.send(await self._transport.send(request))
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def aclose(self) -> None:
        """Drop the connections (and, for memory://, the registry core's clients)."""
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        opener = getattr(self._transport, "open", None)
        if opener is not None:  # memory://: the registry core opens in this task
            await opener()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def clear_caches(self) -> None:
        """Forget every cached schema, id and version."""
        self._core.caches.clear()

    async def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        """Register ``schema`` under the subject (or find it there); its global id."""
        return await self._run(self._core.register_schema(subject_name, schema, normalize_schemas))

    async def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        """Register, and return the id and the version in the subject."""
        return await self._run(
            self._core.register_schema_full_response(subject_name, schema, normalize_schemas)
        )

    async def get_schema(self, schema_id: int, subject_name: str | None = None) -> Schema:
        """The schema with this global id (cached: an id never changes meaning)."""
        return await self._run(self._core.get_schema(schema_id, subject_name))

    async def get_subjects_by_id(self, schema_id: int) -> list[str]:
        """The subjects that hold the schema with this id."""
        return await self._run(self._core.get_subjects_by_id(schema_id))

    async def lookup_schema(
        self,
        subject_name: str,
        schema: Schema,
        normalize_schemas: bool = False,
        deleted: bool = False,
    ) -> RegisteredSchema:
        """The version of the subject that is ``schema`` (40403 if none is)."""
        return await self._run(
            self._core.lookup_schema(subject_name, schema, normalize_schemas, deleted)
        )

    async def get_subjects(self, deleted: bool = False) -> list[str]:
        """Every subject (with soft-deleted ones if ``deleted``)."""
        return await self._run(self._core.get_subjects(deleted))

    async def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Delete a subject (soft, or ``permanent`` after a soft delete); its versions."""
        return await self._run(self._core.delete_subject(subject_name, permanent))

    async def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (never cached)."""
        return await self._run(self._core.get_latest_version(subject_name))

    async def get_version(
        self, subject_name: str, version: int | str, deleted: bool = False
    ) -> RegisteredSchema:
        """One version of the subject (a number, or ``"latest"``)."""
        return await self._run(self._core.get_version(subject_name, version, deleted))

    async def get_versions(self, subject_name: str, deleted: bool = False) -> list[int]:
        """The subject's version numbers."""
        return await self._run(self._core.get_versions(subject_name, deleted))

    async def delete_version(
        self, subject_name: str, version: int | str, permanent: bool = False
    ) -> int:
        """Delete one version (soft, or ``permanent`` after a soft delete); its number."""
        return await self._run(self._core.delete_version(subject_name, version, permanent))

    async def set_config(self, subject_name: str | None = None, *, compatibility: str) -> str:
        """Set the compatibility level of a subject, or the global one; returns it."""
        return await self._run(self._core.set_config(subject_name, compatibility=compatibility))

    async def get_config(
        self, subject_name: str | None = None, default_to_global: bool = True
    ) -> str:
        """The compatibility level of a subject (falling back to the global one), or the global."""
        return await self._run(self._core.get_config(subject_name, default_to_global))

    async def delete_config(self, subject_name: str) -> str:
        """Drop a subject's own level; returns the level it had."""
        return await self._run(self._core.delete_config(subject_name))

    async def test_compatibility(
        self, subject_name: str, schema: Schema, version: int | str = "latest"
    ) -> bool:
        """Whether ``schema`` may follow that version under the subject's level."""
        return await self._run(self._core.test_compatibility(subject_name, schema, version))

    async def test_compatibility_all_versions(
        self, subject_name: str, schema: Schema
    ) -> tuple[bool, list[str]]:
        """Whether ``schema`` may be registered now (all versions the level checks), and why not."""
        return await self._run(self._core.test_compatibility_all_versions(subject_name, schema))

    async def get_schema_types(self) -> list[str]:
        """The schema types the registry knows."""
        return await self._run(self._core.get_schema_types())
