"""Selection of the optional C accelerator for the producer's common append.

``append_open`` and ``send_plain`` are the functions of
:mod:`kafkette.producer._accumulate` when the extension was built, the record
encoder's extension too, and the environment variable
``KAFKETTE_NO_EXTENSIONS`` is not ``1``; else None (the pure-Python
``RecordAccumulator.append_plain`` and ``ProducerCore.append_plain`` then do
all the work). The accumulator and core modules bind them to their classes at
import.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kafkette.protocol.extensions import load_extension
from kafkette.protocol.records import speedups as record_speedups

if TYPE_CHECKING:
    from kafkette.producer.futures import RecordFuture

AppendOpen = Callable[[Any, str, int, int, Any, Any], "RecordFuture | None"]
SendPlain = Callable[[Any, str, Any, Any, "int | None"], "RecordFuture | None"]
Bind = Callable[[type, type, type, Callable[..., Any]], None]


def _load() -> ModuleType | None:
    if record_speedups.encode_record is None:
        return None
    return load_extension("kafkette.producer._accumulate")


_module = _load()

append_open: AppendOpen | None = None if _module is None else _module.append_open
"""``(accumulator, topic, partition, timestamp, key, value)``: the
record's RecordFuture once added to the partition's open batch, or None (and
nothing changed) when ``RecordAccumulator.append_plain`` must take it."""

send_plain: SendPlain | None = None if _module is None else _module.send_plain
"""``(core, topic, value, key, timestamp)``: ``ProducerCore.append_plain``."""

bind_core: Callable[[type, Callable[[bytes, int], int]], None] | None = (
    None if _module is None else _module.bind_core
)
"""``(ProducerCore, keyed_partition)``: tell ``send_plain`` the core's slots."""

bind: Bind | None = None if _module is None else _module.bind
"""``(RecordAccumulator, ProducerBatch, RecordFuture, encode_record)``: tell
``append_open`` the slots of these classes (raises if one is missing)."""
