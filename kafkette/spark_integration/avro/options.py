"""The data source's Avro options, and the schemas they name, looked up on the driver.

Reading (``spark.read`` / ``readStream``) with ``valueFormat=avro``:

- ``schema.registry.url`` (required) and any other ``schema.registry.*`` client
  setting (``schema.registry.basic.auth.user.info``, ``schema.registry.ssl.ca.location``):
  the registry holding the writers' schemas, by their ids in each record's frame;
- ``valueSubject``: the subject whose latest schema is the ``value`` column's
  (default ``TOPIC-value`` when the query reads one topic), or ``avroSchema``: the
  reader's schema as Avro JSON (Spark's ``from_avro`` option). Every record is
  resolved to it by Avro's rules (fields added with defaults, promotions, ...);
- ``mode``: ``FAILFAST`` (default: a value that does not decode fails the task) or
  ``PERMISSIVE`` (it reads as null), as Spark's ``from_avro``.

Writing (``df.write`` / ``writeStream``, and :class:`~kafkette.spark_integration.KafkaSink`)
with ``valueFormat=avro``: the same registry settings; ``valueSubject`` (default
``TOPIC-value`` for the ``topic`` option); ``avroSchema`` to register that schema
under the subject (its id is reused if it is there), else the subject's latest
schema is used. The lookups are made once, on the driver, so a wrong subject or
schema fails the query before any task runs; the tasks frame every value with
the id found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from pyspark.sql.types import DataType

from kafkette.schema_registry.client.types import Schema, SchemaRegistryError
from kafkette.spark_integration.avro.types import AvroTypeError, spark_type

REGISTRY_PREFIX = "schema.registry."
VALUE_FORMAT = "valueformat"
VALUE_SUBJECT = "valuesubject"
AVRO_SCHEMA = "avroschema"
MODE = "mode"
FORMATS = ("binary", "avro")
MODES = ("FAILFAST", "PERMISSIVE")


@attrs.frozen
class AvroRequest:
    """``valueFormat=avro`` as asked: where the registry is, which schema; nothing looked up."""

    registry: dict[str, str]
    """The registry client's settings (confluent-kafka's names: ``url``, ...)."""
    subject: str | None
    avro_schema: str | None
    permissive: bool


@attrs.frozen
class AvroSchema:
    """A schema found for the value column: its id (None for a reader's own
    ``avroSchema``), its text and the texts it references (dependencies first)."""

    schema_id: int | None
    schema: Schema
    named: tuple[str, ...] = ()

    def spark_type(self) -> tuple[DataType, bool]:
        """The value column's Spark type and whether it is nullable in the schema."""
        try:
            parsed = json.loads(self.schema.schema_str)
            named = [json.loads(text) for text in self.named]
        except ValueError as exc:
            raise AvroTypeError(f"the Avro schema is not JSON: {exc}") from None
        return spark_type(parsed, named)


@attrs.frozen
class AvroValues:
    """What the executors need: the request and the schema found on the driver."""

    request: AvroRequest
    schema: AvroSchema


def avro_request(options: Mapping[str, str], default_topic: str | None) -> AvroRequest | None:
    """The Avro options of ``options`` (any case), checked; None without ``valueFormat=avro``.

    ``default_topic``: the one topic read or written, whose ``TOPIC-value`` subject is
    the default (None when there is not exactly one).
    """
    params = {k.lower(): v for k, v in options.items()}
    value_format = params.get(VALUE_FORMAT, "binary").strip().lower()
    if value_format not in FORMATS:
        raise ValueError(
            f"option 'valueFormat' must be one of {', '.join(FORMATS)}, got {value_format!r}"
        )
    if value_format == "binary":
        for name in (VALUE_SUBJECT, AVRO_SCHEMA):
            if name in params:
                raise ValueError(f"option '{name}' applies to valueFormat=avro only")
        return None
    registry = {
        key[len(REGISTRY_PREFIX) :]: value
        for key, value in params.items()
        if key.startswith(REGISTRY_PREFIX)
    }
    if "url" not in registry:
        raise ValueError(
            "valueFormat=avro needs the option schema.registry.url: the registry holding "
            "the schemas whose ids frame the values"
        )
    mode = params.get(MODE, "FAILFAST").strip().upper()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be FAILFAST or PERMISSIVE, got {mode!r}")
    subject = params.get(VALUE_SUBJECT)
    avro_schema = params.get(AVRO_SCHEMA)
    if subject is None and default_topic is not None:
        subject = f"{default_topic}-value"
    return AvroRequest(registry, subject, avro_schema, mode == "PERMISSIVE")


def _client(request: AvroRequest) -> Any:
    from kafkette.schema_registry.client.sync_client import SchemaRegistryClient

    return SchemaRegistryClient(request.registry)


def _named(schema: Schema, client: Any, seen: set[tuple[str, int]]) -> list[str]:
    """The texts ``schema`` references, each after those it references itself."""
    texts: list[str] = []
    for reference in schema.references:
        key = (reference.subject, reference.version)
        if key in seen:
            continue
        seen.add(key)
        referenced = client.get_version(reference.subject, reference.version).schema
        texts += _named(referenced, client, seen)
        texts.append(referenced.schema_str)
    return texts


def _registered(request: AvroRequest, *, register: bool) -> AvroSchema:
    client = _client(request)
    try:
        if request.avro_schema is not None and request.subject is not None and register:
            schema = Schema(request.avro_schema, "AVRO")
            schema_id = client.register_schema(request.subject, schema)
        elif request.avro_schema is not None and not register:
            schema, schema_id = Schema(request.avro_schema, "AVRO"), None
        elif request.subject is not None:
            latest = client.get_latest_version(request.subject)
            schema, schema_id = latest.schema, latest.schema_id
        else:
            raise ValueError(
                "valueFormat=avro needs the option valueSubject (or avroSchema): the query "
                "has no single topic whose TOPIC-value subject it could use"
            )
        if schema.schema_type != "AVRO":
            raise ValueError(
                f"subject {request.subject!r} holds a {schema.schema_type} schema, not Avro"
            )
        return AvroSchema(schema_id, schema, tuple(_named(schema, client, set())))
    except SchemaRegistryError as exc:
        what = f"subject {request.subject!r}" if request.subject else "the registry"
        raise ValueError(f"valueFormat=avro: {what}: {exc}") from exc
    finally:
        client.close()


def reader_schema(request: AvroRequest) -> AvroSchema:
    """The reader's schema: ``avroSchema``, else the subject's latest version."""
    return _registered(request, register=False)


def writer_schema(request: AvroRequest) -> AvroSchema:
    """The writer's schema and id: ``avroSchema`` registered under the subject (its
    id if already there), else the subject's latest version."""
    if request.subject is None:
        raise ValueError(
            "valueFormat=avro needs the option valueSubject when the rows carry their own "
            "topic (no topic option)"
        )
    return _registered(request, register=True)
