"""The record as readers hand it out, whatever the batch format it came from."""

from __future__ import annotations

from typing import NamedTuple

Header = tuple[str, "bytes | None"]
"""A record header: a UTF-8 key and a value that may be null."""


class Record(NamedTuple):
    """One record of a batch, with its absolute offset and effective timestamp.

    A tuple subclass rather than an attrs class: readers create millions of
    these, and tuple creation is the cheapest object construction Python has.
    For a LogAppendTime batch ``timestamp`` is the batch's append time; for a
    magic 0 message it is -1. ``headers`` is empty for magic 0 and 1.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
