"""Magic 2 batches: builder and reader round trips, header fields, exact layout."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import EncodeError, UnsupportedCompressionError
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    BatchHeader,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    record_runs,
)
from kafkette.protocol.records.batch_header import set_log_append_time
from kafkette.protocol.records.default_records import RESERVED_HEADER, build_reserved, encode_record
from kafkette.protocol.records.record_parser import parse_records
from tests.protocol.records.strategies import Spec, record_specs, uniform_specs

CODECS = [NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD]


def build(specs: list[Spec], **kwargs: int | bool | None) -> bytes:
    builder = RecordBatchBuilder(**kwargs)  # type: ignore[arg-type]
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    return builder.build()


def expected(specs: list[Spec], base_offset: int = 0) -> list[Record]:
    return [
        Record(base_offset + i, ts, key, value, hdrs)
        for i, (ts, key, value, hdrs) in enumerate(specs)
    ]


@settings(max_examples=25, deadline=None)
@given(specs=record_specs(), codec=st.sampled_from(CODECS), base=st.integers(0, 1 << 40))
def test_round_trip(specs: list[Spec], codec: int, base: int) -> None:
    """Whatever goes in (null keys and values, headers, any timestamps) comes back out."""
    buf = build(specs, compression=codec, base_offset=base)
    batch = RecordBatch.from_buffer(buf)
    assert list(batch) == expected(specs, base)
    assert len(batch) == len(specs)
    assert batch.header.compression == codec
    assert batch.size == len(buf)


@settings(max_examples=40, deadline=None)
@given(specs=uniform_specs(), codec=st.sampled_from([NO_COMPRESSION, LZ4]))
def test_round_trip_uniform_runs(specs: list[Spec], codec: int) -> None:
    """Runs of same-shaped records (the columnar path) read exactly, around odd records too."""
    buf = build(specs, compression=codec, base_offset=5)
    assert RecordBatch.from_buffer(buf).records() == expected(specs, 5)


@settings(max_examples=40, deadline=None)
@given(specs=uniform_specs())
def test_columnar_path_matches_record_by_record(specs: list[Spec]) -> None:
    """The columnar path and the one-record-at-a-time path give identical records."""
    buf = build(specs)
    header = BatchHeader.parse(buf)
    fast = parse_records(buf[61:], header.record_count, 0, header.base_timestamp)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_runs, "MIN_RUN", 1 << 30)
        slow = parse_records(buf[61:], header.record_count, 0, header.base_timestamp)
    assert fast == slow == expected(specs)


def test_columnar_path_is_taken() -> None:
    """A batch of same-shaped records is read in runs, not record by record."""
    specs: list[Spec] = [(1000 + i // 10, None, b"x" * 100, ()) for i in range(1000)]
    buf = build(specs)
    calls: list[int] = []
    real = record_runs.run

    def spy(*args: Any) -> Any:
        found = real(*args)
        calls.append(0 if found is None else found[0][0])
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_runs, "run", spy)
        batch = RecordBatch.from_buffer(buf)
        assert list(batch) == expected(specs)
    assert sum(calls) >= 990
    assert list(batch) == batch.records() == expected(specs)  # iterating again gives the same


def test_many_records() -> None:
    """Ten thousand records in one batch, uncompressed and lz4."""
    specs: list[Spec] = [(1_700_000_000_000 + i // 7, None, b"v%d" % i, ()) for i in range(10_000)]
    for codec in (NO_COMPRESSION, LZ4):
        assert list(RecordBatch.from_buffer(build(specs, compression=codec))) == expected(specs)


def test_exact_bytes_of_a_small_batch() -> None:
    """Field by field layout, checked against the format description."""
    buf = build(
        [(1000, b"k", b"v", (("h", b"x"),)), (1005, None, b"v2", ())],
        base_offset=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
        partition_leader_epoch=5,
    )
    records = bytes.fromhex("18000000026b0276020268027810000a020104763200")
    after_crc = struct.pack(">hiqqqhii", 0, 1, 1000, 1005, 42, 3, 9, 2)
    prefix = struct.pack(">qiib", 7, 49 + len(records), 5, 2)
    crc = struct.pack(">I", crc32c(after_crc + records))
    assert buf == prefix + crc + after_crc + records


def test_header_fields_and_attributes() -> None:
    """Every header field and attribute bit is written and read back."""
    buf = build(
        [(50, b"a", b"b", ())],
        compression=GZIP,
        base_offset=100,
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
        is_transactional=True,
        partition_leader_epoch=4,
    )
    batch = RecordBatch.from_buffer(buf)
    h = batch.header
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (100, 4, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert h.attributes == GZIP | 0x10
    assert (h.is_transactional, h.is_control, h.is_log_append_time) == (True, False, False)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 11)
    assert (batch.is_transactional, batch.is_control, batch.compression) == (True, False, GZIP)
    assert batch.delete_horizon_ms is None
    assert batch.next_offset == 101
    assert batch.raw() == buf


def test_default_producer_fields_are_minus_one() -> None:
    """Without a producer, id, epoch, sequence and leader epoch are -1."""
    h = RecordBatch.from_buffer(build([(1, None, None, ())])).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (
        -1,
        -1,
        -1,
        -1,
    )


def test_timestamps_base_and_max() -> None:
    """The base is the first record's timestamp, max the largest; deltas may be negative."""
    specs: list[Spec] = [(500, None, b"a", ()), (400, None, b"b", ()), (900, None, b"c", ())]
    batch = RecordBatch.from_buffer(build(specs))
    assert (batch.header.base_timestamp, batch.header.max_timestamp) == (500, 900)
    assert [r.timestamp for r in batch] == [500, 400, 900]


