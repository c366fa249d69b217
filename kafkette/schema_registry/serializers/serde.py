"""What the three formats share: subjects, registry look-ups, caching, framing.

A serializer turns a value into framed bytes in three steps:

1. the subject, from the topic, whether this is the key, and the record's name
   (the subject name strategy: ``topic`` gives ``orders-value``, ``record``
   ``com.acme.Order``, ``topic_record`` ``orders-com.acme.Order``);
2. the schema id for that subject, asked once and then cached: the latest
   version's (``use_latest_version``), or the serializer's own schema
   registered (``auto_register_schemas``, the default) or looked up;
3. the format's encoding of the value, framed with the id (:mod:`.framing`).

A deserializer reads the id from the frame, fetches that schema once (ids never
change meaning) and decodes the rest with the format.

Serializers and deserializers are plain callables of one argument, so they are
the producer's ``key_serializer``/``value_serializer`` and the consumer's
``key_deserializer``/``value_deserializer`` as they are. The producer passes no
topic: a serializer whose strategy needs one is given it at construction
(``topic="orders"``), or is called as ``serialize(value, topic)``.

They take any registry client with the methods of :class:`Registry`: the sync
:class:`~kafkette.schema_registry.SchemaRegistryClient`, or one of the caller's.

In an event loop, a registry call must not block it: ``await
serializer.aserialize(value)`` and ``await deserializer.adeserialize(data)``
make the calls a cache miss needs in a worker thread, and take the async
:class:`~kafkette.schema_registry.AsyncSchemaRegistryClient` too (its calls run
back in the loop). ``await serializer.prepare()`` resolves the subject's id
ahead, so that the serializer, called by an ``AsyncProducer``, finds it cached
and never calls the registry. Called synchronously on a cache miss with an
async client, a serializer raises SerializationError saying so.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.to_thread

from kafkette.errors import ConfigError, SerializationError
from kafkette.schema_registry.client.types import RegisteredSchema, Schema, SchemaRegistryError
from kafkette.schema_registry.serializers.framing import frame, unframe

Parsed = TypeVar("Parsed")


class Registry(Protocol):
    """The registry calls serializers make (confluent-kafka's names and signatures)."""

    def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int: ...

    def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema: ...

    def get_latest_version(self, subject_name: str) -> RegisteredSchema: ...

    def get_version(self, subject_name: str, version: int) -> RegisteredSchema: ...

    def get_schema(self, schema_id: int) -> Schema: ...


class AsyncRegistry(Protocol):
    """The same calls, as :class:`~kafkette.schema_registry.AsyncSchemaRegistryClient` has them."""

    async def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int: ...

    async def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema: ...

    async def get_latest_version(self, subject_name: str) -> RegisteredSchema: ...

    async def get_version(self, subject_name: str, version: int) -> RegisteredSchema: ...

    async def get_schema(self, schema_id: int) -> Schema: ...


_worker = threading.local()
"""``active`` in the worker threads that aserialize/adeserialize/prepare start."""


async def _in_worker(function: Callable[..., Any], *args: Any) -> Any:
    def run() -> Any:
        _worker.active = True
        try:
            return function(*args)
        finally:
            _worker.active = False

    return await anyio.to_thread.run_sync(run)


class _LoopCalls:
    """An async registry's calls made from our worker threads, each awaited in the loop."""

    def __init__(self, registry: AsyncRegistry) -> None:
        self._registry = registry

    def _run(self, name: str, *args: Any) -> Any:
        if not getattr(_worker, "active", False):
            raise SerializationError(
                "the registry client is async: a cache miss needs await "
                "serializer.prepare() / aserialize(value), or await deserializer.adeserialize(data)"
            )
        return anyio.from_thread.run(getattr(self._registry, name), *args)

    def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        return cast(int, self._run("register_schema", subject_name, schema, normalize_schemas))

    def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        found = self._run("lookup_schema", subject_name, schema, normalize_schemas)
        return cast(RegisteredSchema, found)

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        return cast(RegisteredSchema, self._run("get_latest_version", subject_name))

    def get_version(self, subject_name: str, version: int) -> RegisteredSchema:
        return cast(RegisteredSchema, self._run("get_version", subject_name, version))

    def get_schema(self, schema_id: int) -> Schema:
        return cast(Schema, self._run("get_schema", schema_id))


def calls_of(registry: Registry | AsyncRegistry) -> Registry:
    """``registry`` as sync calls (an async one's run from worker threads, in its loop)."""
    if inspect.iscoroutinefunction(getattr(registry, "get_schema", None)):
        return _LoopCalls(cast(AsyncRegistry, registry))
    return cast(Registry, registry)


SubjectNameStrategy = Callable[[str | None, bool, str | None], str]
"""``(topic, is_key, record_name) -> subject``."""


def topic_subject_name(topic: str | None, is_key: bool, record_name: str | None) -> str:
    """``TOPIC-key`` or ``TOPIC-value`` (Confluent's default, TopicNameStrategy)."""
    if topic is None:
        raise SerializationError("the topic name strategy needs a topic (pass topic=...)")
    return f"{topic}-{'key' if is_key else 'value'}"


def record_subject_name(topic: str | None, is_key: bool, record_name: str | None) -> str:
    """The record's fully qualified name (RecordNameStrategy)."""
    if not record_name:
        raise SerializationError("the record name strategy needs a named record schema")
    return record_name


def topic_record_subject_name(topic: str | None, is_key: bool, record_name: str | None) -> str:
    """``TOPIC-RECORD`` (TopicRecordNameStrategy)."""
    if topic is None:
        raise SerializationError("the topic-record name strategy needs a topic (pass topic=...)")
    return f"{topic}-{record_subject_name(topic, is_key, record_name)}"


STRATEGIES: dict[str, SubjectNameStrategy] = {
    "topic": topic_subject_name,
    "record": record_subject_name,
    "topic_record": topic_record_subject_name,
}
"""The strategies by name; ``subject_name_strategy`` also takes a callable."""


class _Context:
    """What confluent-kafka's strategies read of their SerializationContext."""

    def __init__(self, topic: str | None, is_key: bool) -> None:
        self.topic = topic
        self.field = "key" if is_key else "value"


def _confluents(strategy: Callable[[Any, str | None], str]) -> SubjectNameStrategy:
    """A strategy written for confluent-kafka: ``(ctx, record_name) -> subject``."""

    def subject(topic: str | None, is_key: bool, record_name: str | None) -> str:
        return strategy(_Context(topic, is_key), record_name)

    return subject


def _strategy(strategy: str | Callable[..., str]) -> SubjectNameStrategy:
    if callable(strategy):
        try:
            parameters = inspect.signature(strategy).parameters
        except (TypeError, ValueError):
            return strategy
        if len(parameters) == 2:  # confluent-kafka's (ctx, record_name)
            return _confluents(strategy)
        return strategy
    name = strategy.replace("-", "_").lower()
    for suffix in ("_subject_name_strategy", "_name_strategy", "_strategy"):
        name = name.removesuffix(suffix)
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown subject name strategy {strategy!r}: one of {sorted(STRATEGIES)}"
        ) from None


