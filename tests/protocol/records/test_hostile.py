"""Hostile and broken input: every case raises a specific kafkette.protocol.errors class."""

from __future__ import annotations

import contextlib
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    InvalidLengthError,
    InvalidStringError,
    ProtocolError,
    TruncatedError,
    UnsupportedCompressionError,
)
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    compress,
    iter_batches,
    record_runs,
)
from kafkette.protocol.records.batch_header import BatchHeader
from kafkette.protocol.records.record_parser import parse_records
from kafkette.protocol.records.varint import encode_varint
from tests.protocol.records.bombs import gzip_gib_of_zeros
from tests.protocol.records.strategies import uniform_specs

MIB = 1 << 20


def batch_with_records(records: bytes, count: int, attributes: int = 0) -> bytes:
    """A magic 2 batch around hand-made record bytes, with a valid CRC."""
    after_crc = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    crc = crc32c(records, crc32c(after_crc))
    prefix = struct.pack(">qiibI", 0, 49 + len(records), -1, 2, crc)
    return prefix + after_crc + records


def record(*fields: bytes) -> bytes:
    """A record: length varint, then attributes byte and the given field bytes."""
    body = b"\x00" + b"".join(fields)
    return encode_varint(len(body)) + body


def v(n: int) -> bytes:
    return encode_varint(n)


GOOD = record(v(0), v(0), v(1), b"k", v(1), b"v", v(0))


def parse(buf: bytes) -> list[Record]:
    return list(RecordBatch.from_buffer(buf))


def test_sane_hand_made_batch() -> None:
    """The hand-made batch helper itself produces a valid batch."""
    assert [tuple(r) for r in parse(batch_with_records(GOOD, 1))] == [(0, 0, b"k", b"v", ())]


@pytest.mark.parametrize("cut", [0, 10, 60, 70])
def test_truncated_batch(cut: int) -> None:
    """A batch cut anywhere raises TruncatedError."""
    buf = batch_with_records(GOOD * 3, 3)
    with pytest.raises(TruncatedError):
        RecordBatch.from_buffer(buf[:cut])


def test_truncated_batch_in_a_fetch_is_dropped_or_raises() -> None:
    """A partial trailing batch is dropped by default, raises on request."""
    one = RecordBatchBuilder().build()
    builder = RecordBatchBuilder(base_offset=1)
    builder.append(1, b"k", b"v")
    two = builder.build()
    buf = one + two[:-3]
    assert [b.header.base_offset for b in iter_batches(buf)] == [0]  # type: ignore[union-attr]
    with pytest.raises(TruncatedError):
        list(iter_batches(buf, allow_partial=False))


def test_wrong_crc() -> None:
    """A flipped byte fails the CRC check; with the check off it is read."""
    buf = bytearray(batch_with_records(GOOD, 1))
    buf[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        RecordBatch.from_buffer(bytes(buf))
    # Without the check the flipped byte is simply read.
    assert len(list(RecordBatch.from_buffer(bytes(buf), check_crc=False))) == 1


def test_batch_length_too_small() -> None:
    """A batch length below the header size is corrupt."""
    buf = bytearray(batch_with_records(b"", 0))
    struct.pack_into(">i", buf, 8, 20)
    with pytest.raises(CorruptRecordError):
        RecordBatch.from_buffer(bytes(buf))


def test_negative_batch_length_in_a_walk() -> None:
    """A negative batch length is corrupt."""
    buf = bytearray(batch_with_records(GOOD, 1))
    struct.pack_into(">i", buf, 8, -5)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(buf)))


def test_unknown_magic_in_a_walk() -> None:
    """An entry of unknown magic is corrupt."""
    buf = bytearray(batch_with_records(GOOD, 1))
    buf[16] = 7
    with pytest.raises(CorruptRecordError, match="magic 7"):
        list(iter_batches(bytes(buf)))


@pytest.mark.parametrize(
    ("records", "count"),
    [
        (GOOD, 2),  # fewer records than declared
        (GOOD * 2, 1),  # more bytes than declared records
        (b"", 1),
    ],
)
def test_record_count_mismatch(records: bytes, count: int) -> None:
    """A record count that disagrees with the records is corrupt."""
    with pytest.raises(CorruptRecordError):
        parse(batch_with_records(records, count))


def test_negative_record_count() -> None:
    """A negative record count is corrupt."""
    with pytest.raises(CorruptRecordError):
        parse(batch_with_records(GOOD, -1))


