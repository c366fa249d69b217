"""Types of the optional C accelerator (see _speedups.c)."""

from collections.abc import Callable
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

def take_records(
    data: bytes | bytearray | memoryview,
    cursor: int,
    position: int,
    limit: int,
    record_type: type[tuple[Any, ...]],
    prefix: tuple[str | int | None, ...],
    timestamp_types: tuple[int, int],
    crc32c: Callable[[memoryview], int] | None,
    transactional_below: int,
    skip_control: bool,
    /,
) -> tuple[list[Any], int, int]:
    """The consumer's records of the whole uncompressed batches from byte ``cursor`` on,
    until a batch Python must read; and the cursor and position reached."""

def fetch_end_offset(data: bytes | bytearray | memoryview, /) -> int | None:
    """The offset after the last complete entry of a fetch's records, or None."""