def test_log_append_time_reports_max_timestamp_for_every_record() -> None:
    """A LogAppendTime batch reports maxTimestamp for each record."""
    specs: list[Spec] = [(500, None, b"a", ()), (400, None, b"b", ()), (900, None, b"c", ())]
    batch = RecordBatch.from_buffer(build(specs, log_append_time=True))
    assert batch.header.is_log_append_time
    assert [r.timestamp for r in batch] == [900, 900, 900]


def test_broker_set_log_append_time_applies_to_all_records() -> None:
    """After the broker stamps LogAppendTime (and recomputes the CRC), readers see it."""
    specs: list[Spec] = [(500 + i, None, b"x" * 10, ()) for i in range(100)]
    for codec in (NO_COMPRESSION, SNAPPY):
        buf = bytearray(build(specs, compression=codec))
        set_log_append_time(buf, 0, 123_456)
        assert [r.timestamp for r in RecordBatch.from_buffer(buf)] == [123_456] * 100


def test_control_and_delete_horizon_bits() -> None:
    """Control and delete-horizon bits; the horizon is the base timestamp."""
    buf = build([(10, b"k", b"v", ())], is_control=True, delete_horizon_ms=5000)
    batch = RecordBatch.from_buffer(buf)
    assert batch.header.attributes == 0x20 | 0x40
    assert batch.is_control and batch.header.has_delete_horizon
    assert batch.delete_horizon_ms == 5000
    assert batch.header.base_timestamp == 5000
    assert [r.timestamp for r in batch] == [10]


def test_empty_batch() -> None:
    """A batch without records has lastOffsetDelta -1 and reads as empty."""
    batch = RecordBatch.from_buffer(build([]))
    assert list(batch) == []
    assert batch.header.last_offset_delta == -1
    assert batch.header.record_count == 0


def test_append_returns_offset_delta_and_size_grows() -> None:
    """append returns consecutive offset deltas; size_in_bytes is the built size."""
    builder = RecordBatchBuilder()
    assert builder.size_in_bytes() == 61
    assert [builder.append(1, None, b"x" * 10) for _ in range(3)] == [0, 1, 2]
    assert len(builder) == 3
    assert builder.size_in_bytes() == len(builder.build())


def test_headers_round_trip_unicode_and_null_values() -> None:
    """Non-ASCII and empty header keys, null and empty header values."""
    hdrs = (("ключ", b"\x00\xff"), ("", None), ("emoji-🙂", b""))
    batch = RecordBatch.from_buffer(build([(1, None, None, hdrs)]))
    assert next(iter(batch)).headers == hdrs


def test_large_fields_use_long_varints() -> None:
    """Keys, values and timestamps past the two-byte varint range."""
    specs: list[Spec] = [
        (0, b"k" * 20_000, b"v" * 100_000, (("h" * 300, b"x" * 9000),)),
        (1 << 40, None, b"", ()),
    ]
    assert list(RecordBatch.from_buffer(build(specs))) == expected(specs)


def test_records_are_parsed_once() -> None:
    """records() parses once and then returns the same list."""
    batch = RecordBatch.from_buffer(build([(1, None, b"v", ())]))
    assert batch.records() is batch.records()


def test_record_is_a_named_tuple() -> None:
    """Record builds by keyword and reads by attribute, like a named tuple."""
    r = Record(offset=1, timestamp=2, key=b"k", value=None, headers=())
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (1, 2, b"k", None, ())
    assert r._replace(offset=5).offset == 5


