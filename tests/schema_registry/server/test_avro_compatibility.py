"""Avro's schema-resolution rules, as the registry checks them (compatibility/avro.py).

Each row of the table is (reader, writer, readable): whether data written with
the writer schema can be read with the reader, by the specification's rules
(avro.apache.org, "Schema Resolution"). Hypothesis adds the laws: every schema
reads itself, and a field added with a default keeps a record backward
compatible while one added without a default does not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.schema_registry import compatibility
from kafkette.schema_registry.compatibility import avro


def record(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(*symbols: str, name: str = "E", **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(size: int, name: str = "F") -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size}


def parse(schema: Any) -> avro.AvroSchema:
    return avro.parse(json.dumps(schema))


def readable(reader: Any, writer: Any) -> bool:
    return not avro.read_incompatibilities(parse(reader), parse(writer))


# (reader, writer, readable)
TABLE: list[tuple[Any, Any, bool]] = [
    # primitives and promotions
    ("int", "int", True),
    ("long", "int", True),
    ("float", "int", True),
    ("double", "int", True),
    ("float", "long", True),
    ("double", "long", True),
    ("double", "float", True),
    ("int", "long", False),
    ("long", "float", False),
    ("float", "double", False),
    ("int", "float", False),
    ("bytes", "string", True),
    ("string", "bytes", True),
    ("string", "int", False),
    ("boolean", "int", False),
    ("null", "null", True),
    ("null", "int", False),
    ({"type": "int", "logicalType": "date"}, "int", True),
    # records: fields added and removed
    (record(field("a", "int")), record(field("a", "int")), True),
    (record(field("a", "int"), field("b", "string", default="x")), record(field("a", "int")), True),
    (record(field("a", "int"), field("b", "string")), record(field("a", "int")), False),
    (record(field("a", "int")), record(field("a", "int"), field("b", "string")), True),
    (record(field("a", "long")), record(field("a", "int")), True),
    (record(field("a", "int")), record(field("a", "long")), False),
    (record(field("a", "int"), name="S"), record(field("a", "int")), False),
    (record(field("a", "int"), name="ns.R"), record(field("a", "int"), name="other.R"), True),
    (record(field("a", "int"), name="S", aliases=["R"]), record(field("a", "int")), True),
    # field aliases
    (record(field("b", "int", aliases=["a"])), record(field("a", "int")), True),
    (record(field("b", "int")), record(field("a", "int")), False),
    # nested records
    (
        record(field("inner", record(field("x", "int"), field("y", "int", default=0), name="I"))),
        record(field("inner", record(field("x", "int"), name="I"))),
        True,
    ),
    (
        record(field("inner", record(field("x", "int"), field("y", "int"), name="I"))),
        record(field("inner", record(field("x", "int"), name="I"))),
        False,
    ),
    # enums
    (enum("A", "B", "C"), enum("A", "B"), True),
    (enum("A", "B"), enum("A", "B", "C"), False),
    (enum("A", "B", default="A"), enum("A", "B", "C"), True),
    (enum("A", "B", name="X"), enum("A", "B"), False),
    # arrays and maps
    ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, False),
    ({"type": "map", "values": "double"}, {"type": "map", "values": "float"}, True),
    ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False),
    ({"type": "array", "items": "int"}, {"type": "map", "values": "int"}, False),
    # fixed
    (fixed(16), fixed(16), True),
    (fixed(16), fixed(8), False),
    (fixed(16, "G"), fixed(16), False),
    # unions
    (["null", "int"], "int", True),
    (["null", "long"], "int", True),
    (["null", "string"], "int", False),
    ("int", ["null", "int"], False),
    (["null", "int", "string"], ["null", "int"], True),
    (["null", "int"], ["null", "int", "string"], False),
    ("long", ["int", "long"], True),
    (record(field("a", ["null", "int"], default=None)), record(field("a", "int")), True),
    (record(field("a", "int")), record(field("a", ["null", "int"], default=None)), False),
]


@pytest.mark.parametrize(("reader", "writer", "expected"), TABLE)
def test_resolution_table(reader: Any, writer: Any, expected: bool) -> None:
    """Each pair resolves (or not) as Avro's schema-resolution rules say."""
    assert readable(reader, writer) is expected


