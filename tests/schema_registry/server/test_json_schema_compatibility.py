"""JSON Schema compatibility (compatibility/json_schema.py): does the reader accept every
document the writer accepts? Each row is (reader, writer, compatible), the change from
writer to reader being one that Confluent's registry allows (its strict set of
compatible changes, json-schema-provider SchemaDiff) or refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.schema_registry import compatibility
from kafkette.schema_registry.compatibility.json_schema import read_incompatibilities


def obj(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


CLOSED = {"additionalProperties": False}

TABLE: list[tuple[Any, Any, bool]] = [
    # types
    ({"type": "string"}, {"type": "string"}, True),
    ({"type": "number"}, {"type": "integer"}, True),
    ({"type": "integer"}, {"type": "number"}, False),
    ({"type": ["string", "null"]}, {"type": "string"}, True),  # type extended
    ({"type": "string"}, {"type": ["string", "null"]}, False),
    ({"type": "string"}, {}, False),
    ({}, {"type": "string"}, True),
    (True, {"type": "string"}, True),
    (False, {"type": "string"}, False),
    # string bounds
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, True),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, False),
    ({"type": "string"}, {"type": "string", "maxLength": 5}, True),
    ({"type": "string", "maxLength": 5}, {"type": "string"}, False),
    ({"type": "string", "minLength": 1}, {"type": "string", "minLength": 3}, True),
    ({"type": "string", "minLength": 3}, {"type": "string", "minLength": 1}, False),
    ({"type": "string"}, {"type": "string", "pattern": "^a"}, True),
    ({"type": "string", "pattern": "^a"}, {"type": "string"}, False),
    # numbers
    ({"type": "number", "maximum": 10}, {"type": "number", "maximum": 5}, True),
    ({"type": "number", "maximum": 5}, {"type": "number", "maximum": 10}, False),
    ({"type": "number", "minimum": 0}, {"type": "number", "minimum": 1}, True),
    ({"type": "number", "exclusiveMinimum": 2}, {"type": "number", "exclusiveMinimum": 1}, False),
    ({"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 4}, True),
    ({"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 2}, False),
    # enums and const
    ({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}, True),
    ({"enum": ["a"]}, {"enum": ["a", "b"]}, False),
    ({"enum": ["a"]}, {"type": "string"}, False),
    ({"enum": ["a", "b"]}, {"const": "a"}, True),
    ({"const": "a"}, {"const": "b"}, False),
    # objects: open content model (additionalProperties absent)
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}), True),
    (
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}),
        obj({"a": {"type": "string"}}),
        False,
    ),
    (obj({"a": {"type": "string"}, "b": {}}), obj({"a": {"type": "string"}}), True),
    (
        obj({"a": {"type": "string"}}),
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}),
        True,
    ),
    # closed content model
    (
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}, **CLOSED),
        obj({"a": {"type": "string"}}, **CLOSED),
        True,
    ),
    (
        obj({"a": {"type": "string"}}, **CLOSED),
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}, **CLOSED),
        False,
    ),
    (
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}),
        obj({"a": {"type": "string"}}, **CLOSED),
        True,
    ),
    (obj({"a": {"type": "string"}}, **CLOSED), obj({"a": {"type": "string"}}), False),
    # partly open: additionalProperties a schema
    (
        obj(
            {"a": {"type": "string"}, "b": {"type": "integer"}},
            additionalProperties={"type": "integer"},
        ),
        obj({"a": {"type": "string"}}, additionalProperties={"type": "integer"}),
        True,
    ),
    (
        obj(
            {"a": {"type": "string"}, "b": {"type": "string"}},
            additionalProperties={"type": "integer"},
        ),
        obj({"a": {"type": "string"}}, additionalProperties={"type": "integer"}),
        False,
    ),
    # required
    (obj({"a": {"type": "string"}}, required=["a"]), obj({"a": {"type": "string"}}), False),
    (
        obj({"a": {"type": "string", "default": ""}}, required=["a"]),
        obj({"a": {"type": "string"}}),
        True,
    ),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, required=["a"]), True),
    # nested
    (
        obj({"o": obj({"x": {"type": "number"}})}),
        obj({"o": obj({"x": {"type": "integer"}})}),
        True,
    ),
    (
        obj({"o": obj({"x": {"type": "integer"}})}),
        obj({"o": obj({"x": {"type": "number"}})}),
        False,
    ),
    # arrays
    (
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "integer"}},
        True,
    ),
    (
        {"type": "array", "items": {"type": "string"}},
        {"type": "array", "items": {"type": "integer"}},
        False,
    ),
    ({"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 2}, True),
    ({"type": "array", "uniqueItems": True}, {"type": "array"}, False),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, True),
    # combined
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "string"}, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}]}, True),
    ({"anyOf": [{"type": "string"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
    ({"allOf": [{"type": "string"}, {"maxLength": 9}]}, {"type": "string", "maxLength": 5}, True),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, {"type": "string", "maxLength": 5}, False),
    # references
    (
        {
            "$defs": {"n": {"type": "number"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/n"}},
        },
        {
            "definitions": {"i": {"type": "integer"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/definitions/i"}},
        },
        True,
    ),
    (
        {
            "definitions": {"i": {"type": "integer"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/definitions/i"}},
        },
        {
            "$defs": {"n": {"type": "number"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/n"}},
        },
        False,
    ),
]


@pytest.mark.parametrize(("reader", "writer", "expected"), TABLE)
def test_json_schema_table(reader: Any, writer: Any, expected: bool) -> None:
    """Each change widens (compatible) or narrows what is accepted, as the table says."""
    assert (not read_incompatibilities(reader, writer)) is expected


def test_a_recursive_schema_ends() -> None:
    """A tree whose children refer back to the root compares with itself and a widened form."""
    tree = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    wider = json.loads(json.dumps(tree))
    wider["properties"]["v"] = {"type": "number"}
    assert read_incompatibilities(tree, tree) == []
    assert read_incompatibilities(wider, tree) == []
    assert read_incompatibilities(tree, wider) != []


def test_levels_use_the_json_rules() -> None:
    """Through the registry's levels: a property added to an open object breaks BACKWARD."""
    old = compatibility.parse("JSON", json.dumps(obj({"a": {"type": "string"}})))
    new = compatibility.parse(
        "JSON", json.dumps(obj({"a": {"type": "string"}, "b": {"type": "integer"}}))
    )
    assert compatibility.check("BACKWARD", new, [old]) != []
    assert compatibility.check("FORWARD", new, [old]) == []


json_leaves = st.sampled_from(
    [{"type": t} for t in ("string", "integer", "number", "boolean", "null")]
    + [{"type": "string", "maxLength": 4}, {"enum": ["a", "b"]}, {}]
)
json_schemas = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.dictionaries(st.sampled_from("abcd"), inner, max_size=3).map(
            lambda props: {"type": "object", "properties": props}
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(json_schemas)
def test_every_json_schema_accepts_itself(schema: dict[str, Any]) -> None:
    """A schema accepts what it accepts: no incompatibility with itself."""
    assert read_incompatibilities(schema, json.loads(json.dumps(schema))) == []
