"""Compaction against a model, and its Kafka rules one by one, on both backends."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from kafkette.protocol.records import RecordBatch
from tests.backends.conftest import LogFactory
from tests.backends.helpers import (
    FakeClock,
    control_batch,
    decode,
    decode_headers,
    decode_with_peer,
    make_batch,
    read_all,
)

KEYS = [b"a", b"b", b"c", b"d"]
RETENTION = 100

Op = tuple[str, object]


@dataclass
class Model:
    """Every appended record, and the delete horizon of each retained tombstone."""

    records: list[tuple[int, int, bytes, bytes | None]] = field(default_factory=list)
    horizons: dict[int, int] = field(default_factory=dict)
    dropped: set[int] = field(default_factory=set)

    def clean(self, end: int, now: int) -> None:
        latest = {key: offset for offset, _, key, _ in self.records if offset < end}
        for offset, _, key, value in self.records:
            if offset >= end or offset in self.dropped:
                continue
            if latest[key] != offset:
                self.dropped.add(offset)
            elif value is None:
                horizon = self.horizons.get(offset)
                if horizon is None:
                    self.horizons[offset] = now + RETENTION
                elif now >= horizon:
                    self.dropped.add(offset)

    def expected(self) -> list[tuple[int, int, bytes | None, bytes | None]]:
        return [(o, t, k, v) for o, t, k, v in self.records if o not in self.dropped]


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(
                st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=6))),
                min_size=1,
                max_size=3,
            ),
        ),
        st.tuples(st.just("roll"), st.none()),
        st.tuples(st.just("advance"), st.integers(0, 150)),
        st.tuples(st.just("compact"), st.none()),
    ),
    max_size=40,
)


def open_log(backend: str, directory: str, clock: FakeClock) -> SegmentedLog:
    config = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=250,
        delete_retention_ms=RETENTION,
        min_cleanable_dirty_ratio=0.0,
        index_interval_bytes=50,
    )
    if backend == "memory":
        return MemoryLog("t", 0, config, clock=clock)
    return DiskLog(directory + "/t-0", "t", 0, config, clock=clock)


@pytest.mark.parametrize("backend", ["memory", "disk"])
@settings(max_examples=40, deadline=None)
@given(workload=ops)
def test_compaction_matches_the_model(backend: str, workload: list[Op]) -> None:
    """Below the cleaned point, exactly the last record of each key survives (tombstones
    until their delete horizon); above it, everything; offsets and contents never change."""
    clock = FakeClock()
    model = Model()
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(backend, directory, clock)
        for kind, arg in workload:
            if kind == "append":
                assert isinstance(arg, list)
                batch = [(clock.now, key, value) for key, value in arg]
                info = log.append(make_batch(batch))
                for i, (ts, key, value) in enumerate(batch):
                    model.records.append((info.base_offset + i, ts, key, value))
            elif kind == "roll":
                log.roll()
            elif kind == "advance":
                assert isinstance(arg, int)
                clock.advance(arg)
            else:
                log.update_high_watermark(log.log_end_offset)
                stats = log.compact(force=True)
                if stats is not None:
                    model.clean(stats.first_uncleanable_offset, clock.now)
            assert decode(read_all(log)) == model.expected()
        end = log.log_end_offset
        if backend == "disk":
            log.close()
            log = open_log(backend, directory, clock)
            assert log.log_end_offset == end
            assert decode(read_all(log)) == model.expected()
        log.close()


def compacted(make_log: LogFactory, **settings: object) -> SegmentedLog:
    defaults: dict[str, object] = {"cleanup_policy": ("compact",), "segment_bytes": 1 << 20}
    defaults.update(settings)
    return make_log(**defaults)


def fill_and_roll(log: SegmentedLog, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    for record in records:
        log.append(make_batch([record]))
        log.roll()
    log.update_high_watermark(log.log_end_offset)


def test_compaction_needs_the_compact_policy(make_log: LogFactory) -> None:
    log = make_log()
    fill_and_roll(log, [(1, b"a", b"1"), (2, b"a", b"2")])
    assert log.compact(force=True) is None


def test_min_cleanable_dirty_ratio(make_log: LogFactory) -> None:
    log = compacted(make_log, min_cleanable_dirty_ratio=0.5)
    fill_and_roll(log, [(1, b"a", b"1"), (2, b"a", b"2"), (3, b"b", b"3")])
    stats = log.compact()
    assert stats is not None and stats.records_removed == 1
    # Nothing new: the dirty ratio is 0.
    assert log.compact() is None
    # One new segment of three: a ratio of about a third stays below 0.5.
    fill_and_roll(log, [(4, b"a", b"4")])
    assert log.compact() is None
    stats = log.compact(force=True)
    assert stats is not None and stats.records_removed == 1
    assert [r[3] for r in decode(read_all(log))] == [b"3", b"4"]


def test_min_compaction_lag(make_log: LogFactory, clock: FakeClock) -> None:
    log = compacted(make_log, min_compaction_lag_ms=1000)
    now = clock.now
    fill_and_roll(log, [(now - 5000, b"a", b"1"), (now - 10, b"a", b"2"), (now, b"a", b"3")])
    stats = log.compact(force=True)
    assert stats is not None and stats.first_uncleanable_offset == 1
    assert [r[3] for r in decode(read_all(log))] == [b"1", b"2", b"3"]
    clock.advance(1000)
    stats = log.compact(force=True)
    assert stats is not None and stats.first_uncleanable_offset == 3
    assert [r[3] for r in decode(read_all(log))] == [b"3"]


def test_max_compaction_lag_forces_a_pass(make_log: LogFactory, clock: FakeClock) -> None:
    log = compacted(make_log, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=1000)
    fill_and_roll(log, [(clock.now, b"a", b"1"), (clock.now, b"a", b"2"), (clock.now, b"b", b"x")])
    log.append(make_batch([(clock.now, b"c", b"y")]))
    assert log.compact() is not None  # first pass: everything is dirty (ratio 1.0)
    fill_and_roll(log, [(clock.now, b"a", b"3")])
    assert log.compact() is None
    clock.advance(1001)
    stats = log.compact()
    assert stats is not None
    assert [r[3] for r in decode(read_all(log))] == [b"x", b"y", b"3"]


def test_compaction_keeps_offsets_and_stops_at_the_last_stable_offset(make_log: LogFactory) -> None:
    log = compacted(make_log)
    fill_and_roll(log, [(1, b"a", b"1"), (2, b"b", b"2"), (3, b"a", b"3")])
    log.append(
        make_batch(
            [(4, b"b", b"4")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True
        )
    )
    log.roll()
    fill_and_roll(log, [(5, b"b", b"5")])
    assert log.last_stable_offset == 3
    stats = log.compact(force=True)
    assert stats is not None and stats.first_uncleanable_offset == 3
    assert [r[0] for r in decode(read_all(log))] == [1, 2, 3, 4]
    log.append(control_batch(9, 0, commit=True, timestamp=6))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.compact(force=True)
    assert [(r[0], r[3]) for r in decode(read_all(log))] == [
        (2, b"3"),
        (4, b"5"),
        (5, b"\x00\x00\x00\x00\x00\x00"),
    ]


def test_aborted_transactions_and_markers(make_log: LogFactory, clock: FakeClock) -> None:
    """Aborted records go at once; a marker outlives its records by delete.retention.ms."""
    log = compacted(make_log, delete_retention_ms=1000)
    log.append(
        make_batch(
            [(1, b"a", b"aborted")],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    )
    log.append(
        make_batch(
            [(1, b"z", b"committed")],
            producer_id=6,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    )
    log.append(control_batch(5, 0, commit=False, timestamp=2))
    log.append(control_batch(6, 0, commit=True, timestamp=2))
    fill_and_roll(log, [(3, b"a", b"plain")])
    log.compact(force=True)
    infos = list(log.iter_batch_infos())
    # The aborted batch is the producer's last data batch: its header stays, empty.
    assert [(i.base_offset, i.producer_id, i.is_control) for i in infos] == [
        (0, 5, False),
        (1, 6, False),
        (2, 5, True),
        (3, 6, True),
        (4, -1, False),
    ]
    data = read_all(log)
    assert RecordBatch.from_buffer(data).header.record_count == 0
    assert [r[3] for r in decode(data) if r[0] not in (2, 3)] == [b"committed", b"plain"]
    clock.advance(1000)
    log.compact(force=True)
    # Producer 5's marker had no records left: it is gone after its horizon.
    assert [h[0] for h in decode_headers(read_all(log))] == [0, 1, 3, 4]
    assert log.producer_state().producers[5].last_sequence == 0


def test_emptied_batch_of_an_idempotent_producer_keeps_its_header(make_log: LogFactory) -> None:
    log = compacted(make_log)
    log.append(
        make_batch(
            [(1, b"a", b"1"), (2, b"b", b"2")], producer_id=3, producer_epoch=1, base_sequence=40
        )
    )
    log.roll()
    fill_and_roll(log, [(3, b"a", b"3"), (4, b"b", b"4")])
    log.compact(force=True)
    infos = list(log.iter_batch_infos())
    assert (infos[0].base_offset, infos[0].last_offset, infos[0].last_sequence) == (0, 1, 41)
    assert RecordBatch.from_buffer(read_all(log)).header.record_count == 0
    assert [r[0] for r in decode(read_all(log))] == [2, 3]


def test_compaction_drops_emptied_segments(make_log: LogFactory) -> None:
    log = compacted(make_log)
    fill_and_roll(log, [(1, b"a", b"1"), (2, b"a", b"2"), (3, b"a", b"3"), (4, b"b", b"4")])
    log.compact(force=True)
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4]
    assert decode_headers(log.read(1, 1000).to_bytes()) == [(2, 2)]
    assert decode_headers(log.read(0, 1000).to_bytes()) == [(2, 2)]


def test_keyless_records_from_before_compaction_are_removed(make_log: LogFactory) -> None:
    log = make_log()
    fill_and_roll(log, [(1, None, b"1"), (2, b"a", b"2"), (3, None, b"3")])
    log.update_config(LogConfig(cleanup_policy=("compact",)))
    log.compact(force=True)
    assert [(r[0], r[2]) for r in decode(read_all(log))] == [(1, b"a")]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_rebuilt_batches_keep_codec_offsets_and_headers(make_log: LogFactory, codec: int) -> None:
    """Partly compacted batches are re-encoded with their codec, original offset deltas,
    timestamps and record headers; an independent reader (kafka-python) agrees."""
    from kafkette.protocol.records import RecordBatchBuilder

    log = compacted(make_log)
    builder = RecordBatchBuilder(
        compression=codec, producer_id=4, producer_epoch=2, base_sequence=7
    )
    builder.append(100, b"a", b"old-a", (("h", b"1"),))
    builder.append(105, b"b", b"keep-b", (("h", None), ("x", b"")))
    builder.append(103, b"c", b"old-c")
    builder.append(110, b"d", b"keep-d")
    log.append(builder.build())
    fill_and_roll(log, [(200, b"a", b"new-a"), (201, b"c", b"new-c")])
    log.compact(force=True)
    data = read_all(log)
    first = RecordBatch.from_buffer(data)
    assert first.header.compression == codec
    assert (first.header.base_offset, first.header.last_offset_delta) == (0, 3)
    assert (first.header.producer_id, first.header.base_sequence) == (4, 7)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in first] == [
        (1, 105, b"b", b"keep-b", (("h", None), ("x", b""))),
        (3, 110, b"d", b"keep-d", ()),
    ]
    expected = [
        (1, 105, b"b", b"keep-b"),
        (3, 110, b"d", b"keep-d"),
        (4, 200, b"a", b"new-a"),
        (5, 201, b"c", b"new-c"),
    ]
    assert decode(data) == expected
    assert decode_with_peer(data) == expected
    assert next(iter(log.iter_batch_infos())).last_sequence == 10
