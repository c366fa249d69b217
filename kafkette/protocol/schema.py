"""The vocabulary of the generated message modules.

Each generated module (``kafkette/protocol/messages/*.py``) declares attrs
classes for a message and its nested structs, and attaches to each class a
``FIELDS`` table of :class:`Field` rows: the Kafka JSON definition, as data.
:mod:`kafkette.protocol.codec` turns those tables into an encoder and a
decoder per (class, version) on first use.

A version range is a ``(low, high)`` pair, inclusive; ``high`` is
:data:`MAX_VERSION` for an open range ("3+"), and :data:`NO_VERSIONS` is the
empty range ("none").
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import attrs

from kafkette.protocol.errors import UnsupportedVersionError

VersionRange = tuple[int, int]

RecordsData = bytes | bytearray | memoryview
"""What a ``records`` field holds: stored batch bytes, passed through unparsed."""


class ExternalRecords(Protocol):
    """Record data a transport writes itself: a region of a log segment for ``os.sendfile``.

    A broker may put one in a ``records`` field of a response. Encoded with a
    :class:`~kafkette.primitives.PartsWriter` it becomes a separate part of the
    frame, which the TCP listener sends straight from the file; any other
    writer copies :meth:`to_bytes` in.
    """

    def __len__(self) -> int: ...

    def to_bytes(self) -> bytes: ...


ZERO_UUID = uuid.UUID(int=0)

MAX_VERSION = 0x7FFF
NO_VERSIONS: VersionRange = (1, 0)

PRIMITIVE_TYPES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "float64",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)


def in_range(version: int, versions: VersionRange) -> bool:
    return versions[0] <= version <= versions[1]


@attrs.frozen(slots=True)
class Array:
    """An array field's type: ``element`` is a primitive name or a struct class."""

    element: str | type[Struct]


FieldType = str | type["Struct"] | Array


class EmptyList:
    """Default marker of a non-nullable array field: a fresh empty list."""

    def __repr__(self) -> str:
        return "EMPTY_LIST"


class NewStruct:
    """Default marker of a non-nullable struct field: a fresh default instance."""

    def __repr__(self) -> str:
        return "NEW_STRUCT"


EMPTY_LIST: Any = EmptyList()
NEW_STRUCT: Any = NewStruct()


@attrs.frozen(slots=True)
class Field:
    """One field of a struct, as the Kafka message definition states it.

    ``name`` is the Python attribute name; ``kafka_name`` the definition's.
    ``tag`` is set for tagged fields, which live in ``tagged_versions``.
    ``flexible`` overrides the message's flexible versions for this field
    (only the request header's ClientId does so: always a non-compact string).
    """

    name: str
    kafka_name: str
    type: FieldType
    versions: VersionRange
    nullable: VersionRange = NO_VERSIONS
    default: Any = None
    ignorable: bool = False
    tag: int | None = None
    tagged_versions: VersionRange = NO_VERSIONS
    flexible: VersionRange | None = None


class Struct:
    """Base of every generated struct class."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[Field, ...]] = ()


M = TypeVar("M", bound="Message")


class Message(Struct):
    """A top-level message: a request, a response, a header or a data record."""

    __slots__ = ()

    NAME: ClassVar[str]
    VALID_VERSIONS: ClassVar[VersionRange]
    FLEXIBLE_VERSIONS: ClassVar[VersionRange]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return in_range(version, cls.FLEXIBLE_VERSIONS)

    @classmethod
    def check_version(cls, version: int) -> None:
        """Raise :class:`UnsupportedVersionError` unless ``version`` is valid."""
        low, high = cls.VALID_VERSIONS
        if not low <= version <= high:
            raise UnsupportedVersionError(
                f"{cls.NAME} version {version} is outside the valid range {low}-{high}"
            )

    def encode(self, version: int) -> bytes:
        """Encode this message at ``version`` (no size prefix, no header)."""
        out = bytearray()
        _codec.encode_message(self, version, out)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append this message's encoding at ``version`` to ``out``."""
        _codec.encode_message(self, version, out)

    @classmethod
    def decode(cls: type[M], data: bytes | bytearray | memoryview, version: int) -> M:
        """Decode a message of this type at ``version`` from ``data``."""
        return _codec.decode_message(cls, data, 0, version)[0]

    @classmethod
    def decode_from(
        cls: type[M], data: bytes | bytearray | memoryview, pos: int, version: int
    ) -> tuple[M, int]:
        """Decode from ``data[pos:]``; returns the message and the position after it."""
        return _codec.decode_message(cls, data, pos, version)


class Request(Message):
    """A request body; ``RESPONSE`` is its response class."""

    __slots__ = ()

    API_KEY: ClassVar[int]
    RESPONSE: ClassVar[type[Response]]


class Response(Message):
    """A response body."""

    __slots__ = ()

    API_KEY: ClassVar[int]


class Header(Message):
    """A request or response header."""

    __slots__ = ()


class Data(Message):
    """A versioned data structure outside requests (consumer protocol, coordinator records)."""

    __slots__ = ()


C = TypeVar("C", bound=Message)


class LazyClassMap(Mapping[int, type[C]], Generic[C]):
    """API key -> message class, importing each generated module on first access.

    Importing all ~190 generated modules costs about half a second, so the
    registry holds module names and imports only the APIs a program uses.
    """

    def __init__(self, package: str, entries: Mapping[int, tuple[str, str]]) -> None:
        self._package = package
        self._entries = dict(entries)
        self._loaded: dict[int, type[C]] = {}

    def __getitem__(self, key: int) -> type[C]:
        cls = self._loaded.get(key)
        if cls is None:
            module_name, class_name = self._entries[key]
            module = importlib.import_module(f"{self._package}.{module_name}")
            cls = getattr(module, class_name)
            self._loaded[key] = cls
        return cls

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


# Imported last: codec imports this module's names, and Message's methods call codec.
from kafkette.protocol import codec as _codec  # noqa: E402
