"""Selection of the optional C accelerator for the producer's common append.

When :mod:`kafkette.producer._accumulate` was built, the record encoder's
extension too, and the environment variable ``KAFKETTE_NO_EXTENSIONS`` is not
``1``: ``BatchState`` and ``AccumulatorState`` are its C types (the bases of
``ProducerBatch`` and ``RecordAccumulator``, which keep the append's state in
C), and ``append_open`` and ``send_plain`` its functions. Otherwise the classes
of :mod:`kafkette.producer.append_state` and None (the pure-Python
``RecordAccumulator.append_plain`` and ``ProducerCore.append_plain`` then do all
the work).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kafkette.producer import append_state
from kafkette.producer.futures import RecordFuture
from kafkette.protocol.extensions import load_extension
from kafkette.protocol.records import speedups as record_speedups

AppendOpen = Callable[[Any, str, int, int, Any, Any], "RecordFuture | None"]
SendPlain = Callable[[Any, str, Any, Any, "int | None"], "RecordFuture | None"]


def _load() -> ModuleType | None:
    encode = record_speedups.encode_record
    if encode is None:
        return None
    module = load_extension("kafkette.producer._accumulate")
    if module is not None:
        module.bind(RecordFuture, encode)
    return module


_module = _load()

if TYPE_CHECKING:
    BatchState = append_state.BatchState
    AccumulatorState = append_state.AccumulatorState
else:
    BatchState = append_state.BatchState if _module is None else _module.BatchState
    AccumulatorState = (
        append_state.AccumulatorState if _module is None else _module.AccumulatorState
    )

append_open: AppendOpen | None = None if _module is None else _module.AccumulatorState.append_open
"""``(accumulator, topic, partition, timestamp, key, value)``: the record's
RecordFuture once added to the partition's open batch, or None (and nothing
changed) when ``RecordAccumulator.append_plain`` must take it."""

send_plain: SendPlain | None = None if _module is None else _module.send_plain
"""``(core, topic, value, key, timestamp)``: ``ProducerCore.append_plain``."""

bind_core: Callable[[type, Callable[[bytes, int], int]], None] | None = (
    None if _module is None else _module.bind_core
)
"""``(ProducerCore, keyed_partition)``: tell ``send_plain`` the core's slots."""

EXTENSION_USED: bool = _module is not None
"""Whether the producer's append state and common append are in C."""
