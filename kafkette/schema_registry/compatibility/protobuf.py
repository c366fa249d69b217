"""Protobuf schemas for the registry: a small ``.proto`` reader and wire compatibility.

The registry must not need the ``protobuf`` extra, so this reads the parts of
``.proto`` text (proto2 and proto3) that compatibility depends on: the package,
messages (nested), enums, fields (label, type, name, number), ``map<K, V>``
fields and ``oneof`` groups. Options, reserved ranges, extensions and services
are read over. Text it cannot read raises :class:`ProtobufSchemaError` (422).

Compatibility follows the changes Confluent's registry allows (protobuf-provider
``SchemaDiff``, read for the facts), from the writer (the older schema under
BACKWARD) to the reader; they are what the wire format tolerates:

- the package may not change; a message may not be removed (nor added ones matter);
- fields are matched by number: adding or removing one is compatible, except a
  proto2 ``required`` field, and except removing some members of a ``oneof``
  whose others remain; the name may change;
- a field's kind (scalar, message, map) may not change; scalars only within
  one wire class: int32, int64, uint32, uint64, bool and enums; sint32 and
  sint64; string and bytes; fixed32 and sfixed32; fixed64 and sfixed64; float;
  double; ``repeated`` may not be added or dropped on a number;
- a message-typed field keeps its type's name, and that message is compared too;
- fields that were independent may not be moved into one ``oneof``;
- enums may change freely.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

import attrs

SCALAR_CLASSES = {
    "int32": "varint",
    "int64": "varint",
    "uint32": "varint",
    "uint64": "varint",
    "bool": "varint",
    "sint32": "zigzag",
    "sint64": "zigzag",
    "string": "length",
    "bytes": "length",
    "fixed32": "fixed32",
    "sfixed32": "fixed32",
    "fixed64": "fixed64",
    "sfixed64": "fixed64",
    "float": "float",
    "double": "double",
}
_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|(?P<tok>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[A-Za-z_][\w.]*|\.[A-Za-z_][\w.]*|-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|[{}\[\]()<>;=,:+-])""",
    re.DOTALL,
)


class ProtobufSchemaError(ValueError):
    """Text that is not a Protobuf schema this reader understands."""


@attrs.define
class Field:
    name: str
    number: int
    type: str
    label: str  # "", "optional", "required" or "repeated"
    oneof: str | None = None
    key_type: str | None = None  # for map fields


@attrs.define
class Message:
    fullname: str
    fields: dict[int, Field] = attrs.field(factory=dict)


@attrs.frozen
class ProtoFile:
    package: str
    messages: dict[str, Message]
    enums: frozenset[str]


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ProtobufSchemaError(
                f"Invalid schema: unexpected {text[position : position + 20]!r}"
            )
        if match.group("tok") is not None:
            tokens.append(match.group("tok"))
        position = match.end()
    return tokens


def parse(text: str) -> ProtoFile:
    """Read ``.proto`` text (messages, enums, fields) or raise ProtobufSchemaError."""
    reader = _Reader(tokenize(text))
    try:
        reader.file()
    except IndexError:
        raise ProtobufSchemaError("Invalid schema: the text ends early") from None
    if not reader.messages and not reader.enums:
        raise ProtobufSchemaError("Invalid schema: no message or enum")
    return ProtoFile(reader.package, reader.messages, frozenset(reader.enums))