CONF_NAMES = {
    "auto.register.schemas": "auto_register_schemas",
    "use.latest.version": "use_latest_version",
    "normalize.schemas": "normalize_schemas",
    "subject.name.strategy": "subject_name_strategy",
}
"""confluent-kafka's serializer settings (``conf={...}``) and the options they set."""


class Serializer(Generic[Parsed]):
    """A format's value to framed bytes; subclasses say how to parse and encode.

    Options: ``topic``, ``is_key``, ``subject_name_strategy`` (``"topic"``,
    ``"record"``, ``"topic_record"``, a function ``(topic, is_key, record_name)``
    or one written for confluent-kafka, ``(ctx, record_name)``),
    ``auto_register_schemas``, ``use_latest_version``, ``normalize_schemas``;
    ``conf`` takes the same by confluent-kafka's names (``{"auto.register.schemas":
    False}``) and wins over the keywords.
    """

    schema_type = "AVRO"

    def __init__(
        self,
        registry: Registry | AsyncRegistry,
        schema: Schema | None,
        *,
        topic: str | None = None,
        is_key: bool = False,
        subject_name_strategy: str | Callable[..., str] = "topic",
        auto_register_schemas: bool = True,
        use_latest_version: bool = False,
        normalize_schemas: bool = False,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        for name, value in (conf or {}).items():
            option = CONF_NAMES.get(name)
            if option is None:
                known = ", ".join(sorted(CONF_NAMES))
                raise ConfigError(name, f"unknown serializer setting (known: {known})")
            if option == "subject_name_strategy":
                if not (callable(value) or isinstance(value, str)):
                    raise ConfigError(name, f"a name or a function, not {value!r}")
                subject_name_strategy = value
            elif not isinstance(value, bool):
                raise ConfigError(name, f"must be True or False, got {value!r}")
            elif option == "auto_register_schemas":
                auto_register_schemas = value
            elif option == "use_latest_version":
                use_latest_version = value
            else:
                normalize_schemas = value
        if use_latest_version and auto_register_schemas:
            raise ValueError(
                "use_latest_version serializes with the subject's latest schema: "
                "it needs auto_register_schemas=False"
            )
        if schema is None and not use_latest_version:
            raise ValueError("a serializer needs a schema, or use_latest_version=True")
        self.registry = registry
        self._calls = calls_of(registry)
        self.schema = schema
        self.topic = topic
        self.is_key = is_key
        self.subject_name_strategy = _strategy(subject_name_strategy)
        self.auto_register_schemas = auto_register_schemas
        self.use_latest_version = use_latest_version
        self.normalize_schemas = normalize_schemas
        self._parsed = self._parse(schema) if schema is not None else None
        self._writers: dict[str, tuple[int, Parsed]] = {}
        self._lock = threading.Lock()

    def __call__(self, value: Any) -> bytes | None:
        """``value`` framed for the configured topic (None stays None)."""
        return self.serialize(value)

    def serialize(self, value: Any, topic: str | None = None) -> bytes | None:
        """``value`` encoded and framed for the subject of ``topic`` (default: the
        configured one; None stays None)."""
        if value is None:
            return None
        topic = self.topic if topic is None else topic
        subject = self.subject_name_strategy(topic, self.is_key, self._record_name(value))
        schema_id, parsed = self._writers.get(subject) or self._writer(subject)
        try:
            payload = self._encode(parsed, value)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"cannot encode the value as {self.schema_type}: {exc}"
            ) from exc
        return frame(schema_id, payload, self._indexes(value))

    async def aserialize(self, value: Any, topic: str | None = None) -> bytes | None:
        """:meth:`serialize` whose registry calls (on a cache miss) leave the event loop."""
        if value is None:
            return None
        topic = self.topic if topic is None else topic
        subject = self.subject_name_strategy(topic, self.is_key, self._record_name(value))
        if subject not in self._writers:
            await _in_worker(self._writer, subject)
        return self.serialize(value, topic)

    async def prepare(self, topic: str | None = None) -> int:
        """Resolve the schema id for ``topic`` (default: the configured one) now, so
        that calls find it cached; returns it."""
        topic = self.topic if topic is None else topic
        subject = self.subject_name_strategy(topic, self.is_key, self._record_name(None))
        writer = self._writers.get(subject) or await _in_worker(self._writer, subject)
        return cast(int, writer[0])

    def _writer(self, subject: str) -> tuple[int, Parsed]:
        with self._lock:
            writer = self._writers.get(subject) or self._resolve(subject)
            self._writers[subject] = writer
            return writer

    def _resolve(self, subject: str) -> tuple[int, Parsed]:
        try:
            if self.use_latest_version:
                latest = self._calls.get_latest_version(subject)
                return latest.schema_id, self._parse(latest.schema)
            assert self.schema is not None
            schema = self._with_references(self.schema)
            if self.auto_register_schemas:
                schema_id = self._calls.register_schema(subject, schema, self.normalize_schemas)
            else:
                schema_id = self._calls.lookup_schema(
                    subject, schema, self.normalize_schemas
                ).schema_id
        except SchemaRegistryError as exc:
            raise SerializationError(f"subject {subject!r}: {exc}") from exc
        return schema_id, cast(Parsed, self._parsed)

    # -- what a format says -------------------------------------------------

    def _parse(self, schema: Schema) -> Parsed:
        raise NotImplementedError

    def _record_name(self, value: Any) -> str | None:
        """The name the record strategies use (None if the schema has none)."""
        return None

    def _with_references(self, schema: Schema) -> Schema:
        """The schema to register, with the references it needs registered first."""
        return schema

    def _encode(self, parsed: Parsed, value: Any) -> bytes:
        raise NotImplementedError

    def _indexes(self, value: Any) -> bytes:
        return b""


