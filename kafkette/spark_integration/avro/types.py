"""Avro schemas as Spark types, as Spark's ``from_avro`` maps them (``SchemaConverters``).

=====================================  ==========================================
Avro                                   Spark
=====================================  ==========================================
boolean, int, long, float, double      boolean, int, bigint, float, double
string (also ``uuid``), enum           string
bytes, fixed                           binary
``decimal`` (bytes or fixed)           decimal(precision, scale)
``date`` (int)                         date
``timestamp-millis``/``-micros``       timestamp
``local-timestamp-millis``/``-micros`` timestamp_ntz
record                                 struct (fields by name, in order)
array, map                             array, map<string, ...>
union with null, ``[int, long]``,      the other branch, nullable; bigint;
``[float, double]``                    double
=====================================  ==========================================

A field is nullable when its type is a union with ``null``. Unions of several
non-null branches (Spark's ``member0``, ``member1`` structs) and recursive
records (which Spark refuses too) raise :class:`AvroTypeError` at once.
Named types are resolved with Avro's namespace rules; schemas a registered
schema references are passed as ``named`` documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)


class AvroTypeError(ValueError):
    """An Avro schema that has no Spark type (or is not Avro)."""


_PRIMITIVES: Mapping[str, DataType] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: Mapping[tuple[str, str], DataType] = {
    ("int", "date"): DateType(),
    ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(),
    ("long", "local-timestamp-millis"): TimestampNTZType(),
    ("long", "local-timestamp-micros"): TimestampNTZType(),
}


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


class _Converter:
    """One conversion: the named types seen so far, the records being converted."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        self.open_records: set[str] = set()
        self.uses_uuid = False

    def declare(self, schema: Any, namespace: str | None) -> None:
        """Record the named types ``schema`` defines (for a referenced schema)."""
        if isinstance(schema, list):
            for branch in schema:
                self.declare(branch, namespace)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                name = _full_name(str(schema.get("name")), schema.get("namespace", namespace))
                self.named[name] = (schema, name.rpartition(".")[0] or None)
                if kind != "enum":
                    inner = name.rpartition(".")[0] or None
                    for field in schema.get("fields", ()):
                        self.declare(field.get("type"), inner)
            elif kind == "array":
                self.declare(schema.get("items"), namespace)
            elif kind == "map":
                self.declare(schema.get("values"), namespace)
            elif isinstance(kind, dict | list):
                self.declare(kind, namespace)

    def convert(self, schema: Any, namespace: str | None) -> tuple[DataType, bool]:
        """The Spark type of ``schema`` and whether it is nullable."""
        if isinstance(schema, str):
            primitive = _PRIMITIVES.get(schema)
            if primitive is not None:
                return primitive, schema == "null"
            name = schema if schema in self.named else _full_name(schema, namespace)
            if name not in self.named:
                raise AvroTypeError(f"unknown Avro type {schema!r}")
            if name in self.open_records:
                raise AvroTypeError(
                    f"Found recursive reference in Avro schema, which can not be processed "
                    f"by Spark: {name}"
                )
            defined, defined_namespace = self.named[name]
            return self._named(defined, defined_namespace, name)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, dict):
            raise AvroTypeError(f"not an Avro schema: {schema!r}")
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if kind in ("record", "error", "enum", "fixed"):
            name = _full_name(str(schema.get("name")), schema.get("namespace", namespace))
            self.named[name] = (schema, name.rpartition(".")[0] or None)
            return self._named(schema, name.rpartition(".")[0] or None, name)
        if kind == "array":
            items, nullable = self.convert(schema.get("items"), namespace)
            return ArrayType(items, containsNull=nullable), False
        if kind == "map":
            values, nullable = self.convert(schema.get("values"), namespace)
            return MapType(StringType(), values, valueContainsNull=nullable), False
        if isinstance(kind, str) and kind in _PRIMITIVES:
            if logical == "decimal" and kind == "bytes":
                return self._decimal(schema), False
            if logical == "uuid" and kind == "string":
                self.uses_uuid = True
            return _LOGICAL.get((kind, str(logical)), _PRIMITIVES[kind]), kind == "null"
        if isinstance(kind, dict | list | str):
            return self.convert(kind, namespace)
        raise AvroTypeError(f"not an Avro schema: {schema!r}")

    def _named(self, schema: Any, namespace: str | None, name: str) -> tuple[DataType, bool]:
        kind = schema.get("type")
        if kind == "enum":
            return StringType(), False
        if kind == "fixed":
            if schema.get("logicalType") == "decimal":
                return self._decimal(schema), False
            return BinaryType(), False
        self.open_records.add(name)
        try:
            fields = []
            for field in schema.get("fields", ()):
                data_type, nullable = self.convert(field.get("type"), namespace)
                fields.append(StructField(str(field.get("name")), data_type, nullable))
        finally:
            self.open_records.discard(name)
        return StructType(fields), False

    @staticmethod
    def _decimal(schema: Mapping[str, Any]) -> DataType:
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not 0 < precision <= 38:
            raise AvroTypeError(f"decimal precision {precision!r}: Spark takes 1 to 38")
        return DecimalType(precision, scale)

    def _union(self, branches: list[Any], namespace: str | None) -> tuple[DataType, bool]:
        converted = [self.convert(branch, namespace) for branch in branches]
        kinds = [t for t, _ in converted if not isinstance(t, NullType)]
        nullable = len(kinds) < len(converted)
        if not kinds:
            return NullType(), True
        if len(kinds) == 1:
            return kinds[0], nullable
        if {type(t) for t in kinds} == {IntegerType, LongType}:
            return LongType(), nullable
        if {type(t) for t in kinds} == {FloatType, DoubleType}:
            return DoubleType(), nullable
        raise AvroTypeError(
            f"a union of {len(kinds)} non-null types ({json_branches(branches)}) has no Spark "
            "column type here: read the value as binary (no valueFormat) instead"
        )