class _Reader:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0
        self.package = ""
        self.messages: dict[str, Message] = {}
        self.enums: set[str] = set()

    def peek(self) -> str:
        return self.tokens[self.at]

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise ProtobufSchemaError(f"Invalid schema: expected {expected!r}, got {token!r}")
        self.at += 1
        return token

    def name(self) -> str:
        token = self.take()
        if not re.match(r"\.?[A-Za-z_][\w.]*\Z", token):
            raise ProtobufSchemaError(f"Invalid schema: expected a name, got {token!r}")
        return token

    def skip_statement(self) -> None:
        """Up to and including the next ';' at this depth, or a whole '{...}' block."""
        depth = 0
        while True:
            token = self.take()
            if token in "{[(<" and len(token) == 1:
                depth += 1
            elif token in "}])>" and len(token) == 1:
                depth -= 1
                if depth == 0 and token == "}":
                    return
            elif token == ";" and depth == 0:
                return

    def file(self) -> None:
        while self.at < len(self.tokens):
            token = self.peek()
            if token == "package":
                self.take()
                self.package = self.name()
                self.take(";")
            elif token == "message":
                self.take()
                self.message(self.package)
            elif token == "enum":
                self.take()
                self.enum(self.package)
            elif token in ("syntax", "edition", "import", "option", "service", "extend"):
                self.skip_statement()
            elif token == ";":
                self.take()
            else:
                raise ProtobufSchemaError(f"Invalid schema: unexpected {token!r}")

    def message(self, scope: str) -> None:
        fullname = f"{scope}.{self.name()}" if scope else self.name()
        if fullname in self.messages:
            raise ProtobufSchemaError(f"Invalid schema: {fullname} is defined twice")
        message = Message(fullname)
        self.messages[fullname] = message
        self.take("{")
        self.body(message, None)

    def body(self, message: Message, oneof: str | None) -> None:
        while (token := self.peek()) != "}":
            if token == "message" and oneof is None:
                self.take()
                self.message(message.fullname)
            elif token == "enum" and oneof is None:
                self.take()
                self.enum(message.fullname)
            elif token == "oneof" and oneof is None:
                self.take()
                group = self.name()
                self.take("{")
                self.body(message, group)
            elif token in ("option", "reserved", "extensions", "extend"):
                self.skip_statement()
            elif token == ";":
                self.take()
            else:
                self.field(message, oneof)
        self.take("}")

    def field(self, message: Message, oneof: str | None) -> None:
        label = ""
        if self.peek() in ("optional", "required", "repeated"):
            label = self.take()
        key_type = None
        if self.peek() == "map":
            self.take()
            self.take("<")
            key_type = self.name()
            self.take(",")
            kind = self.name()
            self.take(">")
        elif self.peek() == "group":
            raise ProtobufSchemaError("Invalid schema: proto2 groups are not supported")
        else:
            kind = self.name()
        name = self.name()
        self.take("=")
        number_text = self.take()
        try:
            number = int(number_text, 0)
        except ValueError:
            raise ProtobufSchemaError(f"Invalid schema: bad field number {number_text!r}") from None
        if not 1 <= number <= 536_870_911:
            raise ProtobufSchemaError(f"Invalid schema: field number {number} out of range")
        if number in message.fields:
            raise ProtobufSchemaError(f"Invalid schema: field number {number} used twice")
        if self.peek() == "[":
            depth = 0
            while True:
                token = self.take()
                depth += token == "["
                depth -= token == "]"
                if depth == 0:
                    break
        self.take(";")
        message.fields[number] = Field(name, number, kind, label, oneof, key_type)

    def enum(self, scope: str) -> None:
        fullname = f"{scope}.{self.name()}" if scope else self.name()
        self.enums.add(fullname)
        self.take("{")
        while self.peek() != "}":
            self.skip_statement()
        self.take("}")


def read_incompatibilities(reader: ProtoFile, writer: ProtoFile) -> list[str]:
    """Why data written with ``writer`` would not be read right with ``reader``."""
    return list(_Comparison(reader, writer).compare())


