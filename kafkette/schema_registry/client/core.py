"""The registry client without I/O: each call a flow of requests, and the caches.

Every client method is a generator (a *flow*) that yields the
:class:`Request` it needs answered and receives the answer's decoded JSON
body, then returns the method's value; a flow answered from a cache yields
nothing. The sync client (:mod:`.sync_client`) and the async one
(:mod:`.async_client`) drive the same flows, each over its own transport, so
the two cannot disagree on paths, bodies, answers or caching (the model is
httpx's auth flows). An error answer never reaches a flow: the transport
raises :class:`SchemaRegistryError` with Confluent's code and message.

What is cached, as confluent-kafka's client caches it: a schema by id (an id
never changes meaning), the id and version of a schema in a subject (from
register and lookup), and a subject's numbered versions. Latest versions are
not cached (they move); deleting a subject or a version drops what it held.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Mapping
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import attrs

from kafkette.schema_registry.client.types import RegisteredSchema, Schema

T = TypeVar("T")

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
"""Confluent's compatibility levels."""


@attrs.frozen
class Request:
    """One REST call: the method, the path (quoted), the query and the JSON body."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None

    @property
    def target(self) -> str:
        """The path with its query string, as sent on the request line."""
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path

    @property
    def query_map(self) -> dict[str, str]:
        return dict(self.query)


Flow = Generator[Request, Any, T]
"""A client method's requests out, decoded answers in, its value returned."""


def _segment(name: str) -> str:
    return quote(name, safe="")


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _flags(**flags: bool) -> tuple[tuple[str, str], ...]:
    return tuple((name, "true") for name, on in flags.items() if on)


def _version(version: int | str) -> str:
    if version == "latest" or (isinstance(version, int) and not isinstance(version, bool)):
        return str(version)
    raise ValueError(f"a version is a number or 'latest', not {version!r}")


def _level(level: str) -> str:
    upper = level.upper()
    if upper not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}: one of {', '.join(LEVELS)}")
    return upper


def _registered(data: Mapping[str, Any], subject: str) -> RegisteredSchema:
    return RegisteredSchema.from_json({"subject": subject, **data})


@attrs.define
class Caches:
    """What the flows remember; one lock, as the sync client is shared by threads."""

    schemas: dict[int, Schema] = attrs.Factory(dict)
    ids: dict[tuple[str, Schema, bool], int] = attrs.Factory(dict)
    registered: dict[tuple[str, Schema, bool], RegisteredSchema] = attrs.Factory(dict)
    versions: dict[tuple[str, int], RegisteredSchema] = attrs.Factory(dict)
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def keep(self, registered: RegisteredSchema, normalize: bool | None = None) -> None:
        with self.lock:
            self.schemas.setdefault(registered.schema_id, registered.schema)
            self.versions[registered.subject, registered.version] = registered
            if normalize is not None:
                key = (registered.subject, registered.schema, normalize)
                self.registered[key] = registered
                self.ids[key] = registered.schema_id

    def forget(self, subject: str, version: int | None = None) -> None:
        """Drop what a deleted subject (or one version of it) held; ids by schema
        for the whole subject, as register answers do not say their version."""
        with self.lock:
            for table in (self.ids, self.registered):
                for by_schema in [k for k in table if k[0] == subject]:
                    del table[by_schema]
            for numbered in [k for k in self.versions if k[0] == subject]:
                if version is None or numbered[1] == version:
                    del self.versions[numbered]

    def clear(self) -> None:
        with self.lock:
            self.schemas.clear()
            self.ids.clear()
            self.registered.clear()
            self.versions.clear()


