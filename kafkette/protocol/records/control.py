"""Control records: the transaction markers (COMMIT / ABORT) in control batches.

A control record's key is ``version int16, type int16``; an end-transaction
marker's value is ``version int16, coordinatorEpoch int32``. Both versions are 0.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

import attrs

from kafkette.protocol.errors import CorruptRecordError
from kafkette.protocol.records.batch_header import NO_PARTITION_LEADER_EPOCH
from kafkette.protocol.records.default_records import RecordBatchBuilder

_KEY: Final = struct.Struct(">hh")
_VALUE: Final = struct.Struct(">hi")
CONTROL_RECORD_VERSION: Final = 0


class ControlRecordType(enum.IntEnum):
    """Type of a control record, from its key."""

    ABORT = 0
    COMMIT = 1


@attrs.frozen(slots=True)
class ControlRecord:
    """A parsed end-transaction marker."""

    type: ControlRecordType
    coordinator_epoch: int
    version: int = CONTROL_RECORD_VERSION


def control_record_key(control_type: ControlRecordType) -> bytes:
    """The key of a control record of ``control_type``."""
    return _KEY.pack(CONTROL_RECORD_VERSION, control_type)


def control_record_value(coordinator_epoch: int) -> bytes:
    """The value of an end-transaction marker."""
    return _VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transactional control batch holding one end-transaction marker."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp, control_record_key(control_type), control_record_value(coordinator_epoch)
    )
    return builder.build()


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Read an end-transaction marker from a control record's key and value.

    Raises :class:`CorruptRecordError` for a key or value that is missing,
    too short, or of an unknown type. Bytes past the known fields (later
    versions may add some) are ignored, as Kafka does.
    """
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is missing or shorter than 4 bytes")
    version, raw_type = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record version {version}")
    try:
        control_type = ControlRecordType(raw_type)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {raw_type}") from None
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value is missing or too short")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return ControlRecord(control_type, coordinator_epoch, version)
