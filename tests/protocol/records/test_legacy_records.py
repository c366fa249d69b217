"""Legacy message sets (magic 0 and 1): round trips, wrapper offsets and timestamps, damage."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import (
    CorruptRecordError,
    EncodeError,
    TruncatedError,
    UnsupportedCompressionError,
)
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    LegacyBatch,
    LegacyBatchBuilder,
    Record,
    compress,
    iter_batches,
)

maybe_bytes = st.one_of(st.none(), st.binary(max_size=50))


def message(
    offset: int, magic: int, attributes: int, ts: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One legacy entry written out field by field from the format description."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", ts)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def read_all(buf: bytes) -> list[Record]:
    return [r for batch in iter_batches(buf) for r in batch]


@settings(max_examples=30, deadline=None)
@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([NO_COMPRESSION, GZIP, SNAPPY, LZ4]),
    base=st.integers(0, 1 << 40),
    specs=st.lists(st.tuples(st.integers(0, 1 << 42), maybe_bytes, maybe_bytes), max_size=20),
)
def test_round_trip(
    magic: int, codec: int, base: int, specs: list[tuple[int, bytes | None, bytes | None]]
) -> None:
    """Whatever goes in comes back out, for both magics and every legacy codec."""
    builder = LegacyBatchBuilder(magic=magic, compression=codec, base_offset=base)
    for ts, key, value in specs:
        builder.append(ts, key, value)
    want = [
        Record(base + i, ts if magic == 1 else -1, key, value, ())
        for i, (ts, key, value) in enumerate(specs)
    ]
    assert read_all(builder.build()) == want


def test_exact_bytes_plain_messages() -> None:
    """Plain messages are written field by field as the format says."""
    builder = LegacyBatchBuilder(magic=1, base_offset=5)
    builder.append(1000, b"k", None)
    builder.append(2000, None, b"v")
    assert builder.build() == message(5, 1, 0, 1000, b"k", None) + message(
        6, 1, 0, 2000, None, b"v"
    )


def test_magic1_wrapper_has_relative_inner_offsets() -> None:
    """Inner offsets 0..n-1, wrapper offset = last absolute offset, wrapper ts = max."""
    builder = LegacyBatchBuilder(magic=1, compression=GZIP, base_offset=100)
    for ts in (30, 10, 20):
        builder.append(ts, None, b"x")
    buf = builder.build()
    offset, _size, _crc, magic, attributes, ts = struct.unpack_from(">qiIbbq", buf)
    assert (offset, magic, attributes, ts) == (102, 1, GZIP, 30)
    batch = LegacyBatch.from_buffer(buf)
    assert (batch.last_offset, batch.base_offset, batch.next_offset) == (102, 100, 103)
    assert [r.offset for r in batch] == [100, 101, 102]
    assert [r.timestamp for r in batch] == [30, 10, 20]


def wrapper(offset: int, magic: int, attributes: int, ts: int, inner: bytes) -> bytes:
    return message(offset, magic, attributes, ts, None, compress(attributes & 7, inner))


def test_magic1_relative_offsets_from_the_wrapper() -> None:
    """Magic 1 inner offsets are made absolute from the wrapper's offset."""
    inner = b"".join(message(i, 1, 0, 5, None, b"%d" % i) for i in range(3))
    records = read_all(wrapper(52, 1, GZIP, 9, inner))
    assert [r.offset for r in records] == [50, 51, 52]


def test_magic1_wrapper_offset_zero_means_base_zero() -> None:
    """Some librdkafka versions write wrapper offset 0: records then start at 0."""
    inner = b"".join(message(i, 1, 0, 5, None, b"x") for i in range(3))
    assert [r.offset for r in read_all(wrapper(0, 1, GZIP, 9, inner))] == [0, 1, 2]


def test_magic1_wrapper_offset_below_last_inner_is_corrupt() -> None:
    """A wrapper offset below its last inner offset is corrupt."""
    inner = b"".join(message(i, 1, 0, 5, None, b"x") for i in range(5))
    with pytest.raises(CorruptRecordError):
        read_all(wrapper(2, 1, GZIP, 9, inner))


def test_magic0_inner_offsets_are_absolute() -> None:
    """Magic 0 inner offsets are used as they are."""
    inner = b"".join(message(70 + i, 0, 0, -1, None, b"x") for i in range(3))
    assert [r.offset for r in read_all(wrapper(72, 0, SNAPPY, -1, inner))] == [70, 71, 72]


def test_magic1_log_append_time_wrapper_stamps_inner_records() -> None:
    """A LogAppendTime wrapper gives its timestamp to every inner record."""
    inner = b"".join(message(i, 1, 0, 5 + i, None, b"x") for i in range(3))
    records = read_all(wrapper(2, 1, GZIP | 0x08, 777, inner))
    assert [r.timestamp for r in records] == [777, 777, 777]
    batch = LegacyBatch.from_buffer(wrapper(2, 1, GZIP | 0x08, 777, inner))
    assert batch.is_log_append_time and batch.timestamp == 777


