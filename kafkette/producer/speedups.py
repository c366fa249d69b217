"""Selection of the optional C accelerator for the producer's common append.

When :mod:`kafkette.producer._accumulate` was built, the record encoder's
extension too, and the environment variable ``KAFKETTE_NO_EXTENSIONS`` is not
``1``: ``FutureState``, ``BatchState`` and ``AccumulatorState`` are its C types
(the bases of ``RecordFuture``, ``ProducerBatch`` and ``RecordAccumulator``,
which keep the append's state in C), ``RouteState`` its C type (what the common
send needs of the producer, held by ``ProducerCore`` as ``routes``), and
``append_open``, ``send_plain``, ``build_plain`` and ``keyed_partition`` its
functions. Otherwise the classes of :mod:`kafkette.producer.append_state`, None (the
pure-Python ``RecordAccumulator.append_plain``, ``append_state.RouteState.send`` and
``ProducerBatch.build`` then do all the work) and
:func:`kafkette.producer.partitioner.keyed_partition`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kafkette.producer import append_state, partitioner
from kafkette.protocol.extensions import load_extension
from kafkette.protocol.records import speedups as record_speedups

if TYPE_CHECKING:
    from kafkette.producer.futures import RecordFuture

AppendOpen = Callable[[Any, str, int, int, Any, Any], "RecordFuture | None"]
SendPlain = Callable[[Any, str, Any, Any, "int | None"], "RecordFuture | None"]


def _load() -> ModuleType | None:
    if record_speedups.encode_record is None:
        return None
    return load_extension("kafkette.producer._accumulate")


_module = _load()

if TYPE_CHECKING:
    FutureState = append_state.FutureState
    BatchState = append_state.BatchState
    AccumulatorState = append_state.AccumulatorState
    RouteState = append_state.RouteState
else:
    FutureState = append_state.FutureState if _module is None else _module.FutureState
    BatchState = append_state.BatchState if _module is None else _module.BatchState
    AccumulatorState = (
        append_state.AccumulatorState if _module is None else _module.AccumulatorState
    )
    RouteState = append_state.RouteState if _module is None else _module.RouteState

append_open: AppendOpen | None = None if _module is None else _module.AccumulatorState.append_open
"""``(accumulator, topic, partition, timestamp, key, value)``: the record's
RecordFuture once added to the partition's open batch, or None (and nothing
changed) when ``RecordAccumulator.append_plain`` must take it."""

send_plain: SendPlain | None = None if _module is None else _module.send_plain
"""``(core, topic, value, key, timestamp)``: ``core.routes.send(topic, value, key,
timestamp)`` in one C call."""

WriteHeader = Callable[[bytearray, int, int, int, int, int, int, int], bool]

write_header: WriteHeader | None = None if _module is None else _module.write_header
"""``(buffer, count, base_timestamp, max_timestamp, attributes, producer_id, producer_epoch,
base_sequence)``: the header and CRC of a batch without compression written into the
buffer's reserved front, as ``build_reserved`` writes them: True; False, with nothing
written, for a field out of range (``build_reserved`` then refuses it)."""

build_plain: Callable[[Any], bool] | None = None if _module is None else _module.build_plain
"""``(batch)``: ``ProducerBatch.build`` of a batch without compression, from its C fields
(its header and CRC written into its buffer, which becomes its data): True; False, with
nothing changed, for ``build`` to take."""

keyed_partition: Callable[[bytes, int], int] = (
    partitioner.keyed_partition if _module is None else _module.keyed_partition
)
"""``(key, count)``: the partition of a keyed record (Kafka's murmur2), in C when built."""

bind: Callable[[type], None] | None = None if _module is None else _module.bind
"""``(RecordFuture)``: the future class ``append_open`` makes (a subclass of ``FutureState``)."""

EXTENSION_USED: bool = _module is not None
"""Whether the producer's append state and common append are in C."""
