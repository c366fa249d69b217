"""Encoders and decoders compiled from the message tables.

For each (struct class, version) this module writes the source of two
straight-line Python functions from the class's ``FIELDS`` table and compiles
them once, on first use:

- ``decode(buf, pos) -> (obj, pos)`` reads every field present at the
  version in wire order, fills absent fields with their defaults and builds
  the object with one positional constructor call;
- ``encode(out, obj)`` appends the fields present at the version, and rejects
  a non-default value in a field the version cannot carry (as Kafka's own
  generated code does), unless the field is ignorable.

Runs of fixed-width fields are read and written with one ``struct`` call.
Only the tables (which are generated from Kafka's definitions, never from
input) reach the compiled source. Functions are named after the class and
version so that tracebacks stay readable.

Decoding errors from the standard library (``struct.error`` on a short
buffer) are translated to :class:`TruncatedError` at the top level; encoding
errors (a wrong type, an out-of-range integer) to :class:`EncodeError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kafkette.protocol import primitives as p
from kafkette.protocol.errors import (
    EncodeError,
    InvalidLengthError,
    ProtocolError,
    TruncatedError,
    UnsupportedVersionError,
)
from kafkette.protocol.schema import (
    EMPTY_LIST,
    NEW_STRUCT,
    Array,
    Field,
    Message,
    Struct,
    in_range,
)

Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[bytearray, Any], None]

M = TypeVar("M", bound=Message)

_FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
}
_FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8}

_codecs: dict[tuple[type[Struct], int, bool], tuple[Encoder, Decoder]] = {}


# -- public entry points ----------------------------------------------------------


def encode_message(msg: Message, version: int, out: bytearray) -> None:
    """Append ``msg`` encoded at ``version`` to ``out``."""
    cls = type(msg)
    cls.check_version(version)
    encoder = codec_for(cls, version, cls.is_flexible(version))[0]
    try:
        encoder(out, msg)
    except ProtocolError:
        raise
    except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {cls.NAME} v{version}: {exc}") from exc


def decode_message(
    cls: type[M], data: bytes | bytearray | memoryview, pos: int, version: int
) -> tuple[M, int]:
    """Decode a ``cls`` at ``version`` from ``data[pos:]``."""
    cls.check_version(version)
    decoder = codec_for(cls, version, cls.is_flexible(version))[1]
    try:
        obj, pos = decoder(data, pos)
    except ProtocolError:
        raise
    except (struct.error, IndexError) as exc:
        raise TruncatedError(f"{cls.NAME} v{version} is truncated: {exc}") from exc
    return obj, pos


def codec_for(cls: type[Struct], version: int, flexible: bool) -> tuple[Encoder, Decoder]:
    """The compiled (encoder, decoder) of ``cls`` at ``version``."""
    key = (cls, version, flexible)
    codec = _codecs.get(key)
    if codec is None:
        codec = _compile(cls, version, flexible)
        _codecs[key] = codec
    return codec


# -- helpers the compiled code calls ---------------------------------------------------


def _fail_absent(cls_name: str, field: str, version: int) -> None:
    raise UnsupportedVersionError(
        f"{cls_name}.{field} has a non-default value but cannot be sent at version {version}"
    )


def _fail_null(cls_name: str, field: str, version: int) -> None:
    raise EncodeError(f"{cls_name}.{field} is not nullable at version {version}")


def _read_null_marker(buf: Any, pos: int) -> tuple[bool, int]:
    """Read a nullable struct's presence byte: True when present."""
    marker = buf[pos]
    if marker == 0xFF:
        return False, pos + 1
    if marker != 1:
        raise InvalidLengthError(f"invalid nullable struct marker {marker}")
    return True, pos + 1


def _read_fixed_array(fmt: str, size: int, buf: Any, pos: int, count: int) -> tuple[list[Any], int]:
    end = pos + size * count
    if end > len(buf):
        raise TruncatedError("array runs past the end of the buffer")
    return list(struct.unpack_from(f">{count}{fmt}", buf, pos)), end


