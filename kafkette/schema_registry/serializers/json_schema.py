"""JSON values framed for a schema registry, checked by jsonschema (extra ``json``).

The encoding is JSON text in UTF-8 with no spaces and non-ASCII characters as
they are (``separators=(",", ":")``, ``ensure_ascii=False``), which is what
confluent-kafka writes, so the same value gives the same bytes. jsonschema
(the reference implementation of JSON Schema for Python, every draft) checks
values against the schema before they are written and after they are read;
it is imported when a serializer is made, never when kafkette loads.
"""

from __future__ import annotations

import json
from typing import Any

from kafkette.errors import SerializationError
from kafkette.schema_registry.client.types import Schema
from kafkette.schema_registry.serializers.serde import (
    AsyncRegistry,
    Deserializer,
    Registry,
    Serializer,
)


def _jsonschema() -> Any:
    try:
        import jsonschema  # type: ignore[import-untyped]
        import jsonschema.validators  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "JSON Schema serializers need jsonschema: pip install kafkette[json]"
        ) from None
    return jsonschema


class Validator:
    """A schema's validator (the draft its ``$schema`` names, draft 7 by default)."""

    def __init__(self, schema: Schema) -> None:
        jsonschema = _jsonschema()
        self.document: Any = json.loads(schema.schema_str)
        if schema.references:
            raise SerializationError("JSON schemas with references are not supported yet")
        cls = jsonschema.validators.validator_for(self.document, default=jsonschema.Draft7Validator)
        cls.check_schema(self.document)
        self._validator = cls(self.document)

    def validate(self, value: Any) -> None:
        """Raise SerializationError naming the first violation, if any."""
        error = _jsonschema().exceptions.best_match(self._validator.iter_errors(value))
        if error is not None:
            path = "".join(f"[{part!r}]" for part in error.absolute_path)
            raise SerializationError(f"the value{path} does not match its schema: {error.message}")

    @property
    def title(self) -> str | None:
        title = self.document.get("title") if isinstance(self.document, dict) else None
        return title if isinstance(title, str) else None


def dumps(value: Any) -> bytes:
    """``value`` as JSON bytes, byte for byte as confluent-kafka writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class JSONSerializer(Serializer[Validator]):
    """JSON-compatible values (dicts, lists, str, numbers...) to framed bytes.

    ``validate=False`` skips the check against the schema before writing.
    """

    schema_type = "JSON"

    def __init__(
        self,
        registry: Registry | AsyncRegistry,
        schema: str | Schema | None,
        *,
        validate: bool = True,
        **options: Any,
    ) -> None:
        if isinstance(schema, str):
            schema = Schema(schema, "JSON")
        self.validate = validate
        super().__init__(registry, schema, **options)

    def _parse(self, schema: Schema) -> Validator:
        return Validator(schema)

    def _record_name(self, value: Any) -> str | None:
        return self._parsed.title if self._parsed is not None else None

    def _encode(self, parsed: Validator, value: Any) -> bytes:
        if self.validate:
            parsed.validate(value)
        return dumps(value)


class JSONDeserializer(Deserializer[Validator]):
    """Framed bytes to JSON values, checked against the writer's schema.

    ``schema`` (optional) checks values against the reader's schema instead;
    ``validate=False`` checks nothing (and fetches no schema).
    """

    schema_type = "JSON"

    def __init__(
        self,
        registry: Registry | AsyncRegistry | None,
        schema: str | Schema | None = None,
        *,
        validate: bool = True,
    ) -> None:
        super().__init__(registry)
        if isinstance(schema, str):
            schema = Schema(schema, "JSON")
        self._reader = Validator(schema) if schema is not None else None
        self.validate = validate
        self._needs_writer = validate and self._reader is None

    def _parse(self, schema: Schema) -> Validator:
        return Validator(schema)

    def _decode(self, writer: Validator | None, data: memoryview) -> Any:
        value = json.loads(bytes(data))
        checker = self._reader or writer
        if self.validate and checker is not None:
            checker.validate(value)
        return value