class _Comparison:
    def __init__(self, reader: ProtoFile, writer: ProtoFile) -> None:
        self.reader, self.writer = reader, writer
        self.compared: set[tuple[str, str]] = set()

    def compare(self) -> Iterator[str]:
        if self.reader.package != self.writer.package:
            yield f"package changed from {self.writer.package!r} to {self.reader.package!r}"
            return
        for fullname, message in self.writer.messages.items():
            if fullname not in self.reader.messages:
                yield f"{fullname}: message removed"
            else:
                yield from self.message(self.reader.messages[fullname], message)

    def resolve(self, proto: ProtoFile, scope: str, name: str) -> tuple[str, str]:
        """(kind, full name) of a field type: scalar, message, enum or unknown (imported)."""
        if name in SCALAR_CLASSES:
            return "scalar", name
        if name.startswith("."):
            candidates = [name[1:]]
        else:
            parts = scope.split(".")
            candidates = [".".join([*parts[:i], name]) for i in range(len(parts), -1, -1)]
        for candidate in candidates:
            candidate = candidate.lstrip(".")
            if candidate in proto.messages:
                return "message", candidate
            if candidate in proto.enums:
                return "enum", candidate
        return "unknown", name.lstrip(".")

    def message(self, reader: Message, writer: Message) -> Iterator[str]:
        if (reader.fullname, writer.fullname) in self.compared:
            return
        self.compared.add((reader.fullname, writer.fullname))
        for number, field in writer.fields.items():
            where = f"{writer.fullname}.{field.name} ({number})"
            read = reader.fields.get(number)
            if read is None:
                if field.label == "required":
                    yield f"{where}: required field removed"
                elif field.oneof is not None and any(
                    other.number in reader.fields
                    for other in writer.fields.values()
                    if other.oneof == field.oneof
                ):
                    yield f"{where}: removed from oneof {field.oneof} whose other fields remain"
                continue
            yield from self.field(reader, read, writer, field, where)
        for number, field in reader.fields.items():
            if number not in writer.fields and field.label == "required":
                yield f"{reader.fullname}.{field.name} ({number}): required field added"
        groups: dict[str, set[str]] = {}
        for number, field in reader.fields.items():
            written = writer.fields.get(number)
            if field.oneof is not None and written is not None:
                origin = f"oneof:{written.oneof}" if written.oneof else f"field:{number}"
                groups.setdefault(field.oneof, set()).add(origin)
        for oneof, origins in sorted(groups.items()):
            if len(origins) > 1:
                yield f"{reader.fullname}: oneof {oneof} joins fields that were independent"

    def field(
        self,
        reader_message: Message,
        read: Field,
        writer_message: Message,
        written: Field,
        where: str,
    ) -> Iterator[str]:
        if (read.key_type is None) != (written.key_type is None):
            yield f"{where}: changed between a map and another kind"
            return
        if read.key_type is not None and written.key_type is not None:
            yield from self.types(
                reader_message, read.key_type, "", writer_message, written.key_type, "", where
            )
        yield from self.types(
            reader_message,
            read.type,
            read.label,
            writer_message,
            written.type,
            written.label,
            where,
        )

    def types(
        self,
        reader_message: Message,
        read_type: str,
        read_label: str,
        writer_message: Message,
        written_type: str,
        written_label: str,
        where: str,
    ) -> Iterator[str]:
        read_kind, read_name = self.resolve(self.reader, reader_message.fullname, read_type)
        written_kind, written_name = self.resolve(
            self.writer, writer_message.fullname, written_type
        )
        numbers = {"scalar", "enum"}
        if read_kind in numbers and written_kind in numbers:
            read_class = SCALAR_CLASSES.get(read_name, "varint")
            written_class = SCALAR_CLASSES.get(written_name, "varint")
            if read_class != written_class:
                yield f"{where}: type {written_type} read as {read_type}"
            elif read_class != "length" and (read_label == "repeated") != (
                written_label == "repeated"
            ):
                yield f"{where}: repeated added or dropped on a number"
            return
        if read_kind != written_kind and "unknown" not in (read_kind, written_kind):
            yield f"{where}: type {written_type} read as {read_type}"
            return
        if read_name.rpartition(".")[2] != written_name.rpartition(".")[2]:
            yield f"{where}: message type {written_name} read as {read_name}"
            return
        if read_kind == written_kind == "message":
            yield from self.message(
                self.reader.messages[read_name], self.writer.messages[written_name]
            )


# -- schemas sent as a base64 FileDescriptorProto (Confluent accepts both forms)