def json_branches(branches: Iterable[Any]) -> str:
    """A union's branches named briefly for a message."""
    return ", ".join(
        b if isinstance(b, str) else str(b.get("name", b.get("type"))) for b in branches
    )


def spark_type(schema: Any, named: Iterable[Any] = ()) -> tuple[DataType, bool]:
    """The Spark type of the parsed Avro schema ``schema`` (JSON as loaded) and whether
    its values can be null; ``named``: the parsed schemas it references."""
    converter = _Converter()
    for document in named:
        converter.declare(document, None)
    return converter.convert(schema, None)


def uses_uuid(schema: Any, named: Iterable[Any] = ()) -> bool:
    """Whether the schema has ``uuid`` strings (fastavro reads them as ``uuid.UUID``)."""
    converter = _Converter()
    for document in named:
        converter.declare(document, None)
    converter.convert(schema, None)
    return converter.uses_uuid


def check_writable(given: DataType, expected: DataType, where: str = "value") -> None:
    """Refuse a column of type ``given`` that cannot be written with a schema whose Spark
    type is ``expected``: another type, or a struct field the schema does not have. Struct
    fields are matched by name (as Spark's ``to_avro``); a schema field the column lacks
    is left to the encoder (it writes the field's default, or fails the record)."""
    if isinstance(expected, StructType):
        if not isinstance(given, StructType):
            raise AvroTypeError(
                f"{where} is {given.simpleString()}: the Avro schema needs a struct "
                f"{expected.simpleString()}"
            )
        fields = {f.name: f.dataType for f in expected.fields}
        for field in given.fields:
            if field.name not in fields:
                raise AvroTypeError(
                    f"Cannot find field '{where}.{field.name}' in the Avro schema "
                    f"{expected.simpleString()}"
                )
            check_writable(field.dataType, fields[field.name], f"{where}.{field.name}")
        return
    if isinstance(expected, ArrayType) and isinstance(given, ArrayType):
        check_writable(given.elementType, expected.elementType, f"{where}[]")
        return
    if isinstance(expected, MapType) and isinstance(given, MapType):
        if not isinstance(given.keyType, StringType):
            raise AvroTypeError(f"{where}: Avro maps have string keys, not {given.keyType}")
        check_writable(given.valueType, expected.valueType, f"{where}{{}}")
        return
    if given != expected and type(given) is not type(expected):
        raise AvroTypeError(
            f"{where} is {given.simpleString()}: the Avro schema has {expected.simpleString()}"
        )
    if isinstance(expected, DecimalType) and given != expected:
        raise AvroTypeError(
            f"{where} is {given.simpleString()}: the Avro schema has {expected.simpleString()}"
        )