class ClientCore:
    """The flows of every client method (Confluent's names and signatures)."""

    def __init__(self) -> None:
        self.caches = Caches()

    def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> Flow[int]:
        key = (subject_name, schema, normalize_schemas)
        cached = self.caches.ids.get(key)
        if cached is not None:
            return cached
        data = yield Request(
            "POST",
            f"/subjects/{_segment(subject_name)}/versions",
            _flags(normalize=normalize_schemas),
            _json(schema.to_json()),
        )
        schema_id = int(data["id"])
        with self.caches.lock:
            self.caches.ids[key] = schema_id
            self.caches.schemas.setdefault(schema_id, schema)
        return schema_id

    def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> Flow[RegisteredSchema]:
        """Register, then the registered version (id, version) as lookup gives it."""
        yield from self.register_schema(subject_name, schema, normalize_schemas)
        return (yield from self.lookup_schema(subject_name, schema, normalize_schemas))

    def get_schema(self, schema_id: int, subject_name: str | None = None) -> Flow[Schema]:
        cached = self.caches.schemas.get(schema_id)
        if cached is not None:
            return cached
        query = (("subject", subject_name),) if subject_name else ()
        data = yield Request("GET", f"/schemas/ids/{int(schema_id)}", query)
        schema = Schema.from_json(data)
        with self.caches.lock:
            self.caches.schemas[schema_id] = schema
        return schema

    def get_subjects_by_id(self, schema_id: int) -> Flow[list[str]]:
        data = yield Request("GET", f"/schemas/ids/{int(schema_id)}/subjects")
        return [str(subject) for subject in data]

    def lookup_schema(
        self,
        subject_name: str,
        schema: Schema,
        normalize_schemas: bool = False,
        deleted: bool = False,
    ) -> Flow[RegisteredSchema]:
        key = (subject_name, schema, normalize_schemas)
        cached = self.caches.registered.get(key)
        if cached is not None and not deleted:
            return cached
        data = yield Request(
            "POST",
            f"/subjects/{_segment(subject_name)}",
            _flags(normalize=normalize_schemas, deleted=deleted),
            _json(schema.to_json()),
        )
        # the registry answers with the text it stored; the caller's schema is the key
        registered = _registered(data, subject_name)
        if not deleted:
            self.caches.keep(registered, normalize_schemas)
            with self.caches.lock:
                self.caches.registered[key] = registered
        return registered

    def get_subjects(self, deleted: bool = False) -> Flow[list[str]]:
        data = yield Request("GET", "/subjects", _flags(deleted=deleted))
        return [str(subject) for subject in data]

    def delete_subject(self, subject_name: str, permanent: bool = False) -> Flow[list[int]]:
        data = yield Request(
            "DELETE", f"/subjects/{_segment(subject_name)}", _flags(permanent=permanent)
        )
        self.caches.forget(subject_name)
        return [int(version) for version in data]

    def get_latest_version(self, subject_name: str) -> Flow[RegisteredSchema]:
        data = yield Request("GET", f"/subjects/{_segment(subject_name)}/versions/latest")
        registered = _registered(data, subject_name)
        self.caches.keep(registered)
        return registered

    def get_version(
        self, subject_name: str, version: int | str, deleted: bool = False
    ) -> Flow[RegisteredSchema]:
        cached = (
            self.caches.versions.get((subject_name, version))
            if isinstance(version, int) and not deleted
            else None
        )
        if cached is not None:
            return cached
        data = yield Request(
            "GET",
            f"/subjects/{_segment(subject_name)}/versions/{_version(version)}",
            _flags(deleted=deleted),
        )
        registered = _registered(data, subject_name)
        if not deleted:
            self.caches.keep(registered)
        return registered

    def get_versions(self, subject_name: str, deleted: bool = False) -> Flow[list[int]]:
        data = yield Request(
            "GET", f"/subjects/{_segment(subject_name)}/versions", _flags(deleted=deleted)
        )
        return [int(version) for version in data]

    def delete_version(
        self, subject_name: str, version: int | str, permanent: bool = False
    ) -> Flow[int]:
        data = yield Request(
            "DELETE",
            f"/subjects/{_segment(subject_name)}/versions/{_version(version)}",
            _flags(permanent=permanent),
        )
        deleted = int(data)
        self.caches.forget(subject_name, deleted)
        return deleted

    def set_config(self, subject_name: str | None = None, *, compatibility: str) -> Flow[str]:
        """Set the compatibility level of a subject, or the global one; returns it."""
        path = f"/config/{_segment(subject_name)}" if subject_name else "/config"
        data = yield Request("PUT", path, (), _json({"compatibility": _level(compatibility)}))
        return str(data["compatibility"])

    def get_config(
        self, subject_name: str | None = None, default_to_global: bool = True
    ) -> Flow[str]:
        """The compatibility level of a subject (its own or, by default, the global one)."""
        if subject_name is None:
            data = yield Request("GET", "/config")
        else:
            data = yield Request(
                "GET",
                f"/config/{_segment(subject_name)}",
                _flags(defaultToGlobal=default_to_global),
            )
        return str(data["compatibilityLevel"])

    def delete_config(self, subject_name: str) -> Flow[str]:
        """Drop a subject's own level (it follows the global one again); returns the old one."""
        data = yield Request("DELETE", f"/config/{_segment(subject_name)}")
        return str(data["compatibilityLevel"])

    def test_compatibility(
        self, subject_name: str, schema: Schema, version: int | str = "latest"
    ) -> Flow[bool]:
        data = yield Request(
            "POST",
            f"/compatibility/subjects/{_segment(subject_name)}/versions/{_version(version)}",
            (),
            _json(schema.to_json()),
        )
        return bool(data["is_compatible"])

    def test_compatibility_all_versions(
        self, subject_name: str, schema: Schema
    ) -> Flow[tuple[bool, list[str]]]:
        """Whether ``schema`` is compatible with every version the level checks, and why not."""
        data = yield Request(
            "POST",
            f"/compatibility/subjects/{_segment(subject_name)}/versions",
            (("verbose", "true"),),
            _json(schema.to_json()),
        )
        return bool(data["is_compatible"]), [str(m) for m in data.get("messages") or ()]

    def get_schema_types(self) -> Flow[list[str]]:
        data = yield Request("GET", "/schemas/types")
        return [str(kind) for kind in data]


def run(flow: Flow[T], answer: Any) -> T:
    """Drive ``flow`` with a function that answers each request (tests, the sync edge)."""
    try:
        request = next(flow)
        while True:
            request = flow.send(answer(request))
    except StopIteration as stop:
        result: T = stop.value
        return result