PROTO_TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
    17: "sint32", 18: "sint64",
}  # fmt: skip
"""FieldDescriptorProto.Type numbers of the scalars (10 group, 11 message, 14 enum)."""
LABELS = {1: "optional", 2: "required", 3: "repeated"}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ProtobufSchemaError("Invalid schema: truncated descriptor")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, varint value or length-delimited bytes) of a serialized message."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufSchemaError("Invalid schema: truncated descriptor")
            yield number, data[at : at + size]
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ProtobufSchemaError("Invalid schema: unsupported wire type in descriptor")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufSchemaError("Invalid schema: bad descriptor")
    return value.decode("utf-8", "replace")


def parse_descriptor(data: bytes) -> ProtoFile:
    """Read a serialized FileDescriptorProto (package, messages, enums, fields)."""
    package = ""
    messages: dict[str, Message] = {}
    enums: set[str] = set()
    maps: dict[str, tuple[str, str]] = {}  # map entry message -> (key type, value type)

    def message(raw: bytes, scope: str) -> None:
        parts = list(_fields(raw))
        name = next((_text(v) for n, v in parts if n == 1), "")
        fullname = f"{scope}.{name}" if scope else name
        oneofs = [
            next((_text(v) for n, v in _fields(raw_oneof) if n == 1), "")
            for number, raw_oneof in parts
            if number == 8 and isinstance(raw_oneof, bytes)
        ]
        is_map_entry = any(
            n == 7 and isinstance(v, bytes) and (7, 1) in list(_fields(v)) for n, v in parts
        )
        result = Message(fullname)
        for number, value in parts:
            if number == 2 and isinstance(value, bytes):
                fields = dict(_fields(value))
                kind = fields.get(5, 0)
                type_name = _text(fields.get(6, b"")) if 6 in fields else ""
                proto3_optional = fields.get(17, 0)
                index = fields.get(9)
                oneof = (
                    oneofs[index]
                    if isinstance(index, int) and index < len(oneofs) and not proto3_optional
                    else None
                )
                result.fields[_int(fields.get(3))] = Field(
                    _text(fields.get(1, b"")),
                    _int(fields.get(3)),
                    PROTO_TYPES.get(_int(kind), type_name),
                    LABELS.get(_int(fields.get(4, 1)), ""),
                    oneof,
                )
            elif number == 3 and isinstance(value, bytes):
                message(value, fullname)
            elif number == 4 and isinstance(value, bytes):
                enums.add(f"{fullname}.{next((_text(v) for n, v in _fields(value) if n == 1), '')}")
        if is_map_entry:
            key = result.fields.get(1)
            val = result.fields.get(2)
            if key is not None and val is not None:
                maps[fullname] = (key.type, val.type)
        messages[fullname] = result

    for number, value in _fields(data):
        if number == 2:
            package = _text(value)
        elif number == 4 and isinstance(value, bytes):
            message(value, package)
        elif number == 5 and isinstance(value, bytes):
            name = next((_text(v) for n, v in _fields(value) if n == 1), "")
            enums.add(f"{package}.{name}" if package else name)
    # a map field is a repeated field of its entry message: shown as map<K, V>
    for fullname, entry in maps.items():
        messages.pop(fullname, None)
        for owner in messages.values():
            for field in owner.fields.values():
                if field.type.lstrip(".") == fullname:
                    field.key_type, field.type = entry
                    field.label = ""
    if not messages and not enums:
        raise ProtobufSchemaError("Invalid schema: no message or enum")
    return ProtoFile(package, messages, frozenset(enums))


def _int(value: int | bytes | None) -> int:
    if not isinstance(value, int):
        raise ProtobufSchemaError("Invalid schema: bad descriptor")
    return value


def parse_text_or_descriptor(text: str) -> ProtoFile:
    """``.proto`` text, or a FileDescriptorProto in base64 (as clients may send it)."""
    stripped = text.strip()
    if stripped and re.fullmatch(r"[A-Za-z0-9+/=\s]+", stripped) and " " not in stripped:
        try:
            data = base64.b64decode(stripped, validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if data:
            return parse_descriptor(data)
    return parse(text)
