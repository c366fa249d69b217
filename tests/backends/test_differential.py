"""MemoryLog and DiskLog driven by the same random operations must agree.

The disk log is also closed or abandoned (a crash without lost writes) and
reopened along the way; after every operation both logs hold the same bytes,
offsets, producer state, aborted transactions and timestamp lookups, and the
disk log's indexes equal freshly rebuilt ones.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from kafkette.protocol.records.batch_header import iter_entries
from tests.backends.disk_helpers import index_snapshot, rebuilt_index_snapshot
from tests.backends.helpers import FakeClock, control_batch, make_batch, read_all

CONFIG = LogConfig(
    cleanup_policy=("compact", "delete"),
    segment_bytes=300,
    retention_bytes=900,
    retention_ms=-1,
    delete_retention_ms=100,
    index_interval_bytes=64,
    min_cleanable_dirty_ratio=0.0,
)

records = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.one_of(st.none(), st.binary(max_size=5))),
    min_size=1,
    max_size=3,
)
operation = st.one_of(
    st.tuples(st.just("append"), records, st.sampled_from(["plain", "idempotent", "txn"])),
    st.tuples(st.just("end_txn"), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("retention")),
    st.tuples(st.just("compact")),
    st.tuples(st.just("flush")),
    st.tuples(st.just("advance"), st.integers(0, 150)),
    st.tuples(st.just("reopen"), st.booleans()),
)


def observe(log: SegmentedLog) -> dict[str, object]:
    data = read_all(log)
    stored = {int.from_bytes(data[p : p + 8], "big") for p, _ in iter_entries(data)}
    producers = {
        pid: (e.producer_epoch, e.last_sequence, e.last_offset, e.txn_first_offset)
        for pid, e in log.producer_state().producers.items()
    }
    return {
        "data": data,
        "offsets": (log.log_start_offset, log.log_end_offset, log.last_stable_offset),
        "segments": [s.base_offset for s in log.segments],
        "producers": producers,
        "aborted": [t for t in log.aborted_transactions(0, 2**62) if t.last_offset in stored],
        "timestamps": [log.offset_for_timestamp(t) for t in (0, 1_700_000_000_050, 2**62)],
    }


@pytest.mark.parametrize("write_buffer", [0, 700])
@settings(max_examples=int(os.environ.get("KK_EXAMPLES", "60")), deadline=None)
@given(operations=st.lists(operation, max_size=30))
def test_memory_and_disk_logs_agree(
    operations: list[tuple[object, ...]], write_buffer: int
) -> None:
    """With a write buffer, a crash is simulated after the buffer was written out."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as directory:
        path = directory + "/t-0"
        memory = MemoryLog("t", 0, CONFIG, clock=clock)
        disk = DiskLog(path, "t", 0, CONFIG, clock=clock, write_buffer_bytes=write_buffer)
        sequence = 0
        txn_open = False
        for op in operations:
            kind = op[0]
            logs: tuple[SegmentedLog, ...] = (memory, disk)
            if kind == "append":
                spec = [(clock.now, key, value) for key, value in op[1]]  # type: ignore[attr-defined]
                if op[2] == "plain":
                    batch = make_batch(spec)
                elif op[2] == "idempotent":
                    batch = make_batch(
                        spec, producer_id=1, producer_epoch=0, base_sequence=sequence
                    )
                    sequence += len(spec)
                else:
                    batch = make_batch(
                        spec, producer_id=2, producer_epoch=0, base_sequence=0, transactional=True
                    )
                    txn_open = True
                for log in logs:
                    log.append(batch)
            elif kind == "end_txn":
                if txn_open:
                    marker = control_batch(2, 0, commit=bool(op[1]), timestamp=clock.now)
                    for log in logs:
                        log.append(marker)
                    txn_open = False
            elif kind == "roll":
                for log in logs:
                    log.roll()
            elif kind == "truncate":
                target = memory.log_start_offset + int(
                    float(op[1]) * (memory.log_end_offset - memory.log_start_offset)  # type: ignore[arg-type]
                )
                for log in logs:
                    log.truncate_to(target)
                txn_open = memory.producer_state().first_unstable_offset() is not None
            elif kind == "delete_records":
                target = memory.log_start_offset + int(
                    float(op[1]) * (memory.log_end_offset - memory.log_start_offset)  # type: ignore[arg-type]
                )
                for log in logs:
                    log.delete_records_before(target)
            elif kind == "retention":
                assert memory.enforce_retention() == disk.enforce_retention()
            elif kind == "compact":
                assert memory.compact(force=True) == disk.compact(force=True)
            elif kind == "flush":
                for log in logs:
                    log.flush()
            elif kind == "advance":
                clock.advance(int(op[1]))  # type: ignore[call-overload]
            elif kind == "reopen":
                if op[1]:
                    disk.close()
                else:
                    disk.tick()
                    disk.abandon()
                disk = DiskLog(path, "t", 0, CONFIG, clock=clock, write_buffer_bytes=write_buffer)
            for log in (memory, disk):
                log.update_high_watermark(log.log_end_offset)
            assert observe(disk) == observe(memory), f"after {op}"
            assert index_snapshot(disk) == rebuilt_index_snapshot(disk), f"after {op}"
        disk.close()
