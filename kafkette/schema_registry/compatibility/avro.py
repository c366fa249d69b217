"""Avro schemas for the registry: parsing, validation and Avro's schema-resolution rules.

The registry needs three things from an Avro schema and nothing more: is it
valid (else the client gets 422), what is its canonical text (the same schema
written with other whitespace gets the same id), and can data written with one
schema be read with another. fastavro could parse, but it is the ``avro``
extra, for the serializers; the registry runs on a plain install, so this
module is our own small model of the specification (avro.apache.org, "Schema
Declaration" and "Schema Resolution").

:func:`parse` turns schema text into :class:`AvroSchema` or raises
:class:`AvroSchemaError`. :func:`read_incompatibilities` lists why a reader
schema cannot read what a writer schema wrote (empty: it can), by the rules:

- the same primitive, or a promotion: int to long, float or double; long to
  float or double; float to double; string to bytes and bytes to string;
- records of the same name (or a reader alias naming the writer), each reader
  field found in the writer by name or alias and readable, or else having a
  default; writer fields the reader lacks are skipped;
- enums of the same name whose reader has every writer symbol, or a default;
- arrays and maps whose items or values are readable; fixed of the same name
  and size;
- a writer union: every branch readable by the reader; a reader union (writer
  not one): some branch reads the writer.

Logical types are annotations on their underlying type, as in Avro's resolution.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
"""Writer type -> reader types it is promoted to."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class AvroSchemaError(ValueError):
    """The text is not a valid Avro schema; the message says why."""


@attrs.frozen
class Primitive:
    type: str


@attrs.define(eq=False)
class Field:
    name: str
    type: Schema
    aliases: tuple[str, ...]
    has_default: bool
    default: Any


@attrs.define(eq=False)
class Record:
    fullname: str
    aliases: tuple[str, ...]
    fields: list[Field] = attrs.field(factory=list)


@attrs.define(eq=False)
class Enum:
    fullname: str
    aliases: tuple[str, ...]
    symbols: tuple[str, ...]
    default: str | None


@attrs.define(eq=False)
class Fixed:
    fullname: str
    aliases: tuple[str, ...]
    size: int


@attrs.define(eq=False)
class Array:
    items: Schema


@attrs.define(eq=False)
class Map:
    values: Schema


@attrs.define(eq=False)
class Union_:
    branches: tuple[Schema, ...]


Schema = Primitive | Record | Enum | Fixed | Array | Map | Union_
Named = Record | Enum | Fixed


@attrs.frozen
class AvroSchema:
    """A parsed schema: its model and its canonical text (compact JSON)."""

    root: Schema
    canonical: str
    named: Mapping[str, Named]
    """Every named type it defines, by full name (for schemas referring to it)."""


def parse(text: str, references: Sequence[AvroSchema] = (), *, strict: bool = True) -> AvroSchema:
    """Parse schema text; named types of ``references`` may be used by name.

    ``strict`` (new schemas) also checks names and field defaults, as Confluent's
    registry does for a schema being registered; a stored schema (``strict=False``)
    is read as it is, as Confluent reads what is already in its topic."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise AvroSchemaError(f"Invalid schema {text}: not JSON ({error})") from None
    names: dict[str, Named] = {}
    for reference in references:
        names.update(reference.named)
    own: dict[str, Named] = {}
    try:
        root = _Parser(names, own, strict).schema(document, "")
    except RecursionError:
        raise AvroSchemaError("Invalid schema: nested too deeply") from None
    return AvroSchema(root, json.dumps(_compact(document), separators=(",", ":")), own)


SCHEMA_KEY_ORDER = (
    "type", "name", "namespace", "doc", "fields", "symbols", "items", "values", "size",
    "default", "aliases",
)  # fmt: skip
FIELD_KEY_ORDER = ("name", "type", "doc", "default", "order", "aliases")
"""The order Avro's own writer (Schema.toString, whose output Confluent stores) puts
the attributes in; other properties follow in their order."""


def _compact(document: Any, keys: tuple[str, ...] = SCHEMA_KEY_ORDER) -> Any:
    """The canonical form: ``{"type": "string"}`` written ``"string"`` and attributes in
    Avro's order, so key order and whitespace do not make another schema (or id)."""
    if isinstance(document, list):
        return [_compact(value) for value in document]
    if not isinstance(document, dict):
        return document
    if set(document) == {"type"} and document["type"] in PRIMITIVES:
        return document["type"]
    ordered = [key for key in keys if key in document]
    ordered += [key for key in document if key not in keys]
    result = {}
    for key in ordered:
        value = document[key]
        if key == "fields" and keys is SCHEMA_KEY_ORDER and isinstance(value, list):
            result[key] = [_compact(field, FIELD_KEY_ORDER) for field in value]
        elif key in ("type", "items", "values"):
            result[key] = _compact(value)
        else:
            result[key] = value  # defaults, docs, symbols and properties are data
    return result