def test_log_append_time_builder() -> None:
    """The builder's LogAppendTime wrapper carries the max timestamp to all records."""
    builder = LegacyBatchBuilder(magic=1, compression=LZ4, log_append_time=True)
    builder.append(40, None, b"a")
    builder.append(50, None, b"b")
    assert [r.timestamp for r in read_all(builder.build())] == [50, 50]


def test_magic0_has_no_timestamp() -> None:
    """Magic 0 records have timestamp -1."""
    assert read_all(message(3, 0, 0, -1, b"k", b"v")) == [Record(3, -1, b"k", b"v", ())]


def test_wrong_crc() -> None:
    """A flipped byte fails the CRC check; with the check off it is read."""
    buf = bytearray(message(0, 1, 0, 5, b"k", b"v"))
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        LegacyBatch.from_buffer(bytes(buf))
    assert LegacyBatch.from_buffer(bytes(buf), check_crc=False).records()[0].value == b"w"


def test_inner_crc_is_checked() -> None:
    """Inner messages of a wrapper have their CRCs checked too."""
    inner = bytearray(message(0, 1, 0, 5, None, b"x"))
    inner[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        read_all(wrapper(0, 1, GZIP, 5, bytes(inner)))


@pytest.mark.parametrize(
    "inner",
    [
        b"",  # no records
        message(0, 1, GZIP, 5, None, compress(GZIP, message(0, 1, 0, 5, None, b"x"))),  # nested
        message(0, 0, 0, -1, None, b"x"),  # magic differs from the wrapper's
        message(0, 1, 0, 5, None, b"x")[:-2],  # cut short
    ],
)
def test_bad_inner_message_sets(inner: bytes) -> None:
    """Empty, nested, mixed-magic or cut inner message sets are refused."""
    with pytest.raises((CorruptRecordError, TruncatedError)):
        read_all(wrapper(0, 1, GZIP, 5, inner))


def test_null_wrapper_value() -> None:
    """A compressed wrapper without a value is corrupt."""
    with pytest.raises(CorruptRecordError):
        read_all(message(0, 1, GZIP, 5, None, None))


def test_zstd_wrapper_is_unsupported() -> None:
    """zstd is not a legacy codec, for reading or writing."""
    with pytest.raises(UnsupportedCompressionError):
        read_all(message(0, 1, ZSTD, 5, None, b"x"))
    with pytest.raises(UnsupportedCompressionError):
        LegacyBatchBuilder(magic=1, compression=ZSTD)


def test_builder_argument_checks() -> None:
    """Magic 2 and LogAppendTime with magic 0 are refused."""
    with pytest.raises(EncodeError):
        LegacyBatchBuilder(magic=2)
    with pytest.raises(EncodeError):
        LegacyBatchBuilder(magic=0, log_append_time=True)


@pytest.mark.parametrize(
    "buf",
    [
        message(0, 1, 0, 5, b"k", b"v")[:-1],  # entry past the buffer
        struct.pack(">qi", 0, 5) + b"\x00" * 5,  # size below the minimum
        b"\x00" * 8,  # not even a log overhead
    ],
)
def test_truncated_or_tiny_entries(buf: bytes) -> None:
    """Entries cut short or below the minimum size raise."""
    with pytest.raises((TruncatedError, CorruptRecordError)):
        LegacyBatch.from_buffer(buf)


def test_key_length_past_message() -> None:
    """A key length past the message is corrupt."""
    body = struct.pack(">bbqi", 1, 0, 5, 1000) + b"k" + struct.pack(">i", -1)
    buf = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError):
        LegacyBatch.from_buffer(buf)


def test_mixed_magics_in_one_walk() -> None:
    """One buffer with magic 0, 1 and 2 entries reads in order."""
    from kafkette.protocol.records import RecordBatchBuilder

    v2 = RecordBatchBuilder(base_offset=2)
    v2.append(9, b"c", b"3")
    buf = message(0, 0, 0, -1, b"a", b"1") + message(1, 1, 0, 8, b"b", b"2") + v2.build()
    assert read_all(buf) == [
        Record(0, -1, b"a", b"1", ()),
        Record(1, 8, b"b", b"2", ()),
        Record(2, 9, b"c", b"3", ()),
    ]
    assert [b.magic for b in iter_batches(buf)] == [0, 1, 2]


def test_magic0_lz4_round_trip() -> None:
    """Magic 0 lz4 wrappers round-trip with Kafka 0.8's header checksum."""
    builder = LegacyBatchBuilder(magic=0, compression=LZ4, base_offset=9)
    builder.append(0, b"k", b"v" * 50)
    builder.append(0, None, b"w")
    assert read_all(builder.build()) == [
        Record(9, -1, b"k", b"v" * 50, ()),
        Record(10, -1, None, b"w", ()),
    ]
