"""Encoders and decoders compiled from the message tables.

For each (struct class, version) this module writes the source of two
straight-line Python functions from the class's ``FIELDS`` table and compiles
them once, on first use:

- ``decode(buf, pos) -> (obj, pos)`` reads every field present at the
  version in wire order, fills absent fields with their defaults and builds
  the object (storing the fields on a bare instance when the attrs class's
  ``__init__`` would do nothing more, else with one positional call);
- ``encode(out, obj)`` appends the fields present at the version, and rejects
  a non-default value in a field the version cannot carry (as Kafka's own
  generated code does), unless the field is ignorable.

Runs of fixed-width fields are read and written with one ``struct`` call.
Lengths, strings, bytes, uuids and tagged-field sections are read and written
inline: the one-byte unsigned varint (a length under 128, an empty tagged
section) takes no function call, longer varints go through
:func:`~kafkette.protocol.primitives.read_uvarint`. Only the tables (which are
generated from Kafka's definitions, never from input) reach the compiled
source. Functions are named after the class and version so that tracebacks
stay readable.

The compiled decoders let the standard library report a short buffer
(``struct.error``, ``IndexError`` on a byte past the end) and bad UTF-8
(``UnicodeDecodeError``); every entry point translates them with
:func:`decode_error` into :class:`TruncatedError` or
:class:`InvalidStringError` naming the message and version, and re-raises
the compiled code's own :class:`TruncatedError` so that it names them too.
Encoding errors (a wrong type, an out-of-range integer) become
:class:`EncodeError` (:data:`ENCODE_FAILURES` lists what is translated).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import attrs

from kafkette.protocol import primitives as p
from kafkette.protocol.errors import (
    DecodeError,
    EncodeError,
    InvalidLengthError,
    InvalidStringError,
    TruncatedError,
    UnsupportedVersionError,
)
from kafkette.protocol.fields import (
    EMPTY_LIST,
    NEW_STRUCT,
    Array,
    Field,
    Struct,
    in_range,
)

if TYPE_CHECKING:
    from kafkette.protocol.schema import Message

Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[bytearray, Any], None]

M = TypeVar("M", bound="Message")

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

DECODE_FAILURES = (struct.error, IndexError, UnicodeDecodeError, TruncatedError)
"""What :func:`decode_error` translates: the standard library's errors on malformed
input, and the compiled code's own :class:`TruncatedError` (to name the message)."""

ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)
"""What a compiled encoder raises on a bad value besides :class:`ProtocolError`."""

_codecs: dict[tuple[type[Struct], int, bool], tuple[Encoder, Decoder]] = {}
# (message class, version) -> compiled function, for versions already checked valid
_message_decoders: dict[tuple[type[Message], int], Decoder] = {}
_message_encoders: dict[tuple[type[Message], int], Encoder] = {}


# -- public entry points ----------------------------------------------------------


def decode_error(exc: Exception, what: str) -> DecodeError:
    """The protocol error for an exception a compiled decoder of ``what`` let through.

    ``what`` names the message and version (``"ProduceResponse v11"``).
    """
    if isinstance(exc, UnicodeDecodeError):
        return InvalidStringError(f"{what}: string is not valid UTF-8: {exc.reason}")
    return TruncatedError(f"{what} is truncated: {exc}")


def encode_error(exc: Exception, what: str) -> EncodeError:
    """The protocol error for an exception a compiled encoder of ``what`` let through."""
    return EncodeError(f"cannot encode {what}: {exc}")


def message_decoder(cls: type[M], version: int) -> Callable[[Any, int], tuple[M, int]]:
    """The compiled decoder of message ``cls`` at ``version``, checked valid once.

    It raises the standard library's exceptions on malformed input (see
    :data:`DECODE_FAILURES`); translate them with :func:`decode_error`.
    """
    key = (cls, version)
    decoder = _message_decoders.get(key)
    if decoder is None:
        cls.check_version(version)
        decoder = codec_for(cls, version, cls.is_flexible(version))[1]
        _message_decoders[key] = decoder
    return decoder


