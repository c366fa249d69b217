"""Batches for the backend tests, and a controllable clock."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence

from kafkette.backends.log import Log
from kafkette.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
)

RecordSpec = tuple[int, bytes | None, bytes | None]
"""(timestamp, key, value)."""


class FakeClock:
    """Milliseconds that move only when told."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def make_batch(
    records: Sequence[RecordSpec],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: int = 0,
) -> bytes:
    """A magic 2 batch (base offset 0) holding ``records``."""
    builder = RecordBatchBuilder(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    return builder.build()


def simple_batch(
    count: int, *, timestamp: int = 1000, key_prefix: bytes = b"k", size: int = 8
) -> bytes:
    """``count`` records with keys ``k0..`` and values of ``size`` bytes."""
    return make_batch(
        [
            (timestamp + i, key_prefix + str(i).encode(), bytes([i % 256]) * size)
            for i in range(count)
        ]
    )


def control_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    timestamp: int,
    coordinator_epoch: int = 0,
) -> bytes:
    """A transaction marker batch."""
    return build_control_batch(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=timestamp,
    )


Decoded = tuple[int, int, bytes | None, bytes | None]


def decode(data: bytes) -> list[Decoded]:
    """(offset, timestamp, key, value) of every record in ``data`` (CRCs checked)."""
    return [
        (r.offset, r.timestamp, r.key, r.value)
        for batch in iter_batches(data, allow_partial=False)
        for r in batch
    ]


def decode_with_peer(data: bytes) -> list[Decoded]:
    """As :func:`decode`, by kafka-python (an independent reader)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib use
        from kafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped]

    out: list[Decoded] = []
    records = MemoryRecords(data)
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)


def read_all(log: Log, upper_bound: int | None = None) -> bytes:
    """Every stored batch from the log start, as bytes."""
    parts = []
    offset = log.log_start_offset
    end = log.log_end_offset if upper_bound is None else upper_bound
    while offset < end:
        chunk = log.read(offset, 1 << 20, upper_bound).to_bytes()
        if not chunk:
            break
        parts.append(chunk)
        last = decode_headers(chunk)[-1]
        offset = last[1] + 1
    return b"".join(parts)


def decode_headers(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + delta))
        pos += 12 + length
    return out


def sized_batch(index: int, size: int, base_ms: int = 1_700_000_000_000) -> bytes:
    """One record of ``size`` value bytes (its byte ``index % 251``), key ``k<index>``."""
    return make_batch([(base_ms + index, b"k%d" % index, bytes([index % 251]) * size)])


def stored_form(data: bytes, offset: int, epoch: int) -> bytes:
    """``data`` as a log stores it: base offset, length and leader epoch written in."""
    out = bytearray(data)
    struct.pack_into(">qii", out, 0, offset, len(data) - 12, epoch)
    return bytes(out)
