"""Types of the optional C accelerator (see _accumulate.c)."""

from collections.abc import Callable
from typing import Any

def append_open(
    accumulator: Any,
    topic: str,
    partition: int,
    timestamp: int,
    key: object,
    value: object,
    /,
) -> Any:
    """The record's RecordFuture once in its partition's open batch, or None (nothing changed)."""

def send_plain(core: Any, topic: str, value: object, key: object, timestamp: int | None, /) -> Any:
    """ProducerCore.append_plain: the record's RecordFuture, or None for the general path."""

def bind_core(core: type, keyed_partition: Callable[[bytes, int], int], /) -> None:
    """Find the slots ``send_plain`` uses in ProducerCore; raises if one is missing."""

def bind(
    accumulator: type, batch: type, future: type, encode_record: Callable[..., Any], /
) -> None:
    """Find the slots ``append_open`` uses in these classes; raises if one is missing."""
