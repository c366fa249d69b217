"""JSON Schema compatibility: does a reader schema accept every document a writer accepts?

Confluent's registry decides JSON Schema compatibility by listing the changes
from the writer schema to the reader schema and allowing those that only widen
what is accepted (its "strict" set: json-schema-provider, ``SchemaDiff``). This
module checks the same question directly, keyword by keyword, for the keywords
that carry it (our own code; the rules below are the facts):

- ``type``: every writer type is a reader type (``integer`` is read as
  ``number``); a reader that adds a type where the writer had none narrows;
- bounds may only widen: ``maxLength``, ``maximum``, ``exclusiveMaximum``,
  ``maxItems``, ``maxProperties`` may grow or go, their ``min`` forms shrink
  or go; ``multipleOf`` may become a divisor or go; ``pattern`` may only go;
  ``uniqueItems`` may only go; ``enum`` and ``const`` may only grow or go;
- objects: a property in both is compared; a property the reader adds must be
  allowed by the writer's content model: a closed writer (``additionalProperties:
  false``) could not have written it, an open writer could have written
  anything there (so the reader's property must accept anything), a partly open
  writer's ``additionalProperties`` schema must be accepted by it; a property the
  reader drops must be accepted by the reader's ``additionalProperties``; a
  reader may not require a property the writer did not, unless it has a
  default; ``additionalProperties`` may widen, never narrow;
- arrays: ``items`` compared (a single schema, or position by position);
- ``anyOf``/``oneOf``: every writer branch accepted by some reader branch;
  ``allOf``: every reader branch accepts the writer; a writer ``allOf`` is read
  if the reader accepts one of its branches;
- local ``$ref`` (``#/definitions/...``, ``#/$defs/...``) are followed, each pair
  of places once (recursive schemas end).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

NUMBER_TYPES = frozenset({"integer", "number"})
UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")


def read_incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why ``reader`` does not accept every document ``writer`` accepts; empty if it does."""
    return list(_Comparison(reader, writer).compare(reader, writer, "#"))