def _read_uuid_array(buf: Any, pos: int, count: int) -> tuple[list[uuid.UUID], int]:
    values = []
    for _ in range(count):
        value, pos = p.read_uuid(buf, pos)
        values.append(value)
    return values, pos


def _write_fixed_array(out: bytearray, fmt: str, values: list[Any]) -> None:
    out += struct.pack(f">{len(values)}{fmt}", *values)


_HELPERS: dict[str, Any] = {
    "p": p,
    "uuid": uuid,
    "InvalidLengthError": InvalidLengthError,
    "TruncatedError": TruncatedError,
    "_fail_absent": _fail_absent,
    "_fail_null": _fail_null,
    "_read_null_marker": _read_null_marker,
    "_read_fixed_array": _read_fixed_array,
    "_read_uuid_array": _read_uuid_array,
    "_write_fixed_array": _write_fixed_array,
    "_uv": p.encode_uvarint,
}


# -- the compiler -------------------------------------------------------------------------


def _field_flexible(field: Field, flexible: bool, version: int) -> bool:
    if field.flexible is None:
        return flexible
    return in_range(version, field.flexible)


def _min_size(ftype: Any, flexible: bool, version: int, nullable: bool = False) -> int:
    """Fewest bytes a value of ``ftype`` can take on the wire (for count checks)."""
    if isinstance(ftype, Array):
        return 1 if flexible else 4
    if isinstance(ftype, str):
        if ftype in _FIXED_SIZES:
            return _FIXED_SIZES[ftype]
        if ftype == "uuid":
            return 16
        if ftype == "string":
            return 1 if flexible else 2
        return 1 if flexible else 4  # bytes, records
    if nullable:
        return 1
    total = 1 if flexible else 0
    for field in ftype.FIELDS:
        if in_range(version, field.versions) and field.tag is None:
            total += _min_size(field.type, flexible, version, in_range(version, field.nullable))
    return total