class Deserializer(Generic[Parsed]):
    """Framed bytes to a format's value, with the writer's schema from the registry."""

    schema_type = "AVRO"

    def __init__(self, registry: Registry | AsyncRegistry | None) -> None:
        self.registry = registry
        self._calls = calls_of(registry) if registry is not None else None
        self._writers: dict[int, Parsed] = {}
        self._lock = threading.Lock()

    def __call__(self, data: bytes | None) -> Any:
        """The value ``data`` encodes (None stays None)."""
        if data is None:
            return None
        schema_id, rest = unframe(data)
        writer = self._writers.get(schema_id)
        if writer is None and self._needs_writer:
            writer = self._writer(schema_id)
        try:
            return self._decode(writer, rest)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"cannot decode a {self.schema_type} value of schema id {schema_id}: {exc}"
            ) from exc

    async def adeserialize(self, data: bytes | None) -> Any:
        """The value ``data`` encodes; the registry call (on a cache miss) leaves the loop."""
        if data is None:
            return None
        schema_id, _ = unframe(data)
        if self._needs_writer and schema_id not in self._writers:
            await _in_worker(self._writer, schema_id)
        return self(data)

    _needs_writer = True

    def _writer(self, schema_id: int) -> Parsed:
        with self._lock:
            writer = self._writers.get(schema_id) or self._fetch(schema_id)
            self._writers[schema_id] = writer
            return writer

    def _fetch(self, schema_id: int) -> Parsed:
        if self._calls is None:
            raise SerializationError(f"no registry to fetch schema id {schema_id} from")
        try:
            schema = self._calls.get_schema(schema_id)
            if schema.schema_type != self.schema_type:
                raise SerializationError(
                    f"schema id {schema_id} is {schema.schema_type}, not {self.schema_type}"
                )
            return self._parse(schema)
        except SchemaRegistryError as exc:
            raise SerializationError(f"schema id {schema_id}: {exc}") from exc

    def _parse(self, schema: Schema) -> Parsed:
        raise NotImplementedError

    def _decode(self, writer: Parsed | None, data: memoryview) -> Any:
        raise NotImplementedError
