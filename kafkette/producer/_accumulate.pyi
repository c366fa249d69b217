"""Types of the optional C accelerator (see _accumulate.c)."""

from typing import Any

from kafkette.producer import append_state

class FutureState(append_state.FutureState):
    """What a RecordFuture knows, in C."""

class BatchState(append_state.BatchState):
    """The open-batch state of a ProducerBatch, in C."""

class AccumulatorState(append_state.AccumulatorState):
    """The append state of a RecordAccumulator, in C."""

    def append_open(
        self, topic: str, partition: int, timestamp: int, key: object, value: object, /
    ) -> Any:
        """The record's RecordFuture once in its partition's open batch, or None."""

class RouteState(append_state.RouteState):
    """What the common send of a producer needs of it, in C (headers encoded too)."""

def send_plain(core: Any, topic: str, value: object, key: object, timestamp: int | None, /) -> Any:
    """``core.routes.send(topic, value, key, timestamp)``: the record's RecordFuture, or None."""

def write_header(
    buffer: bytearray,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    /,
) -> bool:
    """A batch's header and CRC written into ``buffer``'s reserved front; False if not."""

def build_plain(batch: object, /) -> bool:
    """ProducerBatch.build of a batch without compression, from its fields; False if not."""

def bind(future: type, /) -> None:
    """The future class ``append_open`` makes."""

def keyed_partition(key: bytes, count: int, /) -> int:
    """``(murmur2(key) & 0x7fffffff) % count``: the partition of a keyed record."""
