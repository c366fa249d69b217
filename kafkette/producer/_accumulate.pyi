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

def bind(
    accumulator: type, batch: type, future: type, encode_record: Callable[..., Any], /
) -> None:
    """Find the slots ``append_open`` uses in these classes; raises if one is missing."""
