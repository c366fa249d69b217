"""Control batches and end-transaction markers."""

from __future__ import annotations

import struct

import pytest

from kafkette.protocol.errors import CorruptRecordError
from kafkette.protocol.records import (
    ControlRecord,
    ControlRecordType,
    RecordBatch,
    build_control_batch,
    parse_control_record,
)


@pytest.mark.parametrize("kind", list(ControlRecordType))
def test_control_batch_round_trip(kind: ControlRecordType) -> None:
    """A control batch carries the marker, producer fields and control/transactional bits."""
    buf = build_control_batch(
        kind,
        producer_id=77,
        producer_epoch=4,
        coordinator_epoch=12,
        timestamp=1234,
        base_offset=40,
        partition_leader_epoch=3,
    )
    batch = RecordBatch.from_buffer(buf)
    h = batch.header
    assert (h.is_control, h.is_transactional, h.producer_id, h.producer_epoch) == (
        True,
        True,
        77,
        4,
    )
    assert (h.base_offset, h.partition_leader_epoch, h.record_count) == (40, 3, 1)
    (rec,) = batch
    assert rec.key == struct.pack(">hh", 0, kind)
    assert rec.value == struct.pack(">hi", 0, 12)
    assert (rec.offset, rec.timestamp) == (40, 1234)
    assert parse_control_record(rec.key, rec.value) == ControlRecord(kind, 12, 0)


def test_enum_values() -> None:
    """ABORT is 0 and COMMIT is 1, as on the wire."""
    assert (ControlRecordType.ABORT, ControlRecordType.COMMIT) == (0, 1)


def test_extra_bytes_of_later_versions_are_ignored() -> None:
    """Bytes past the known fields (later versions) are ignored."""
    marker = parse_control_record(struct.pack(">hh", 1, 1) + b"xx", struct.pack(">hi", 1, 5) + b"y")
    assert marker == ControlRecord(ControlRecordType.COMMIT, 5, 1)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, struct.pack(">hi", 0, 1)),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)),  # unknown type
        (struct.pack(">hh", -1, 0), struct.pack(">hi", 0, 1)),  # negative version
        (struct.pack(">hh", 0, 0), None),
        (struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
    ],
)
def test_malformed_markers(key: bytes | None, value: bytes | None) -> None:
    """Missing, short or unknown control keys and values raise CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        parse_control_record(key, value)
