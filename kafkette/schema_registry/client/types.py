"""The registry's values as the client returns them, and its error.

Names follow Confluent's REST API and confluent-kafka's client (``schema_id``,
``schema_type``, ``references``), so code written for one reads the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
"""The schema types of Confluent's registry (AVRO when a request names none)."""


@attrs.frozen
class SchemaReference:
    """A schema that another imports: ``name`` as the importing schema spells it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SchemaReference:
        return cls(str(data["name"]), str(data["subject"]), int(data["version"]))


def _references(references: Iterable[SchemaReference]) -> tuple[SchemaReference, ...]:
    return tuple(references)


@attrs.frozen
class Schema:
    """A schema's text, its type and the schemas it references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = attrs.field(default=(), converter=_references)

    def to_json(self) -> dict[str, Any]:
        """The request body that registers or looks up this schema."""
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [reference.to_json() for reference in self.references]
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schema:
        return cls(
            str(data["schema"]),
            str(data.get("schemaType") or "AVRO"),
            tuple(SchemaReference.from_json(r) for r in data.get("references") or ()),
        )


@attrs.frozen
class RegisteredSchema:
    """A schema as one subject holds it: its global id and its version there."""

    schema_id: int
    schema: Schema
    subject: str
    version: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegisteredSchema:
        return cls(
            int(data["id"]), Schema.from_json(data), str(data["subject"]), int(data["version"])
        )


class SchemaRegistryError(Exception):
    """An error answer of the registry, or a failure to reach it.

    ``http_status_code`` is the HTTP status (-1 when no answer came),
    ``error_code`` Confluent's code (``40401`` subject not found, ``40403``
    schema not found, ``409`` incompatible, ``42201`` invalid schema...; -1 when
    the answer had none) and ``error_message`` its message.
    """

    UNKNOWN = -1

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message

    def __str__(self) -> str:
        return (
            f"{self.error_message} (HTTP status code {self.http_status_code},"
            f" SR code {self.error_code})"
        )