def _fullname(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _check_name(fullname: str) -> None:
    if not all(_NAME.match(part) for part in fullname.split(".")):
        raise AvroSchemaError(f"Invalid schema: illegal name {fullname!r}")


class _Parser:
    def __init__(self, names: dict[str, Named], own: dict[str, Named], strict: bool) -> None:
        self.names = names
        self.own = own
        self.strict = strict

    def schema(self, node: Any, namespace: str) -> Schema:
        if isinstance(node, str):
            return self.reference(node, namespace)
        if isinstance(node, list):
            return self.union(node, namespace)
        if not isinstance(node, dict):
            raise AvroSchemaError(f"Invalid schema: {json.dumps(node)} is not a schema")
        kind = node.get("type")
        if isinstance(kind, (dict, list)):
            return self.schema(kind, namespace)
        if not isinstance(kind, str):
            raise AvroSchemaError(f"Invalid schema: no type in {json.dumps(node)}")
        if kind in PRIMITIVES:
            return Primitive(kind)
        if kind == "array":
            if "items" not in node:
                raise AvroSchemaError("Invalid schema: array has no items")
            return Array(self.schema(node["items"], namespace))
        if kind == "map":
            if "values" not in node:
                raise AvroSchemaError("Invalid schema: map has no values")
            return Map(self.schema(node["values"], namespace))
        if kind in ("record", "error", "enum", "fixed"):
            return self.named(kind, node, namespace)
        return self.reference(kind, namespace)

    def reference(self, name: str, namespace: str) -> Schema:
        if name in PRIMITIVES:
            return Primitive(name)
        for candidate in (_fullname(name, namespace), name):
            if candidate in self.names:
                return self.names[candidate]
        raise AvroSchemaError(f"Invalid schema: undefined name {name!r}")

    def union(self, node: list[Any], namespace: str) -> Union_:
        branches = tuple(self.schema(branch, namespace) for branch in node)
        seen: set[str] = set()
        for branch in branches:
            if isinstance(branch, Union_):
                raise AvroSchemaError("Invalid schema: a union may not contain a union")
            key = branch.fullname if isinstance(branch, (Record, Enum, Fixed)) else _kind(branch)
            if key in seen:
                raise AvroSchemaError(f"Invalid schema: duplicate {key} in union")
            seen.add(key)
        return Union_(branches)

    def named(self, kind: str, node: dict[str, Any], namespace: str) -> Named:
        name = node.get("name")
        if not isinstance(name, str):
            raise AvroSchemaError(f"Invalid schema: {kind} has no name")
        own_namespace = node.get("namespace", namespace)
        if not isinstance(own_namespace, str):
            raise AvroSchemaError("Invalid schema: namespace is not a string")
        fullname = _fullname(name, own_namespace)
        if self.strict:
            _check_name(fullname)
        space = fullname.rpartition(".")[0]
        aliases = self.aliases(node, space)
        schema: Named
        if kind == "enum":
            symbols = node.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise AvroSchemaError(f"Invalid schema: enum {fullname} needs a list of symbols")
            if len(set(symbols)) != len(symbols) or not all(_NAME.match(s) for s in symbols):
                raise AvroSchemaError(f"Invalid schema: enum {fullname} has bad symbols")
            default = node.get("default")
            if default is not None and default not in symbols:
                raise AvroSchemaError(f"Invalid schema: enum default {default!r} not a symbol")
            schema = Enum(fullname, aliases, tuple(symbols), default)
        elif kind == "fixed":
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise AvroSchemaError(f"Invalid schema: fixed {fullname} needs a size")
            schema = Fixed(fullname, aliases, size)
        else:
            schema = Record(fullname, aliases)
        self.define(fullname, schema)
        if isinstance(schema, Record):
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise AvroSchemaError(f"Invalid schema: record {fullname} has no fields")
            schema.fields = [self.field(field, space) for field in fields]
            field_names = [field.name for field in schema.fields]
            if len(set(field_names)) != len(field_names):
                raise AvroSchemaError(f"Invalid schema: duplicate field in {fullname}")
        return schema

    def define(self, fullname: str, schema: Named) -> None:
        if fullname in PRIMITIVES or fullname in self.names:
            raise AvroSchemaError(f"Invalid schema: can't redefine {fullname}")
        self.names[fullname] = schema
        self.own[fullname] = schema

    def aliases(self, node: Mapping[str, Any], namespace: str) -> tuple[str, ...]:
        aliases = node.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise AvroSchemaError("Invalid schema: aliases must be a list of names")
        return tuple(_fullname(alias, namespace) for alias in aliases)

    def field(self, node: Any, namespace: str) -> Field:
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise AvroSchemaError(f"Invalid schema: bad field {json.dumps(node)}")
        name = node["name"]
        if self.strict and not _NAME.match(name):
            raise AvroSchemaError(f"Invalid schema: illegal field name {name!r}")
        if "type" not in node:
            raise AvroSchemaError(f"Invalid schema: field {name} has no type")
        schema = self.schema(node["type"], namespace)
        has_default = "default" in node
        if self.strict and has_default and not _valid_default(schema, node["default"]):
            raise AvroSchemaError(
                f"Invalid default for field {name}: {json.dumps(node['default'])} "
                f"not a {_kind(schema)}"
            )
        aliases = node.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise AvroSchemaError("Invalid schema: aliases must be a list of names")
        return Field(name, schema, tuple(aliases), has_default, node.get("default"))


def _kind(schema: Schema) -> str:
    if isinstance(schema, Primitive):
        return schema.type
    return {Record: "record", Enum: "enum", Fixed: "fixed", Array: "array", Map: "map"}.get(
        type(schema), "union"
    )


def _valid_default(schema: Schema, value: Any, depth: int = 0) -> bool:
    """Whether ``value`` (JSON) is a default of ``schema`` (a union's: of its first branch)."""
    if depth > 64:
        return True
    if isinstance(schema, Union_):
        return bool(schema.branches) and _valid_default(schema.branches[0], value, depth + 1)
    if isinstance(schema, Primitive):
        kind = schema.type
        if kind == "null":
            return value is None
        if kind == "boolean":
            return isinstance(value, bool)
        if kind in ("int", "long"):
            return isinstance(value, int) and not isinstance(value, bool)
        if kind in ("float", "double"):
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return isinstance(value, str)
    if isinstance(schema, Enum):
        return value in schema.symbols
    if isinstance(schema, Fixed):
        return isinstance(value, str)
    if isinstance(schema, Array):
        return isinstance(value, list) and all(
            _valid_default(schema.items, item, depth + 1) for item in value
        )
    if isinstance(schema, Map):
        return isinstance(value, dict) and all(
            _valid_default(schema.values, item, depth + 1) for item in value.values()
        )
    if not isinstance(value, dict):
        return False
    return all(
        _valid_default(field.type, value[field.name], depth + 1)
        if field.name in value
        else field.has_default
        for field in schema.fields
    )


def read_incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer``; empty if it can."""
    return list(_Resolution().check(reader.root, writer.root, "/"))


def _unqualified(fullname: str) -> str:
    return fullname.rpartition(".")[2]


def _names_match(reader: Named, writer: Named) -> bool:
    return (
        _unqualified(reader.fullname) == _unqualified(writer.fullname)
        or writer.fullname in reader.aliases
        or _unqualified(writer.fullname) in map(_unqualified, reader.aliases)
    )


class _Resolution:
    """One check, remembering the named pairs in progress (recursive types)."""

    def __init__(self) -> None:
        self.in_progress: set[tuple[int, int]] = set()

    def check(self, reader: Schema, writer: Schema, path: str) -> Iterator[str]:
        if isinstance(writer, Union_):
            for index, branch in enumerate(writer.branches):
                if isinstance(reader, Union_):
                    if not any(self.reads(r, branch, path) for r in reader.branches):
                        yield (
                            f"{path}: reader union lacks writer branch {index} ({_kind(branch)})"
                        )
                else:
                    yield from self.check(reader, branch, path)
            return
        if isinstance(reader, Union_):
            if not any(self.reads(branch, writer, path) for branch in reader.branches):
                yield f"{path}: reader union has no branch for writer type {_kind(writer)}"
            return
        if isinstance(reader, Primitive) and isinstance(writer, Primitive):
            if reader.type != writer.type and reader.type not in PROMOTIONS.get(
                writer.type, frozenset()
            ):
                yield f"{path}: reader type {reader.type} cannot read writer type {writer.type}"
            return
        if type(reader) is not type(writer):
            yield f"{path}: reader type {_kind(reader)} cannot read writer type {_kind(writer)}"
            return
        if isinstance(reader, Array) and isinstance(writer, Array):
            yield from self.check(reader.items, writer.items, f"{path}items/")
        elif isinstance(reader, Map) and isinstance(writer, Map):
            yield from self.check(reader.values, writer.values, f"{path}values/")
        elif isinstance(reader, Fixed) and isinstance(writer, Fixed):
            if not _names_match(reader, writer):
                yield f"{path}: name mismatch, expected {writer.fullname}, got {reader.fullname}"
            elif reader.size != writer.size:
                yield f"{path}size: fixed size {writer.size} read as {reader.size}"
        elif isinstance(reader, Enum) and isinstance(writer, Enum):
            if not _names_match(reader, writer):
                yield f"{path}: name mismatch, expected {writer.fullname}, got {reader.fullname}"
            elif reader.default is None:
                missing = [s for s in writer.symbols if s not in reader.symbols]
                if missing:
                    yield f"{path}symbols: reader enum lacks writer symbols {missing}"
        elif isinstance(reader, Record) and isinstance(writer, Record):
            yield from self.record(reader, writer, path)

    def reads(self, reader: Schema, writer: Schema, path: str) -> bool:
        return next(iter(self.check(reader, writer, path)), None) is None

    def record(self, reader: Record, writer: Record, path: str) -> Iterator[str]:
        if not _names_match(reader, writer):
            yield f"{path}: name mismatch, expected {writer.fullname}, got {reader.fullname}"
            return
        pair = (id(reader), id(writer))
        if pair in self.in_progress:
            return
        self.in_progress.add(pair)
        try:
            by_name = {field.name: field for field in writer.fields}
            for field in reader.fields:
                found = by_name.get(field.name)
                if found is None:
                    found = next((by_name[a] for a in field.aliases if a in by_name), None)
                if found is None:
                    if not field.has_default:
                        yield f"{path}fields/{field.name}: reader field has no default"
                else:
                    yield from self.check(field.type, found.type, f"{path}fields/{field.name}/")
        finally:
            self.in_progress.discard(pair)
