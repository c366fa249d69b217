"""The message classes of the generated modules, and the registry of them by API key.

Each generated module (``kafkette/protocol/messages/*.py``) declares attrs
classes for a message and its nested structs, and attaches to each class a
``FIELDS`` table of :class:`~kafkette.protocol.fields.Field` rows: the Kafka
JSON definition, as data. :mod:`kafkette.protocol.codec` turns those tables
into an encoder and a decoder per (class, version) on first use. The field
vocabulary lives in :mod:`kafkette.protocol.fields` (which the codec imports,
so that the codec does not import this module) and is re-exported here for
the generated modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import ClassVar, Generic, TypeVar

from kafkette.protocol import codec as _codec
from kafkette.protocol.errors import UnsupportedVersionError
from kafkette.protocol.fields import (
    EMPTY_LIST,
    MAX_VERSION,
    NEW_STRUCT,
    NO_VERSIONS,
    PRIMITIVE_TYPES,
    ZERO_UUID,
    Array,
    EmptyList,
    ExternalRecords,
    Field,
    FieldType,
    NewStruct,
    RecordsData,
    Struct,
    VersionRange,
    in_range,
)

__all__ = [
    "EMPTY_LIST",
    "MAX_VERSION",
    "NEW_STRUCT",
    "NO_VERSIONS",
    "PRIMITIVE_TYPES",
    "ZERO_UUID",
    "Array",
    "Data",
    "EmptyList",
    "ExternalRecords",
    "Field",
    "FieldType",
    "Header",
    "LazyClassMap",
    "Message",
    "NewStruct",
    "RecordsData",
    "Request",
    "Response",
    "Struct",
    "VersionRange",
    "in_range",
]

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