RECURSIVE = record(
    field("value", "int"), field("next", ["null", "Node"], default=None), name="Node"
)


def test_a_recursive_record_reads_itself_and_an_evolved_self() -> None:
    """A linked list reads itself, and one with an added defaulted field (no endless loop)."""
    evolved = record(
        field("value", "int"),
        field("next", ["null", "Node"], default=None),
        field("tag", "string", default=""),
        name="Node",
    )
    assert readable(RECURSIVE, RECURSIVE)
    assert readable(evolved, RECURSIVE)
    assert not readable(
        RECURSIVE | {"fields": [*RECURSIVE["fields"], field("t", "int")]}, RECURSIVE
    )


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '"nosuchtype"',
        '{"type": "record", "name": "R"}',
        '{"type": "record", "name": "R", "fields": [{"name": "a"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},'
        ' {"name": "a", "type": "int"}]}',
        '{"type": "record", "name": "1R", "fields": []}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
        '{"type": "fixed", "name": "F"}',
        '{"type": "array"}',
        '["int", "int"]',
        '["int", ["null"]]',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "int"],'
        ' "default": 1}]}',
        "[" * 5000 + "]" * 5000,
    ],
)
def test_invalid_schemas_are_refused(text: str) -> None:
    """Text that is not a valid Avro schema raises AvroSchemaError, never anything else."""
    with pytest.raises(avro.AvroSchemaError):
        avro.parse(text)


def test_the_canonical_text_ignores_whitespace_and_spelled_out_primitives() -> None:
    """The same schema written two ways has one canonical text (so one id)."""
    a = avro.parse('{ "type" : "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}')
    b = avro.parse('{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"int"}}]}')
    assert a.canonical == b.canonical
    assert avro.parse('{"type": "string"}').canonical == '"string"'


def test_references_define_names_for_the_schema() -> None:
    """A schema may use a named type that a referenced schema defines."""
    address = avro.parse(json.dumps(record(field("city", "string"), name="com.x.Address")))
    person = avro.parse(
        json.dumps(record(field("home", "com.x.Address"), name="com.x.Person")), [address]
    )
    assert isinstance(person.root, avro.Record)
    with pytest.raises(avro.AvroSchemaError):
        avro.parse(json.dumps(record(field("home", "com.x.Address"), name="com.x.Person")))


LEVEL_CASES = [
    # level, old, new, compatible
    (
        "BACKWARD",
        record(field("a", "int")),
        record(field("a", "int"), field("b", "int", default=1)),
        True,
    ),
    ("BACKWARD", record(field("a", "int")), record(field("a", "int"), field("b", "int")), False),
    ("FORWARD", record(field("a", "int")), record(field("a", "int"), field("b", "int")), True),
    ("FORWARD", record(field("a", "int"), field("b", "int")), record(field("a", "int")), False),
    (
        "FORWARD",
        record(field("a", "int"), field("b", "int", default=0)),
        record(field("a", "int")),
        True,
    ),
    ("FORWARD", record(field("a", "int")), record(field("b", "int", default=0)), False),
    (
        "FULL",
        record(field("a", "int")),
        record(field("a", "int"), field("b", "int", default=1)),
        True,
    ),
    ("FULL", record(field("a", "int")), record(field("a", "int"), field("b", "int")), False),
    ("NONE", record(field("a", "int")), record(field("a", "string")), True),
]


@pytest.mark.parametrize(("level", "old", "new", "expected"), LEVEL_CASES)
def test_levels_against_the_latest(level: str, old: Any, new: Any, expected: bool) -> None:
    """BACKWARD: new reads old; FORWARD: old reads new; FULL: both; NONE: anything."""
    parsed = [compatibility.parse("AVRO", json.dumps(s)) for s in (old, new)]
    assert (not compatibility.check(level, parsed[1], parsed[:1])) is expected


