"""The vocabulary of a message definition: fields, their types and version ranges.

A version range is a ``(low, high)`` pair, inclusive; ``high`` is
:data:`MAX_VERSION` for an open range ("3+"), and :data:`NO_VERSIONS` is the
empty range ("none"). :mod:`kafkette.protocol.codec` compiles a struct's
``FIELDS`` into an encoder and a decoder; :mod:`kafkette.protocol.schema`
adds the message classes on top. This module imports neither.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Protocol

import attrs

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
