"""Compatibility of schemas, by format, and Confluent's compatibility levels.

:func:`parse` validates schema text of a type (``AVRO``, ``JSON``, ``PROTOBUF``)
into a :class:`ParsedSchema`, or raises :class:`InvalidSchema` (the registry's
422). :func:`check` says why a new schema breaks a level against the versions
before it (empty: compatible):

- ``BACKWARD``: the new schema reads data written with the latest;
- ``FORWARD``: the latest reads data written with the new one;
- ``FULL``: both; the ``_TRANSITIVE`` forms against every earlier version,
  not only the latest; ``NONE``: no check.

Avro follows Avro's schema-resolution rules (``avro.py``), JSON Schema whether
the reader accepts every document the writer accepts (``json_schema.py``),
Protobuf what the wire format tolerates, field by number (``protobuf.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from kafkette.schema_registry.compatibility import avro, json_schema, protobuf

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class InvalidSchema(ValueError):
    """Schema text that is not a valid schema of its type."""


@attrs.frozen
class ParsedSchema:
    """A valid schema: its type, canonical text, and the format's model."""

    schema_type: str
    canonical: str
    model: object = attrs.field(eq=False)


def parse(
    schema_type: str, text: str, references: Sequence[ParsedSchema] = (), *, strict: bool = True
) -> ParsedSchema:
    """Validate ``text`` as a schema of ``schema_type``, with the schemas it references
    (``strict=False``: a stored schema, read without the checks of a new one)."""
    if schema_type == "AVRO":
        models = [ref.model for ref in references if isinstance(ref.model, avro.AvroSchema)]
        try:
            parsed = avro.parse(text, models, strict=strict)
        except avro.AvroSchemaError as error:
            raise InvalidSchema(str(error)) from None
        return ParsedSchema(schema_type, parsed.canonical, parsed)
    if schema_type == "JSON":
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise InvalidSchema(f"Invalid JSON {text}: {error}") from None
        if not isinstance(document, (dict, bool)):
            raise InvalidSchema(f"Invalid JSON schema {text}: not an object or a boolean")
        return ParsedSchema(schema_type, json.dumps(document, separators=(",", ":")), document)
    if schema_type == "PROTOBUF":
        try:
            proto = protobuf.parse_text_or_descriptor(text)
        except protobuf.ProtobufSchemaError as error:
            raise InvalidSchema(str(error)) from None
        return ParsedSchema(schema_type, text, proto)
    raise InvalidSchema(f"Invalid schema type {schema_type}")


def read_incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"schema type {writer.schema_type} changed to {reader.schema_type}"]
    if isinstance(reader.model, avro.AvroSchema) and isinstance(writer.model, avro.AvroSchema):
        return avro.read_incompatibilities(reader.model, writer.model)
    if reader.schema_type == "JSON":
        return json_schema.read_incompatibilities(reader.model, writer.model)
    if isinstance(reader.model, protobuf.ProtoFile) and isinstance(
        writer.model, protobuf.ProtoFile
    ):
        return protobuf.read_incompatibilities(reader.model, writer.model)
    return []


def check(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` breaks ``level`` against ``previous`` (oldest first); empty: it does not."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    messages: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            messages += [f"backward: {m}" for m in read_incompatibilities(new, old)]
        if level.startswith(("FORWARD", "FULL")):
            messages += [f"forward: {m}" for m in read_incompatibilities(old, new)]
    return messages