def test_transitive_levels_check_every_earlier_version() -> None:
    """v1 (a), v2 (a, b with a default), v3 (b): v3 reads v2 but not v1, so BACKWARD
    passes (the latest only) and BACKWARD_TRANSITIVE fails."""
    v1 = record(field("a", "int"))
    v2 = record(field("a", "int"), field("b", "int", default=0))
    v3 = record(field("b", "int"))
    parsed = [compatibility.parse("AVRO", json.dumps(s)) for s in (v1, v2, v3)]
    assert compatibility.check("BACKWARD", parsed[2], parsed[:2]) == []
    assert compatibility.check("BACKWARD_TRANSITIVE", parsed[2], parsed[:2]) != []


# -- properties

primitive_names = st.sampled_from(sorted(avro.PRIMITIVES))
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


def schemas(depth: int = 3) -> st.SearchStrategy[Any]:
    leaves = primitive_names
    if depth == 0:
        return leaves
    inner = st.deferred(lambda: schemas(depth - 1))
    return st.one_of(
        leaves,
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda values: {"type": "map", "values": values}, inner),
        st.lists(names, min_size=1, max_size=4, unique=True).map(
            lambda symbols: {"type": "enum", "name": "E" + str(len(symbols)), "symbols": symbols}
        ),
    )


def records_() -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(
        st.tuples(names, schemas(2)), min_size=0, max_size=5, unique_by=lambda f: f[0]
    ).map(lambda fields: record(*(field(n, t) for n, t in fields)))


def _unique_enums(schema: Any) -> bool:
    try:
        parse(schema)
    except avro.AvroSchemaError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(records_().filter(_unique_enums))
def test_every_schema_reads_itself(schema: dict[str, Any]) -> None:
    """A schema is compatible with itself at every level."""
    parsed = compatibility.parse("AVRO", json.dumps(schema))
    for level in compatibility.LEVELS:
        assert compatibility.check(level, parsed, [parsed]) == []


@settings(max_examples=150, deadline=None)
@given(records_().filter(_unique_enums), st.integers())
def test_adding_a_field_with_a_default_is_backward_compatible(
    schema: dict[str, Any], default: int
) -> None:
    """Adding a field with a default keeps BACKWARD (and FORWARD); without one, not BACKWARD."""
    new_field = field("added_field_zz", "long", default=default)
    evolved = schema | {"fields": [*schema["fields"], new_field]}
    old = compatibility.parse("AVRO", json.dumps(schema))
    new = compatibility.parse("AVRO", json.dumps(evolved))
    assert compatibility.check("FULL", new, [old]) == []
    without = schema | {"fields": [*schema["fields"], field("added_field_zz", "long")]}
    assert compatibility.check("BACKWARD", compatibility.parse("AVRO", json.dumps(without)), [old])


def test_the_canonical_text_puts_attributes_in_avros_order() -> None:
    """Key order does not make another schema: attributes follow Avro's writer (type,
    name, namespace, doc, fields...; a field's name, type, doc, default), other
    properties after them, kept as they are."""
    ordered = avro.parse(
        '{"type": "record", "name": "R", "namespace": "n", "doc": "d",'
        ' "fields": [{"name": "a", "type": "string", "x-tag": 1}]}'
    )
    assert ordered.canonical == (
        '{"type":"record","name":"R","namespace":"n","doc":"d",'
        '"fields":[{"name":"a","type":"string","x-tag":1}]}'
    )
    reordered = avro.parse(
        '{"fields": [{"x-tag": 1, "type": {"type": "string"}, "name": "a"}], "doc": "d",'
        ' "namespace": "n", "name": "R", "type": "record"}'
    )
    assert reordered.canonical == ordered.canonical
    with_default = avro.parse(
        '{"type": "record", "name": "R", "fields":'
        ' [{"default": {"k": "v"}, "name": "m", "type": {"values": "string", "type": "map"}}]}'
    )
    assert with_default.canonical == (
        '{"type":"record","name":"R","fields":'
        '[{"name":"m","type":{"type":"map","values":"string"},"default":{"k":"v"}}]}'
    )