def message_encoder(cls: type[Message], version: int) -> Encoder:
    """The compiled encoder of message ``cls`` at ``version``, checked valid once.

    It raises the standard library's exceptions on bad values (see
    :data:`ENCODE_FAILURES`); translate them with :func:`encode_error`.
    """
    key = (cls, version)
    encoder = _message_encoders.get(key)
    if encoder is None:
        cls.check_version(version)
        encoder = codec_for(cls, version, cls.is_flexible(version))[0]
        _message_encoders[key] = encoder
    return encoder


def encode_message(msg: Message, version: int, out: bytearray) -> None:
    """Append ``msg`` encoded at ``version`` to ``out``."""
    cls = type(msg)
    encoder = _message_encoders.get((cls, version)) or message_encoder(cls, version)
    try:
        encoder(out, msg)
    except ENCODE_FAILURES as exc:
        raise encode_error(exc, f"{cls.NAME} v{version}") from exc


def decode_message(
    cls: type[M], data: bytes | bytearray | memoryview, pos: int, version: int
) -> tuple[M, int]:
    """Decode a ``cls`` at ``version`` from ``data[pos:]``."""
    decoder = _message_decoders.get((cls, version)) or message_decoder(cls, version)
    try:
        obj, pos = decoder(data, pos)
    except DECODE_FAILURES as exc:
        raise decode_error(exc, f"{cls.NAME} v{version}") from exc
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


def _fail_absent(cls_name: str, field: str, version: int) -> NoReturn:
    raise UnsupportedVersionError(
        f"{cls_name}.{field} has a non-default value but cannot be sent at version {version}"
    )


def _fail_null(cls_name: str, field: str, version: int) -> NoReturn:
    raise EncodeError(f"{cls_name}.{field} is not nullable at version {version}")


def _fail_span(what: str, length: int, buf: Any, pos: int) -> NoReturn:
    raise TruncatedError(
        f"{what} of {length} bytes runs past the end of the buffer ({len(buf) - pos} available)"
    )


def _fail_count(count: int, buf: Any, pos: int) -> NoReturn:
    raise InvalidLengthError(
        f"array of {count} elements cannot fit in {len(buf) - pos} remaining bytes"
    )


def _fail_long_string(length: int) -> NoReturn:
    raise EncodeError(f"string of {length} bytes exceeds the int16 length limit")


def _read_null_marker(buf: Any, pos: int) -> tuple[bool, int]:
    """Read a nullable struct's presence byte: True when present."""
    marker = buf[pos]
    if marker == 0xFF:
        return False, pos + 1
    if marker != 1:
        raise InvalidLengthError(f"invalid nullable struct marker {marker}")
    return True, pos + 1