class _Comparison:
    def __init__(self, reader_root: Any, writer_root: Any) -> None:
        self.reader_root = reader_root
        self.writer_root = writer_root
        self.seen: set[tuple[int, int]] = set()

    def resolve(self, schema: Any, root: Any, depth: int = 0) -> Any:
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
            ref = schema["$ref"]
            if not ref.startswith("#"):
                return {}  # a reference to another document: not followed, accepts anything
            target: Any = root
            for part in ref[1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    return {}
            schema = target
            depth += 1
        return schema

    def accepts(self, reader: Any, writer: Any, path: str) -> bool:
        return next(iter(self.compare(reader, writer, path)), None) is None

    def compare(self, reader: Any, writer: Any, path: str) -> Iterator[str]:
        reader = self.resolve(reader, self.reader_root)
        writer = self.resolve(writer, self.writer_root)
        if writer is False or reader is True or reader == {}:
            return
        if reader is False:
            yield f"{path}: the reader accepts nothing"
            return
        if writer is True:
            writer = {}
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return
        pair = (id(reader), id(writer))
        if pair in self.seen:
            return
        self.seen.add(pair)
        try:
            yield from self.combined(reader, writer, path)
            yield from self.types(reader, writer, path)
            yield from self.bounds(reader, writer, path)
            yield from self.values(reader, writer, path)
            yield from self.objects(reader, writer, path)
            yield from self.arrays(reader, writer, path)
        finally:
            self.seen.discard(pair)

    def combined(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        for key in ("anyOf", "oneOf"):
            if isinstance(writer.get(key), list):
                for index, branch in enumerate(writer[key]):
                    rest = {k: v for k, v in writer.items() if k not in ("anyOf", "oneOf")}
                    if not self.accepts(reader, {**rest, **_as_dict(branch)}, path):
                        yield f"{path}/{key}/{index}: no reader branch accepts this writer branch"
                return
        for key in ("anyOf", "oneOf"):
            if isinstance(reader.get(key), list):
                plain = {k: v for k, v in reader.items() if k not in ("anyOf", "oneOf")}
                if not any(
                    self.accepts({**plain, **_as_dict(b)}, writer, path) for b in reader[key]
                ):
                    yield f"{path}/{key}: no reader branch accepts the writer"
        if isinstance(reader.get("allOf"), list):
            for index, branch in enumerate(reader["allOf"]):
                yield from self.compare(branch, writer, f"{path}/allOf/{index}")
        if isinstance(writer.get("allOf"), list) and "allOf" not in reader:
            branches = writer["allOf"]
            without = {k: v for k, v in reader.items() if k != "allOf"}
            if not any(self.accepts(without, b, path) for b in branches) and branches:
                yield f"{path}/allOf: the reader accepts none of the writer's allOf branches"

    def types(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        read, written = _types(reader), _types(writer)
        if read is None:
            return
        if written is None:
            yield f"{path}/type: the reader narrows any type to {sorted(read)}"
            return
        for kind in sorted(written):
            if kind not in read and not (kind == "integer" and "number" in read):
                yield f"{path}/type: the reader does not accept {kind}"

    def bounds(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        for key in UPPER:
            yield from _bound(reader, writer, key, path, lambda r, w: r >= w)
        for key in LOWER:
            yield from _bound(reader, writer, key, path, lambda r, w: r <= w)
        yield from _bound(
            reader, writer, "multipleOf", path, lambda r, w: r != 0 and (w / r) == int(w / r)
        )
        if "pattern" in reader and reader.get("pattern") != writer.get("pattern"):
            yield f"{path}/pattern: the reader adds or changes a pattern"
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            yield f"{path}/uniqueItems: the reader adds uniqueItems"

    def values(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        if "enum" in reader and isinstance(reader["enum"], list):
            allowed = reader["enum"]
            if "enum" in writer and isinstance(writer["enum"], list):
                missing = [v for v in writer["enum"] if v not in allowed]
                if missing:
                    yield f"{path}/enum: the reader lacks {missing}"
            elif "const" in writer:
                if writer["const"] not in allowed:
                    yield f"{path}/enum: the reader lacks {writer['const']!r}"
            else:
                yield f"{path}/enum: the reader adds an enum"
        if "const" in reader and not (
            writer.get("const", object()) == reader["const"]
            or writer.get("enum") == [reader["const"]]
        ):
            yield f"{path}/const: the reader adds or changes a const"

    def objects(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        read_props, written_props = _properties(reader), _properties(writer)
        read_more = reader.get("additionalProperties", True)
        written_more = writer.get("additionalProperties", True)
        for name, schema in read_props.items():
            where = f"{path}/properties/{name}"
            if name in written_props:
                yield from self.compare(schema, written_props[name], where)
            elif written_more is not False:
                # the writer may have written this name with any value its
                # additionalProperties allows
                yield from self.compare(schema, written_more, where)
        for name, schema in written_props.items():
            if name not in read_props:
                yield from self.compare(read_more, schema, f"{path}/properties/{name}")
        if name_lists(reader, "required") - name_lists(writer, "required"):
            for name in sorted(name_lists(reader, "required") - name_lists(writer, "required")):
                prop = read_props.get(name)
                if not (isinstance(prop, dict) and "default" in prop):
                    yield f"{path}/required: the reader requires {name}"
        if read_more is not True and written_more is not False:
            yield from self.compare(read_more, written_more, f"{path}/additionalProperties")

    def arrays(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> Iterator[str]:
        read_items, written_items = reader.get("items"), writer.get("items")
        if read_items is None:
            return
        if isinstance(read_items, list):
            if not isinstance(written_items, list):
                yield f"{path}/items: the reader expects a tuple"
                return
            for index, schema in enumerate(read_items):
                written = written_items[index] if index < len(written_items) else {}
                yield from self.compare(schema, written, f"{path}/items/{index}")
            return
        if isinstance(written_items, list):
            for index, schema in enumerate(written_items):
                yield from self.compare(read_items, schema, f"{path}/items/{index}")
            return
        written = written_items if written_items is not None else {}
        yield from self.compare(read_items, written, f"{path}/items")


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _as_dict(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    return {} if schema is True else {"not": {}}


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return None


def name_lists(schema: dict[str, Any], key: str) -> set[str]:
    names = schema.get(key)
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def _bound(
    reader: dict[str, Any], writer: dict[str, Any], key: str, path: str, widens: Any
) -> Iterator[str]:
    read, written = reader.get(key), writer.get(key)
    if not isinstance(read, (int, float)) or isinstance(read, bool):
        return
    if not isinstance(written, (int, float)) or isinstance(written, bool):
        yield f"{path}/{key}: the reader adds {key} {read}"
    elif not widens(read, written):
        yield f"{path}/{key}: {written} narrowed to {read}"
