"""RecordBatch.from_buffer: which check fails first, with its exact class and message."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from kafkette.protocol.errors import CorruptRecordError, ProtocolError, TruncatedError
from kafkette.protocol.records import Record, RecordBatch, RecordBatchBuilder

BATCH = RecordBatchBuilder(base_offset=40).build()  # one batch, no records: 61 bytes


def with_field(fmt: str, at: int, value: int, buf: bytes = BATCH) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("buf", "pos", "error", "message"),
    [
        (BATCH[:60], 0, TruncatedError, "record batch header needs 61 bytes, 60 available"),
        (BATCH, 5, TruncatedError, "record batch header needs 61 bytes, 56 available"),
        (BATCH, 70, TruncatedError, "record batch header needs 61 bytes, 0 available"),
        (
            with_field(">b", 16, 1),
            0,
            CorruptRecordError,
            "expected a magic 2 record batch, found magic 1",
        ),
        # a wrong magic is reported before a bad length
        (
            with_field(">i", 8, 3, with_field(">b", 16, 0)),
            0,
            CorruptRecordError,
            "expected a magic 2 record batch, found magic 0",
        ),
        (with_field(">i", 8, 48), 0, CorruptRecordError, "record batch length 48 is too small"),
        (with_field(">i", 8, -1), 0, CorruptRecordError, "record batch length -1 is too small"),
        (
            with_field(">i", 8, 50),
            0,
            TruncatedError,
            "record batch of 62 bytes runs past the end of the buffer (61 bytes available)",
        ),
        (
            b"\x00" * 3 + with_field(">i", 8, 50),
            3,
            TruncatedError,
            "record batch of 62 bytes runs past the end of the buffer (61 bytes available)",
        ),
        # a wrong CRC (the record count is inside it) is reported before the count
        (
            with_field(">i", 57, -1),
            0,
            CorruptRecordError,
            "record batch at offset 40 has CRC 0x{:08x}, header says 0x{:08x}",
        ),
    ],
)
def test_header_errors(buf: bytes, pos: int, error: type[ProtocolError], message: str) -> None:
    """Short buffer, magic, length, bounds, CRC: checked in this order, with these messages."""
    if "CRC" in message:
        message = message.format(crc32c(buf[21:]), struct.unpack_from(">I", buf, 17)[0])
    with pytest.raises(error) as info:
        RecordBatch.from_buffer(buf, pos)
    assert type(info.value) is error
    assert str(info.value) == message


def test_negative_count_without_crc_check() -> None:
    """With the CRC not checked, a negative record count is the error."""
    buf = with_field(">i", 57, -3)
    with pytest.raises(CorruptRecordError) as info:
        RecordBatch.from_buffer(buf, check_crc=False)
    assert str(info.value) == "negative record count -3"


def test_view_fields_and_records() -> None:
    """A batch inside a larger buffer: header fields, records, size; the buffer is not copied."""
    builder = RecordBatchBuilder(base_offset=7, log_append_time=True)
    builder.append(1000, b"k", b"v")
    builder.append(1005, None, b"w", [("h", b"x")])
    batch_bytes = builder.build()
    buf = bytearray(b"pad" + batch_bytes + b"tail")
    batch = RecordBatch.from_buffer(buf, 3)
    assert (batch.base_offset, batch.next_offset, batch.size, len(batch)) == (
        7,
        9,
        len(batch_bytes),
        2,
    )
    assert batch.header.max_timestamp == 1005
    assert list(batch) == [
        Record(7, 1005, b"k", b"v", ()),
        Record(8, 1005, None, b"w", (("h", b"x"),)),
    ]
    assert batch.raw() == batch_bytes