class _Source:
    """Accumulates the lines of one generated function."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


class _Compiler:
    """Writes and compiles the codec of one struct class at one version."""

    def __init__(self, cls: type[Struct], version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.ns: dict[str, Any] = dict(_HELPERS)
        self.counter = 0

    def const(self, value: Any, hint: str = "c") -> str:
        """Name under which ``value`` is reachable from the compiled code."""
        self.counter += 1
        name = f"_{hint}{self.counter}"
        self.ns[name] = value
        return name

    def child(self, cls: type[Struct]) -> tuple[str, str]:
        enc, dec = codec_for(cls, self.version, self.flexible)
        return self.const(enc, "enc_" + cls.__name__), self.const(dec, "dec_" + cls.__name__)

    # ---- decoding

    def read_expr(
        self, field: Field, ftype: Any, nullable: bool, flexible: bool, target: str, buf: str
    ) -> list[str]:
        """Lines that read one value of ``ftype`` from ``buf`` into ``target``."""
        if isinstance(ftype, Array):
            return self.read_array(field, ftype, nullable, flexible, target, buf)
        if isinstance(ftype, str):
            reader = self.primitive_reader(ftype, nullable, flexible)
            return [f"{target}, pos = {reader}({buf}, pos)"]
        _enc, dec = self.child(ftype)
        if nullable:
            return [
                f"present, pos = _read_null_marker({buf}, pos)",
                "if present:",
                f"    {target}, pos = {dec}({buf}, pos)",
                "else:",
                f"    {target} = None",
            ]
        return [f"{target}, pos = {dec}({buf}, pos)"]

    def primitive_reader(self, ftype: str, nullable: bool, flexible: bool) -> str:
        if ftype in _FIXED_FORMATS:
            fmt = struct.Struct(">" + _FIXED_FORMATS[ftype])
            return f"(lambda b, q, _f={self.const(fmt, 'fmt')}: p.read_fixed(_f, b, q))"
        if ftype == "uuid":
            return "p.read_uuid"
        if ftype == "string":
            return {
                (False, False): "p.read_string",
                (False, True): "p.read_nullable_string",
                (True, False): "p.read_compact_string",
                (True, True): "p.read_compact_nullable_string",
            }[flexible, nullable]
        if ftype == "bytes":
            return {
                (False, False): "p.read_bytes",
                (False, True): "p.read_nullable_bytes",
                (True, False): "p.read_compact_bytes",
                (True, True): "p.read_compact_nullable_bytes",
            }[flexible, nullable]
        if ftype == "records":
            return "p.read_compact_records" if flexible else "p.read_records"
        raise AssertionError(f"unknown primitive type {ftype}")

    def read_array(
        self, field: Field, ftype: Array, nullable: bool, flexible: bool, target: str, buf: str
    ) -> list[str]:
        elem = ftype.element
        min_size = _min_size(elem, flexible, self.version)
        length_reader = "p.read_compact_array_length" if flexible else "p.read_array_length"
        lines = [f"n, pos = {length_reader}({buf}, pos, {min_size})", "if n < 0:"]
        if nullable:
            lines.append(f"    {target} = None")
        else:
            message = f"null array for non-nullable field {field.kafka_name}"
            lines.append(f"    raise InvalidLengthError({message!r})")
        lines.append("else:")
        if isinstance(elem, str) and elem in _FIXED_FORMATS:
            fmt = _FIXED_FORMATS[elem]
            size = _FIXED_SIZES[elem]
            lines.append(f"    {target}, pos = _read_fixed_array({fmt!r}, {size}, {buf}, pos, n)")
            return lines
        if elem == "uuid":
            lines.append(f"    {target}, pos = _read_uuid_array({buf}, pos, n)")
            return lines
        if isinstance(elem, str):
            reader = self.primitive_reader(elem, False, flexible)
            lines += [
                f"    {target} = []",
                "    for _ in range(n):",
                f"        e, pos = {reader}({buf}, pos)",
                f"        {target}.append(e)",
            ]
            return lines
        _enc, dec = self.child(elem)
        lines += [
            f"    {target} = []",
            "    for _ in range(n):",
            f"        e, pos = {dec}({buf}, pos)",
            f"        {target}.append(e)",
        ]
        return lines

    def default_expr(self, field: Field) -> str:
        if field.default is EMPTY_LIST:
            return "[]"
        if field.default is NEW_STRUCT:
            assert isinstance(field.type, type)
            return f"{self.const(field.type, 'cls')}()"
        if isinstance(field.default, (bool, int, float, str)) or field.default is None:
            return repr(field.default)
        return self.const(field.default, "default")

    def compile_decoder(self) -> Decoder:
        src = _Source()
        v = self.version
        fname = f"decode_{self.cls.__name__}_v{v}"
        src.add(0, f"def {fname}(buf, pos):")
        targets: list[str] = []
        run: list[tuple[str, Field]] = []  # pending fixed-width fields

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[f.type] for _, f in run)  # type: ignore[index]
            st = struct.Struct(fmt)
            names = ", ".join(t for t, _ in run)
            src.add(1, f"{names}, = {self.const(st, 'st')}.unpack_from(buf, pos)")
            src.add(1, f"pos += {st.size}")
            run.clear()

        tagged: list[tuple[Field, str]] = []
        for i, field in enumerate(self.cls.FIELDS):
            target = f"f{i}"
            targets.append(target)
            present = in_range(v, field.versions)
            is_tagged = field.tag is not None and in_range(v, field.tagged_versions)
            if is_tagged and self.flexible:
                src.add(1, f"{target} = {self.default_expr(field)}")
                tagged.append((field, target))
                continue
            if not present or field.tag is not None:
                src.add(1, f"{target} = {self.default_expr(field)}")
                continue
            if isinstance(field.type, str) and field.type in _FIXED_FORMATS:
                run.append((target, field))
                continue
            flush_run()
            nullable = in_range(v, field.nullable)
            flexible = _field_flexible(field, self.flexible, v)
            for line in self.read_expr(field, field.type, nullable, flexible, target, "buf"):
                src.add(1, line)
        flush_run()
        if self.flexible:
            src.add(1, "ntags, pos = p.read_uvarint(buf, pos)")
            src.add(1, "for _ in range(ntags):")
            src.add(2, "tag, pos = p.read_uvarint(buf, pos)")
            src.add(2, "size, pos = p.read_uvarint(buf, pos)")
            src.add(2, "end = pos + size")
            src.add(2, "if end > len(buf):")
            src.add(3, "raise TruncatedError('tagged field runs past the end of the buffer')")
            first = True
            for field, target in tagged:
                kw = "if" if first else "elif"
                first = False
                src.add(2, f"{kw} tag == {field.tag}:")
                src.add(3, "sub = memoryview(buf)[:end]")
                nullable = in_range(v, field.nullable)
                for line in self.read_expr(field, field.type, nullable, True, target, "sub"):
                    src.add(3, line)
            # Unknown tags are skipped, as the protocol requires.
            src.add(2, "pos = end")
        cls_name = self.const(self.cls, "cls")
        src.add(1, f"return {cls_name}({', '.join(targets)}), pos")
        return self._build(src, fname)

    # ---- encoding

    def write_lines(
        self, field: Field, ftype: Any, nullable: bool, flexible: bool, value: str, out: str
    ) -> list[str]:
        """Lines that append ``value`` (an expression) of ``ftype`` to ``out``."""
        if isinstance(ftype, Array):
            return self.write_array(field, ftype, nullable, flexible, value, out)
        if isinstance(ftype, str):
            return self.write_primitive(field, ftype, nullable, flexible, value, out)
        enc, _dec = self.child(ftype)
        if nullable:
            return [
                f"if {value} is None:",
                f"    {out}.append(0xFF)",
                "else:",
                f"    {out}.append(1)",
                f"    {enc}({out}, {value})",
            ]
        return [
            f"if {value} is None:",
            f"    _fail_null({self.cls.__name__!r}, {field.name!r}, {self.version})",
            f"{enc}({out}, {value})",
        ]

    def write_primitive(
        self, field: Field, ftype: str, nullable: bool, flexible: bool, value: str, out: str
    ) -> list[str]:
        if ftype in _FIXED_FORMATS:
            st = struct.Struct(">" + _FIXED_FORMATS[ftype])
            return [f"{out} += {self.const(st, 'st')}.pack({value})"]
        if ftype == "uuid":
            return [f"{out} += {value}.bytes"]
        null_check = (
            []
            if nullable
            else [
                f"if {value} is None:",
                f"    _fail_null({self.cls.__name__!r}, {field.name!r}, {self.version})",
            ]
        )
        if ftype == "string":
            return [
                *null_check,
                f"p.write_string({out}, {value}, compact={flexible}, nullable={nullable})",
            ]
        # bytes and records
        nullable = nullable or ftype == "records"
        call = f"p.write_bytes({out}, {value}, compact={flexible}, nullable={nullable})"
        return [*null_check, call]

    def write_array(
        self, field: Field, ftype: Array, nullable: bool, flexible: bool, value: str, out: str
    ) -> list[str]:
        null_array = b"\x00" if flexible else b"\xff\xff\xff\xff"
        lines = [f"if {value} is None:"]
        if nullable:
            lines.append(f"    {out} += {null_array!r}")
        else:
            lines.append(f"    _fail_null({self.cls.__name__!r}, {field.name!r}, {self.version})")
        lines.append("else:")
        if flexible:
            lines.append(f"    {out} += _uv(len({value}) + 1)")
        else:
            lines.append(f"    {out} += p.INT32.pack(len({value}))")
        elem = ftype.element
        if isinstance(elem, str) and elem in _FIXED_FORMATS:
            lines.append(f"    _write_fixed_array({out}, {_FIXED_FORMATS[elem]!r}, {value})")
            return lines
        lines.append(f"    for e in {value}:")
        if isinstance(elem, str):
            inner = self.write_primitive(field, elem, False, flexible, "e", out)
        else:
            enc, _dec = self.child(elem)
            inner = [f"{enc}({out}, e)"]
        lines += ["        " + line for line in inner]
        return lines

    def non_default_test(self, field: Field, value: str) -> str:
        """An expression true when ``value`` differs from the field's default."""
        if field.default is EMPTY_LIST:
            return f"({value} is None or len({value}) > 0)"
        if field.default is NEW_STRUCT:
            assert isinstance(field.type, type)
            return f"({value} != {self.const(field.type, 'cls')}())"
        if field.default is None:
            return f"({value} is not None)"
        return f"({value} != {self.default_expr(field)})"

    def compile_encoder(self) -> Encoder:
        src = _Source()
        v = self.version
        fname = f"encode_{self.cls.__name__}_v{v}"
        src.add(0, f"def {fname}(out, o):")
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[f.type] for f in run)  # type: ignore[index]
            st = struct.Struct(fmt)
            args = ", ".join(f"o.{f.name}" for f in run)
            src.add(1, f"out += {self.const(st, 'st')}.pack({args})")
            run.clear()

        tagged: list[Field] = []
        for field in self.cls.FIELDS:
            present = in_range(v, field.versions)
            if field.tag is not None and in_range(v, field.tagged_versions) and self.flexible:
                tagged.append(field)
                continue
            if not present or field.tag is not None:
                if not field.ignorable:
                    src.add(1, f"if {self.non_default_test(field, 'o.' + field.name)}:")
                    src.add(2, f"_fail_absent({self.cls.__name__!r}, {field.name!r}, {v})")
                continue
            if isinstance(field.type, str) and field.type in _FIXED_FORMATS:
                run.append(field)
                continue
            flush_run()
            nullable = in_range(v, field.nullable)
            flexible = _field_flexible(field, self.flexible, v)
            for line in self.write_lines(
                field, field.type, nullable, flexible, f"o.{field.name}", "out"
            ):
                src.add(1, line)
        flush_run()
        if self.flexible:
            if not tagged:
                src.add(1, "out.append(0)")
            else:
                src.add(1, "tagged = []")
                for field in sorted(tagged, key=lambda f: f.tag or 0):
                    nullable = in_range(v, field.nullable)
                    value = f"o.{field.name}"
                    src.add(1, f"if {self.non_default_test(field, value)}:")
                    src.add(2, "t = bytearray()")
                    for line in self.write_lines(field, field.type, nullable, True, value, "t"):
                        src.add(2, line)
                    src.add(2, f"tagged.append(({field.tag}, t))")
                src.add(1, "p.write_tagged_fields(out, tagged)")
        src.add(1, "return None")
        return self._build(src, fname)

    def _build(self, src: _Source, fname: str) -> Callable[..., Any]:
        code = "\n".join(src.lines) + "\n"
        filename = f"<kafkette codec {self.cls.__module__}.{fname}>"
        exec(compile(code, filename, "exec"), self.ns)
        func: Callable[..., Any] = self.ns[fname]
        return func


def _compile(cls: type[Struct], version: int, flexible: bool) -> tuple[Encoder, Decoder]:
    compiler = _Compiler(cls, version, flexible)
    decoder = compiler.compile_decoder()
    encoder = compiler.compile_encoder()
    return encoder, decoder


def generated_source(cls: type[Struct], version: int, flexible: bool) -> str:
    """The source the compiler writes for ``cls`` at ``version`` (for debugging)."""
    compiler = _Compiler(cls, version, flexible)
    lines: list[str] = []
    original = compiler._build

    def capture(src: _Source, fname: str) -> Callable[..., Any]:
        lines.extend(src.lines)
        lines.append("")
        return original(src, fname)

    compiler._build = capture  # type: ignore[method-assign]
    compiler.compile_decoder()
    compiler.compile_encoder()
    return "\n".join(lines)
