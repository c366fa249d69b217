"""LogConfig from Kafka properties; producer state folding and snapshots; slices."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LONG_MAX, LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.producer_state import (
    BatchMetadata,
    ProducerEntry,
    ProducerStateTable,
    SnapshotError,
)
from kafkette.backends.types import BatchInfo
from kafkette.errors import InvalidConfigError
from tests.backends.helpers import FakeClock, simple_batch


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.cleanup_policy == ("delete",)
    assert config.delete_retention_ms == 86400000
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == LONG_MAX
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.flush_messages == config.flush_ms == LONG_MAX
    assert config.message_timestamp_type == "CreateTime"
    assert config.max_message_bytes == 1048588
    assert (config.compact, config.delete, config.log_append_time) == (False, True, False)


def test_from_kafka_parses_and_validates() -> None:
    config = LogConfig.from_kafka(
        {
            "cleanup.policy": "compact,delete",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.25",
            "message.timestamp.type": "LogAppendTime",
            "preallocate": "true",
        }
    )
    assert config.cleanup_policy == ("compact", "delete")
    assert (config.compact, config.delete) == (True, True)
    assert config.segment_bytes == 4096
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.log_append_time and config.preallocate
    assert LogConfig.from_kafka(config.to_kafka()) == config
    over = LogConfig.from_kafka({"retention.ms": "-1"}, base=config)
    assert (over.retention_ms, over.segment_bytes) == (-1, 4096)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", "lots"),
        ("cleanup.policy", "forever"),
        ("cleanup.policy", ""),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("message.timestamp.type", "WallClock"),
        ("preallocate", "yes"),
        ("retention.ms", "-2"),
    ],
)
def test_from_kafka_rejects_invalid_values(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        LogConfig.from_kafka({name: value})


def test_from_kafka_rejects_unknown_names() -> None:
    with pytest.raises(InvalidConfigError, match=r"segment\.size"):
        LogConfig.from_kafka({"segment.size": "1"})


def info(
    base: int,
    last: int,
    *,
    pid: int = 1,
    epoch: int = 0,
    seq: int = 0,
    txn: bool = False,
    control: int = -1,
) -> BatchInfo:
    return BatchInfo(
        base_offset=base,
        last_offset=last,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1 if control >= 0 else seq,
        last_sequence=-1 if control >= 0 else seq + last - base,
        max_timestamp=base,
        is_transactional=txn or control >= 0,
        is_control=control >= 0,
        control_type=control,
        coordinator_epoch=4 if control >= 0 else -1,
    )


def test_producer_state_folding() -> None:
    table = ProducerStateTable()
    for i in range(7):
        assert table.update(info(i, i, seq=i)) is None
    entry = table.producers[1]
    assert [b.base_sequence for b in entry.batches] == [2, 3, 4, 5, 6]
    table.update(info(7, 8, epoch=1, seq=0))
    assert [(b.base_sequence, b.last_sequence) for b in entry.batches] == [(0, 1)]
    table.update(info(9, 9, epoch=1, seq=2, txn=True))
    table.update(info(10, 10, pid=2, txn=True))
    assert table.first_unstable_offset() == 9
    completed = table.update(info(11, 11, epoch=1, control=0))
    assert completed is not None
    assert (completed.producer_id, completed.first_offset, completed.last_offset) == (1, 9, 11)
    assert completed.aborted
    assert table.first_unstable_offset() == 10
    assert entry.coordinator_epoch == 4
    assert table.update(info(12, 12, pid=-1)) is None
    assert -1 not in table.producers


entries = st.builds(
    ProducerEntry,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    batches=st.lists(
        st.builds(
            BatchMetadata,
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**31 - 1),
            st.integers(0, 2**62),
            st.integers(0, 2**62),
            st.integers(-1, 2**62),
        ),
        max_size=5,
    ),
    txn_first_offset=st.integers(-1, 2**62),
    coordinator_epoch=st.integers(-1, 2**31 - 1),
)


@settings(max_examples=50)
@given(st.lists(entries, max_size=6, unique_by=lambda e: e.producer_id))
def test_snapshot_round_trip(producers: list[ProducerEntry]) -> None:
    table = ProducerStateTable({e.producer_id: e for e in producers})
    data = table.to_bytes()
    assert ProducerStateTable.from_bytes(data) == table
    for cut in (3, len(data) - 1):
        with pytest.raises(SnapshotError):
            ProducerStateTable.from_bytes(data[:cut])
    if producers:
        damaged = bytearray(data)
        damaged[-1] ^= 1
        with pytest.raises(SnapshotError):
            ProducerStateTable.from_bytes(bytes(damaged))


def test_disk_slice_outlives_its_deleted_segment(tmp_path: Path) -> None:
    """A slice keeps its file open: retention may delete the segment before it is sent."""
    clock = FakeClock()
    batch = simple_batch(2)
    log = DiskLog(
        str(tmp_path / "t-0"),
        "t",
        0,
        LogConfig(segment_bytes=len(batch), retention_bytes=0, retention_ms=-1),
        clock=clock,
    )
    for _ in range(3):
        log.append(batch)
    log.update_high_watermark(log.log_end_offset)
    old = log.read(0, 1000)
    assert log.enforce_retention() == 2
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert old.to_bytes() == batch
    log.close()