def _skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged-field section none of whose tags is known; returns the position after."""
    count, pos = p.read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise TruncatedError("tagged field runs past the end of the buffer")
        pos = end
    return pos


def _write_fixed_array(out: bytearray, fmt: str, values: list[Any]) -> None:
    out += struct.pack(f">{len(values)}{fmt}", *values)


_HELPERS: dict[str, Any] = {
    "p": p,
    "InvalidLengthError": InvalidLengthError,
    "TruncatedError": TruncatedError,
    "_fail_absent": _fail_absent,
    "_fail_null": _fail_null,
    "_fail_span": _fail_span,
    "_fail_count": _fail_count,
    "_fail_long_string": _fail_long_string,
    "_read_null_marker": _read_null_marker,
    "_skip_tagged_fields": _skip_tagged_fields,
    "_write_fixed_array": _write_fixed_array,
    "_unpack_from": struct.unpack_from,
    "_new": object.__new__,
    "_uuid": p.uuid_from_bytes,
    "_ruv": p.read_uvarint,
    "_uv": p.encode_uvarint,
    "_I16": p.INT16,
    "_I32": p.INT32,
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


_SMALL_ARRAY = 16


def _fixed_array_structs(fmt: str) -> tuple[struct.Struct, ...]:
    """Structs reading 0 to ``_SMALL_ARRAY - 1`` values of ``fmt`` (a format string per
    count costs more than the read itself)."""
    return tuple(struct.Struct(f">{count}{fmt}") for count in range(_SMALL_ARRAY))


def _builds_field_by_field(cls: type[Struct]) -> bool:
    """Whether a decoder may build ``cls`` by storing its fields on a bare instance.

    True for an attrs class whose ``__init__`` only stores its arguments (no
    validators, converters, setattr hooks or init hooks), which the generated
    classes are: calling that ``__init__`` costs more than the stores themselves.
    """
    names = [f.name for f in cls.FIELDS]
    if not attrs.has(cls) or cls.__setattr__ is not object.__setattr__:
        return False
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        return False
    fields = attrs.fields(cls)
    if [f.name for f in fields] != names:
        return False
    return all(
        f.init and f.validator is None and f.converter is None and f.on_setattr is None
        for f in fields
    )


@attrs.define(slots=True)
class _EqProbe:
    a: int = 0


_ATTRS_NE_CODE = _EqProbe.__ne__.__code__


def _has_attrs_eq(cls: type[Struct]) -> bool:
    """Whether ``cls`` compares as attrs' generated ``__eq__``/``__ne__`` do, field by field
    in table order (so a compiled comparison may do the same inline)."""
    if not _builds_field_by_field(cls):
        return False
    eq, ne = getattr(cls.__eq__, "__code__", None), getattr(cls.__ne__, "__code__", None)
    if eq is None or not eq.co_filename.startswith("<attrs generated") or ne is not _ATTRS_NE_CODE:
        return False
    return all(f.eq and f.eq_key is None for f in attrs.fields(cls))  # type: ignore[arg-type]


def _inline_default(cls: type[Struct]) -> list[tuple[str, Any]] | None:
    """(field, default) of each field of ``cls`` when a default instance can be built inline.

    None unless the class builds field by field and every default is a literal, an empty
    list or an immutable value; the result is checked against the constructor's.
    """
    if not _builds_field_by_field(cls):
        return None
    instance = cls()
    recipe: list[tuple[str, Any]] = []
    for field in cls.FIELDS:
        value = getattr(instance, field.name)
        immutable = isinstance(value, (bool, int, float, str, uuid.UUID)) or value is None
        if not (immutable or (type(value) is list and not value)):
            return None
        if field.default is not EMPTY_LIST and value != field.default:
            return None
        recipe.append((field.name, value))
    return recipe


def _indent(lines: list[str], levels: int = 1) -> list[str]:
    return ["    " * levels + line for line in lines]


def _read_uvarint_lines(buf: str) -> list[str]:
    """Lines that read an unsigned varint at ``pos`` into ``n``, inline when one byte long."""
    return [
        f"n = {buf}[pos]",
        "if n < 0x80:",
        "    pos += 1",
        "else:",
        f"    n, pos = _ruv({buf}, pos)",
    ]


def _write_uvarint_lines(expr: str, out: str) -> list[str]:
    """Lines that append the unsigned varint ``expr``, inline when one byte long."""
    return [
        f"n = {expr}",
        "if n < 0x80:",
        f"    {out}.append(n)",
        "else:",
        f"    {out} += _uv(n)",
    ]


# What a length-prefixed primitive is called in errors, and how its value is built from
# the bytes [pos:end] of buf.
_SPAN_NAMES = {"string": "string", "bytes": "bytes", "records": "records"}
_NULL_MESSAGES = {
    # (type, compact) -> message for a null where the field is not nullable
    ("string", True): "null where a non-nullable compact string is required",
    ("bytes", True): "null where non-nullable compact bytes are required",
}


def _span_value(ftype: str, buf: str) -> str:
    if ftype == "string":
        return f"str({buf}[pos:end], 'utf-8')"
    if ftype == "bytes":
        return f"bytes({buf}[pos:end])"
    return f"memoryview({buf})[pos:end]"  # records: a zero-copy view


class _Source:
    """Accumulates the lines of one generated function."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def extend(self, indent: int, lines: list[str]) -> None:
        for line in lines:
            self.add(indent, line)


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

    def fail_null(self, field: Field) -> str:
        return f"_fail_null({self.cls.__name__!r}, {field.name!r}, {self.version})"

    # ---- decoding

    def read_value(
        self, field: Field, ftype: Any, nullable: bool, flexible: bool, target: str, buf: str
    ) -> list[str]:
        """Lines that read one value of ``ftype`` from ``buf`` at ``pos`` into ``target``.

        They may use the locals ``n`` and ``end``.
        """
        if isinstance(ftype, Array):
            return self.read_array(field, ftype, nullable, flexible, target, buf)
        if isinstance(ftype, str):
            return self.read_primitive(ftype, nullable, flexible, target, buf)
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

    def read_primitive(
        self, ftype: str, nullable: bool, flexible: bool, target: str, buf: str
    ) -> list[str]:
        if ftype in _FIXED_FORMATS:
            st = struct.Struct(">" + _FIXED_FORMATS[ftype])
            return [
                f"{target}, = {self.const(st, 'st')}.unpack_from({buf}, pos)",
                f"pos += {st.size}",
            ]
        if ftype == "uuid":
            return [
                "end = pos + 16",
                f"if end > len({buf}):",
                "    raise TruncatedError('uuid runs past the end of the buffer')",
                f"{target} = _uuid({buf}[pos:end])",
                "pos = end",
            ]
        if ftype not in _SPAN_NAMES:
            raise AssertionError(f"unknown primitive type {ftype}")
        nullable = nullable or ftype == "records"
        what = _SPAN_NAMES[ftype]
        if flexible:
            if nullable:
                on_null = [f"{target} = None"]
            else:
                on_null = [f"raise InvalidLengthError({_NULL_MESSAGES[ftype, True]!r})"]
            return [
                *_read_uvarint_lines(buf),
                "if n == 0:",
                *_indent(on_null),
                "else:",
                "    end = pos + n - 1",
                f"    if end > len({buf}):",
                f"        _fail_span({what!r}, n - 1, {buf}, pos)",
                f"    {target} = {_span_value(ftype, buf)}",
                "    pos = end",
            ]
        length = "_I16" if ftype == "string" else "_I32"
        if nullable:
            invalid = f"invalid {what} length {{n}}"
            on_negative = [
                "if n != -1:",
                f"    raise InvalidLengthError(f{invalid!r})",
                f"{target} = None",
            ]
        else:
            a = "a " if ftype == "string" else ""
            negative = f"negative length {{n}} for {a}non-nullable {what}"
            on_negative = [f"raise InvalidLengthError(f{negative!r})"]
        return [
            f"n, = {length}.unpack_from({buf}, pos)",
            f"pos += {2 if ftype == 'string' else 4}",
            "if n < 0:",
            *_indent(on_negative),
            "else:",
            "    end = pos + n",
            f"    if end > len({buf}):",
            f"        _fail_span({what!r}, n, {buf}, pos)",
            f"    {target} = {_span_value(ftype, buf)}",
            "    pos = end",
        ]

    def read_array(
        self, field: Field, ftype: Array, nullable: bool, flexible: bool, target: str, buf: str
    ) -> list[str]:
        elem = ftype.element
        min_size = _min_size(elem, flexible, self.version)
        if nullable:
            on_null = [f"{target} = None"]
        else:
            message = f"null array for non-nullable field {field.kafka_name}"
            on_null = [f"raise InvalidLengthError({message!r})"]
        if flexible:
            lines = [*_read_uvarint_lines(buf), "if n == 0:", *_indent(on_null), "else:"]
            lines.append("    n -= 1")
        else:
            lines = [
                f"n, = _I32.unpack_from({buf}, pos)",
                "pos += 4",
                "if n < 0:",
                "    if n != -1:",
                "        raise InvalidLengthError(f'invalid array length {n}')",
                *_indent(on_null),
                "else:",
            ]
        # A count that cannot fit in the bytes left is refused before any element is read,
        # so a forged count cannot make a decoder loop or allocate.
        lines += [
            f"    if n * {min_size} > len({buf}) - pos:",
            f"        _fail_count(n, {buf}, pos)",
        ]
        if isinstance(elem, str) and elem in _FIXED_FORMATS:
            fmt = _FIXED_FORMATS[elem]
            table = self.const(_fixed_array_structs(fmt), "arrays")
            # the count check guarantees the bytes are there
            lines += [
                f"    if n < {_SMALL_ARRAY}:",
                f"        {target} = [*{table}[n].unpack_from({buf}, pos)]",
                "    else:",
                f"        {target} = list(_unpack_from(f'>{{n}}{fmt}', {buf}, pos))",
                f"    pos += n * {_FIXED_SIZES[elem]}",
            ]
            return lines
        if isinstance(elem, str):
            inner = self.read_primitive(elem, False, flexible, "e", buf)
        else:
            _enc, dec = self.child(elem)
            inner = [f"e, pos = {dec}({buf}, pos)"]
            # one element (one topic, one partition) is the common case: no loop
            lines += [
                "    if n == 1:",
                f"        e, pos = {dec}({buf}, pos)",
                f"        {target} = [e]",
                "    else:",
            ]
            loop = [
                f"    {target} = []",
                "    for _ in range(n):",
                *_indent(inner, 2),
                f"        {target}.append(e)",
            ]
            return lines + _indent(loop)
        lines += [
            f"    {target} = []",
            "    for _ in range(n):",
            *_indent(inner, 2),
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

    def default_lines(self, field: Field, target: str) -> list[str]:
        """Lines that set ``target`` to a fresh default value of ``field``.

        A default struct whose fields all have simple defaults is built inline,
        field by field, rather than by its constructor.
        """
        cls = field.type
        if field.default is not NEW_STRUCT or not isinstance(cls, type):
            return [f"{target} = {self.default_expr(field)}"]
        recipe = _inline_default(cls)
        if recipe is None:
            return [f"{target} = {self.default_expr(field)}"]
        lines = [f"{target} = _new({self.const(cls, 'cls')})"]
        for name, value in recipe:
            expr = "[]" if type(value) is list else self._literal(value)  # a fresh list each
            lines.append(f"{target}.{name} = {expr}")
        return lines

    def _literal(self, value: Any) -> str:
        """An expression for ``value``: its repr for a plain literal, else a constant."""
        if type(value) in (bool, int, str) or value is None:
            return repr(value)
        return self.const(value, "default")

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
                src.extend(1, self.default_lines(field, target))
                tagged.append((field, target))
                continue
            if not present or field.tag is not None:
                src.extend(1, self.default_lines(field, target))
                continue
            if isinstance(field.type, str) and field.type in _FIXED_FORMATS:
                run.append((target, field))
                continue
            flush_run()
            nullable = in_range(v, field.nullable)
            flexible = _field_flexible(field, self.flexible, v)
            src.extend(1, self.read_value(field, field.type, nullable, flexible, target, "buf"))
        flush_run()
        if self.flexible:
            # An empty tagged section (one zero byte) is by far the most common.
            src.add(1, "if buf[pos] == 0:")
            src.add(2, "pos += 1")
            src.add(1, "else:")
            if not tagged:
                src.add(2, "pos = _skip_tagged_fields(buf, pos)")
            else:
                src.add(2, "ntags, pos = _ruv(buf, pos)")
                src.add(2, "for _ in range(ntags):")
                src.add(3, "tag, pos = _ruv(buf, pos)")
                src.add(3, "size, pos = _ruv(buf, pos)")
                src.add(3, "tag_end = pos + size")
                src.add(3, "if tag_end > len(buf):")
                src.add(4, "raise TruncatedError('tagged field runs past the end of the buffer')")
                first = True
                for field, target in tagged:
                    kw = "if" if first else "elif"
                    first = False
                    src.add(3, f"{kw} tag == {field.tag}:")
                    src.add(4, "sub = memoryview(buf)[:tag_end]")
                    nullable = in_range(v, field.nullable)
                    src.extend(4, self.read_value(field, field.type, nullable, True, target, "sub"))
                # Unknown tags are skipped, as the protocol requires.
                src.add(3, "pos = tag_end")
        cls_name = self.const(self.cls, "cls")
        if _builds_field_by_field(self.cls):
            src.add(1, f"o = _new({cls_name})")
            for field, target in zip(self.cls.FIELDS, targets, strict=True):
                src.add(1, f"o.{field.name} = {target}")
            src.add(1, "return o, pos")
        else:
            src.add(1, f"return {cls_name}({', '.join(targets)}), pos")
        return self._build(src, fname)

    # ---- encoding

    def write_value(
        self, field: Field, ftype: Any, nullable: bool, flexible: bool, value: str, out: str
    ) -> list[str]:
        """Lines that append ``value`` (an expression) of ``ftype`` to ``out``.

        They may use the locals ``v``, ``s``, ``n`` and ``a``.
        """
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
            f"    {self.fail_null(field)}",
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
        if ftype not in _SPAN_NAMES:
            raise AssertionError(f"unknown primitive type {ftype}")
        null_marker = b"\x00" if flexible else (b"\xff\xff" if ftype == "string" else b"\xff" * 4)
        on_null = f"{out} += {null_marker!r}" if nullable else self.fail_null(field)
        if ftype == "string":
            if flexible:
                length = _write_uvarint_lines("len(s) + 1", out)
            else:
                length = [
                    "if len(s) > 0x7FFF:",
                    "    _fail_long_string(len(s))",
                    f"{out} += _I16.pack(len(s))",
                ]
            return [
                f"v = {value}",
                "if v is None:",
                f"    {on_null}",
                "else:",
                "    s = v.encode('utf-8')",
                *_indent(length),
                f"    {out} += s",
            ]
        # bytes and records: plain bytes inline; views and external record regions
        # (which a PartsWriter keeps as parts of their own) through write_bytes
        if flexible:
            length = _write_uvarint_lines("len(v) + 1", out)
        else:
            length = [f"{out} += _I32.pack(len(v))"]
        write_any = (
            f"p.write_bytes({out}, v, compact={flexible}, "
            f"nullable={nullable or ftype == 'records'})"
        )
        return [
            f"v = {value}",
            "if v is None:",
            f"    {on_null}",
            "elif v.__class__ is bytes:",
            *_indent(length),
            f"    {out} += v",
            "else:",
            f"    {write_any}",
        ]

    def write_array(
        self, field: Field, ftype: Array, nullable: bool, flexible: bool, value: str, out: str
    ) -> list[str]:
        null_array = b"\x00" if flexible else b"\xff\xff\xff\xff"
        lines = [f"a = {value}", "if a is None:"]
        if nullable:
            lines.append(f"    {out} += {null_array!r}")
        else:
            lines.append(f"    {self.fail_null(field)}")
        lines.append("else:")
        if flexible:
            lines += _indent(_write_uvarint_lines("len(a) + 1", out))
        else:
            lines.append(f"    {out} += _I32.pack(len(a))")
        elem = ftype.element
        if isinstance(elem, str) and elem in _FIXED_FORMATS:
            lines.append(f"    _write_fixed_array({out}, {_FIXED_FORMATS[elem]!r}, a)")
            return lines
        lines.append("    for e in a:")
        if isinstance(elem, str):
            inner = self.write_primitive(field, elem, False, flexible, "e", out)
        else:
            enc, _dec = self.child(elem)
            inner = [f"{enc}({out}, e)"]
        lines += _indent(inner, 2)
        return lines

    def non_default_test(self, field: Field, value: str) -> str:
        """An expression true when ``value`` differs from the field's default."""
        if field.default is EMPTY_LIST:
            return f"({value} is None or len({value}) > 0)"
        if field.default is NEW_STRUCT:
            assert isinstance(field.type, type)
            # one default instance, compared with and never handed out
            default = field.type()
            if not _has_attrs_eq(field.type):
                return f"({value} != {self.const(default, 'default')})"
            # attrs' __ne__, inline: another class, or a field that differs
            cls = self.const(field.type, "cls")
            same = " and ".join(
                f"{value}.{f.name} == {self._literal(getattr(default, f.name))}"
                for f in field.type.FIELDS
            )
            return f"({value}.__class__ is not {cls} or not ({same or 'True'}))"
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
            src.extend(
                1, self.write_value(field, field.type, nullable, flexible, f"o.{field.name}", "out")
            )
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
                    src.extend(2, self.write_value(field, field.type, nullable, True, value, "t"))
                    src.add(2, f"tagged.append(({field.tag}, t))")
                src.add(1, "if tagged:")
                src.add(2, "p.write_tagged_fields(out, tagged)")
                src.add(1, "else:")
                src.add(2, "out.append(0)")
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