def test_records_whose_lengths_share_a_first_byte() -> None:
    """Lengths 64 apart share the first varint byte: runs are tried and refused, exactly."""
    specs: list[Spec] = [(1000, None, b"a" * (100 if i % 3 else 164), ()) for i in range(3000)]
    assert list(RecordBatch.from_buffer(build(specs))) == expected(specs)


def test_values_that_cannot_be_encoded() -> None:
    """Non-bytes values, out-of-range fields and unknown codecs raise protocol errors."""
    builder = RecordBatchBuilder()
    with pytest.raises(EncodeError, match="must be bytes"):
        builder.append(1, None, "text, not bytes")  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="not int"):  # not five zero bytes
        builder.append(1, None, b"v", [("h", 5)])  # type: ignore[list-item]
    assert len(builder) == 0
    with pytest.raises(EncodeError):
        build([(1, None, b"v", ())], producer_id=1 << 70)
    with pytest.raises(EncodeError):
        build([(1 << 70, None, b"v", ())])
    with pytest.raises(UnsupportedCompressionError):
        RecordBatchBuilder(compression=9)


def test_timestamp_delta_past_a_varlong() -> None:
    """A timestamp delta beyond 64 bits raises EncodeError."""
    builder = RecordBatchBuilder()
    builder.append(-(1 << 62), None, b"v")
    with pytest.raises(EncodeError):
        builder.append(1 << 62, None, b"v")


def test_varied_run_path_is_taken() -> None:
    """Records differing only in value length are read by the varied-run path, exactly."""
    specs: list[Spec] = [
        (1000 + i // 10, b"k%03d" % (i % 1000), b"v" * (20 + (i * 37) % 130), ())
        for i in range(1000)
    ]
    calls: list[int] = []
    real = record_runs.varied_run

    def spy(*args: Any) -> Any:
        found = real(*args)
        calls.append(0 if found is None else found[0][0])
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_runs, "varied_run", spy)
        batch = RecordBatch.from_buffer(build(specs, base_offset=3))
        assert list(batch) == expected(specs, 3)
    assert sum(calls) >= 990


@pytest.mark.parametrize("varied", [False, True])
def test_runs_with_headers_are_taken(varied: bool) -> None:
    """Records with same-shaped headers (a trace id, a null value) are read in runs too."""
    specs: list[Spec] = [
        (
            1000 + i // 10,
            None,
            b"v" * (20 + (i * 37) % 130 if varied else 60),
            (("trace-id", b"%016d" % i), ("tenant", None)),
        )
        for i in range(1000)
    ]
    calls: list[int] = []
    name = "varied_run" if varied else "run"
    real = getattr(record_runs, name)

    def spy(*args: Any) -> Any:
        found = real(*args)
        calls.append(0 if found is None else found[0][0])
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_runs, name, spy)
        assert list(RecordBatch.from_buffer(build(specs))) == expected(specs)
    assert sum(calls) >= 990


@settings(max_examples=30, deadline=None)
@given(
    specs=record_specs(max_size=30),
    codec=st.sampled_from(CODECS),
    producer=st.tuples(
        st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
    ),
    transactional=st.booleans(),
)
def test_build_reserved_builds_what_append_builds(
    specs: list[Spec], codec: int, producer: tuple[int, int, int], transactional: bool
) -> None:
    """A producer's records, encoded one by one after the header's reserved bytes,
    make the batch that appending them to a builder makes (each codec, producer
    fields and transactional flag); without compression in the buffer itself."""
    if not specs:
        return
    base = specs[0][0]
    buffer = bytearray(RESERVED_HEADER)
    for i, (ts, key, value, hdrs) in enumerate(specs):
        buffer += encode_record(ts - base, i, key, value, hdrs)
    producer_id, epoch, sequence = producer
    built = build_reserved(
        buffer,
        len(specs),
        base,
        max(-1, *(ts for ts, *_ in specs)),
        compression=codec,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    appended = RecordBatchBuilder(
        compression=codec,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    for ts, key, value, hdrs in specs:
        appended.append(ts, key, value, hdrs)
    assert type(built) is bytearray
    assert bytes(built) == appended.build()
    assert (built is buffer) == (codec == NO_COMPRESSION)
    assert list(RecordBatch.from_buffer(built)) == expected(specs)


def test_build_reserved_refuses_a_buffer_without_the_header_room() -> None:
    with pytest.raises(EncodeError, match="no room for its header"):
        build_reserved(bytearray(RESERVED_HEADER - 1), 0, 0, 0)
    with pytest.raises(UnsupportedCompressionError):
        build_reserved(bytearray(RESERVED_HEADER), 0, 0, 0, compression=9)