@pytest.mark.parametrize(
    "body",
    [
        record(v(0), v(0), v(500), b"k", v(1), b"v", v(0)),  # key length past the record
        record(v(0), v(0), v(1), b"k", v(1 << 30), b"v", v(0)),  # huge value length
        record(v(0), v(0), v(1), b"k", v(1), b"v", v(3)),  # header count past the record
        record(v(0), v(0), v(1), b"k", v(1), b"v", v(1), v(100), b"x"),  # header key past end
        v(1 << 40) + b"\x00",  # record length past the records
        v(-5) + b"\x00",  # negative record length
        b"\xff" * 11,  # endless varint
        v(3) + record(v(0), v(0), v(1), b"k", v(1), b"v", v(0))[1:],  # length below the fields
        record(v(0), v(0), v(1), b"k", v(1), b"v", v(0), b"extra"),  # bytes after the fields
    ],
)
def test_lengths_past_the_data(body: bytes) -> None:
    """Lengths that run past their record or the data are corrupt."""
    with pytest.raises(CorruptRecordError):
        parse(batch_with_records(body, 1))


@pytest.mark.parametrize(
    "body",
    [
        record(v(0), v(0), v(-2), v(1), b"v", v(0)),  # key length -2
        record(v(0), v(0), v(-1), v(-7), v(0)),  # value length -7
        record(v(0), v(0), v(-1), v(-1), v(-1)),  # header count -1
        record(v(0), v(0), v(-1), v(-1), v(1), v(-3), v(-1)),  # header key length -3
        record(v(0), v(0), v(-1), v(-1), v(1), v(1), b"h", v(-9)),  # header value length -9
    ],
)
def test_negative_lengths(body: bytes) -> None:
    """Lengths below -1, and a header count or header key length of -1, are invalid."""
    with pytest.raises(InvalidLengthError):
        parse(batch_with_records(body, 1))


def test_invalid_utf8_header_key() -> None:
    """A header key that is not UTF-8 raises InvalidStringError."""
    body = record(v(0), v(0), v(-1), v(-1), v(1), v(2), b"\xff\xfe", v(-1))
    with pytest.raises(InvalidStringError):
        parse(batch_with_records(body, 1))


def test_null_header_value_and_null_fields() -> None:
    """Null key, value and header value read as None."""
    body = record(v(0), v(0), v(-1), v(-1), v(1), v(1), b"h", v(-1))
    assert [tuple(r) for r in parse(batch_with_records(body, 1))] == [
        (0, 0, None, None, (("h", None),))
    ]


def test_unknown_codec() -> None:
    """A batch whose attributes name codec 6 raises UnsupportedCompressionError."""
    with pytest.raises(UnsupportedCompressionError):
        parse(batch_with_records(GOOD, 1, attributes=6))


def test_corrupt_compressed_records() -> None:
    """Records that are not valid lz4 are corrupt."""
    with pytest.raises(CorruptRecordError):
        parse(batch_with_records(b"definitely not lz4", 1, attributes=LZ4))


def test_decompression_bomb_in_a_batch() -> None:
    """1 GiB of zeros, gzip-compressed as the records of a batch, stops at max_decompressed."""
    buf = batch_with_records(gzip_gib_of_zeros(), 1, attributes=GZIP)
    batch = RecordBatch.from_buffer(buf, max_decompressed=8 * MIB)
    with pytest.raises(DecompressionLimitError):
        batch.records()


def test_compressed_records_with_corrupt_content() -> None:
    """Decompression succeeds but the records inside are broken."""
    inner = compress(GZIP, b"\x7f" * 20)
    with pytest.raises(CorruptRecordError):
        parse(batch_with_records(inner, 1, attributes=GZIP))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), count=st.integers(-2, 10))
def test_garbage_records_raise_protocol_errors_only(data: bytes, count: int) -> None:
    """Random record bytes never escape as IndexError, struct.error or ValueError."""
    buf = batch_with_records(data, count)
    with contextlib.suppress(ProtocolError):
        parse(buf)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_valid_batches_raise_protocol_errors_only(data: st.DataObject) -> None:
    """Damaged records never escape as a non-protocol exception."""
    builder = RecordBatchBuilder()
    for i in range(30):
        builder.append(1000 + i, b"key", b"x" * 100, (("h", b"v"),) if i == 7 else ())
    buf = bytearray(builder.build())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(61, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        list(RecordBatch.from_buffer(bytes(buf), check_crc=False))


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_garbage_walk_raises_protocol_errors_only(data: bytes) -> None:
    """Random bytes walked as batches raise only protocol errors."""
    try:
        for batch in iter_batches(data, allow_partial=False):
            list(batch)
    except ProtocolError:
        pass


def _outcome(body: bytes, count: int, base_ts: int) -> object:
    try:
        return parse_records(body, count, 0, base_ts)
    except ProtocolError as exc:
        return type(exc)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_damaged_runs_read_the_same_by_both_paths(data: st.DataObject) -> None:
    """On damaged same-shaped records, the columnar paths and the one-by-one
    parser agree exactly: same records, or the same error class."""
    specs = data.draw(uniform_specs())
    builder = RecordBatchBuilder()
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    buf = bytearray(builder.build())
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(61, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    header = BatchHeader.parse(buf)
    body = bytes(buf[61:])
    fast = _outcome(body, header.record_count, header.base_timestamp)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_runs, "MIN_RUN", 1 << 30)
        slow = _outcome(body, header.record_count, header.base_timestamp)
    assert fast == slow
