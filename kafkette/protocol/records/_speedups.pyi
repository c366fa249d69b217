"""Types of the optional C accelerator (see _speedups.c)."""

from typing import Any

def parse_records(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None,
    record_type: type[tuple[Any, ...]],
    prefix: tuple[str | int | None, ...] = (),
    suffix: tuple[str | int | None, ...] = (),
    /,
) -> list[Any] | None:
    """The records of a magic 2 records section, each ``(*prefix, offset, timestamp, key,
    value, headers, *suffix)``, or None for data not well formed."""

def encode_record(
    timestamp_delta: int, offset_delta: int, key: object, value: object, /
) -> bytes | None:
    """A record without headers, length prefix included, or None to leave it to Python."""
