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
from types import SimpleNamespace
from typing import Any

from kafkette.errors import SerializationError
from kafkette.schema_registry.client.types import Schema, SchemaReference
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
        import referencing
        import referencing.exceptions
        import referencing.jsonschema
    except ImportError:
        raise ImportError(
            "JSON Schema serializers need jsonschema: pip install kafkette[json]"
        ) from None
    return SimpleNamespace(
        Draft7Validator=jsonschema.Draft7Validator,
        validator_for=jsonschema.validators.validator_for,
        SchemaError=jsonschema.exceptions.SchemaError,
        best_match=jsonschema.exceptions.best_match,
        Registry=referencing.Registry,
        Resource=referencing.Resource,
        Unresolvable=referencing.exceptions.Unresolvable,
        DRAFT7=referencing.jsonschema.DRAFT7,
    )


class Validator:
    """A schema's validator (the draft its ``$schema`` names, draft 7 by default),
    the schemas it references (by their reference names) fetched from ``registry``;
    nothing is fetched from the network."""

    def __init__(self, schema: Schema, registry: Registry | None = None) -> None:
        jsonschema = _jsonschema()
        self.document: Any = json.loads(schema.schema_str)
        resources: dict[str, Any] = {}

        def add(references: tuple[SchemaReference, ...]) -> None:
            for reference in references:
                if reference.name in resources:
                    continue
                if registry is None:
                    raise SerializationError(
                        f"the schema references {reference.name!r}: it needs a registry"
                    )
                found = registry.get_version(reference.subject, reference.version).schema
                contents = json.loads(found.schema_str)
                resources[reference.name] = jsonschema.Resource.from_contents(
                    contents, default_specification=jsonschema.DRAFT7
                )
                add(found.references)

        add(schema.references)
        cls = jsonschema.validator_for(self.document, default=jsonschema.Draft7Validator)
        try:
            cls.check_schema(self.document)
        except jsonschema.SchemaError as exc:
            raise SerializationError(f"not a valid JSON schema: {exc.message}") from None
        store = jsonschema.Registry().with_resources(resources.items())
        self._validator = cls(self.document, registry=store)

    def validate(self, value: Any) -> None:
        """Raise SerializationError naming the first violation, if any."""
        jsonschema = _jsonschema()
        try:
            error = jsonschema.best_match(self._validator.iter_errors(value))
        except jsonschema.Unresolvable as exc:
            raise SerializationError(f"the schema's $ref cannot be resolved: {exc}") from None
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
        return Validator(schema, self._calls)

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
        self._reader = Validator(schema, self._calls) if schema is not None else None
        self.validate = validate
        self._needs_writer = validate and self._reader is None

    def _parse(self, schema: Schema) -> Validator:
        return Validator(schema, self._calls)

    def _decode(self, writer: Validator | None, data: memoryview) -> Any:
        value = json.loads(bytes(data))
        checker = self._reader or writer
        if self.validate and checker is not None:
            checker.validate(value)
        return value
