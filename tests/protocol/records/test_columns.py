"""Record batches decoded into column buffers: the C decoder, the Python one, and the records.

Both decoders must give the same bytes, and those bytes must hold exactly the
records that iterating over the batch gives. The C decoder is imported
directly, so this also runs under KAFKETTE_NO_EXTENSIONS=1 (it needs the
extension built: without it the import fails, loudly).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    ZSTD,
    LegacyBatch,
    LegacyBatchBuilder,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    _columns,
    columns,
)
from kafkette.protocol.records.columns import BinaryColumn, Columns, ColumnsBuilder
from tests.protocol.records.strategies import Spec, record_specs, uniform_specs


@pytest.fixture(params=["c", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        c_append = _columns.append_columns if request.param == "c" else None
        patch.setattr(columns, "append_columns", c_append)
        yield request.param


def build(specs: list[Spec], base_offset: int, compression: int, log_append: bool) -> RecordBatch:
    builder = RecordBatchBuilder(
        base_offset=base_offset, compression=compression, log_append_time=log_append
    )
    for ts, key, value, headers in specs:
        builder.append(ts, key, value, headers)
    return RecordBatch.from_buffer(builder.build())


def decode(
    batches: list[RecordBatch | LegacyBatch], first: int, end: int, with_headers: bool
) -> Columns:
    builder = ColumnsBuilder(with_headers)
    for batch in batches:
        builder.append(batch, first, end)
    return builder.finish()


def binary_values(column: BinaryColumn, length: int) -> list[bytes | None]:
    ends = array("i", column.offsets)
    assert len(ends) == length + 1 and ends[0] == 0 and ends[-1] == len(column.data)
    valid = column.validity
    if valid is not None:
        assert len(valid) == (length + 7) // 8
        if length % 8:
            assert valid[-1] >> (length % 8) == 0  # padding bits clear
    out: list[bytes | None] = []
    for i in range(length):
        if valid is not None and not valid[i >> 3] >> (i & 7) & 1:
            assert ends[i] == ends[i + 1]
            out.append(None)
        else:
            out.append(bytes(column.data[ends[i] : ends[i + 1]]))
    assert column.null_count == out.count(None)
    return out


def as_records(cols: Columns) -> list[Record]:
    """The records the column buffers hold (headers () when left out)."""
    n = cols.rows
    offsets = array("q", cols.offsets)
    timestamps = array("q", cols.timestamps)
    assert len(offsets) == len(timestamps) == n
    keys = binary_values(cols.keys, n)
    values = binary_values(cols.values, n)
    headers: list[tuple[tuple[str, bytes | None], ...]] = [()] * n
    if cols.header_offsets is not None:
        assert cols.header_names is not None and cols.header_values is not None
        ends = array("i", cols.header_offsets)
        assert len(ends) == n + 1 and ends[0] == 0
        names = binary_values(cols.header_names, ends[-1])
        hvalues = binary_values(cols.header_values, ends[-1])
        assert None not in names
        pairs = [
            (name.decode(), value)
            for name, value in zip(names, hvalues, strict=True)
            if name is not None
        ]
        headers = [tuple(pairs[ends[i] : ends[i + 1]]) for i in range(n)]
    return [Record(offsets[i], timestamps[i], keys[i], values[i], headers[i]) for i in range(n)]


def expected(
    batches: list[RecordBatch | LegacyBatch], first: int, end: int, with_headers: bool
) -> list[Record]:
    return [
        r if with_headers else r._replace(headers=())
        for batch in batches
        for r in batch
        if first <= r.offset < end
    ]


batch_shapes = st.tuples(
    st.one_of(record_specs(max_size=40), uniform_specs()),
    st.integers(min_value=0, max_value=1 << 40),
    st.sampled_from([NO_COMPRESSION, GZIP, LZ4, ZSTD]),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    shapes=st.lists(batch_shapes, min_size=1, max_size=3),
    window=st.tuples(st.integers(-5, 60), st.integers(0, 500)),
    with_headers=st.booleans(),
)
def test_c_and_python_decode_the_records(
    shapes: list[tuple[list[Spec], int, int, bool]],
    window: tuple[int, int],
    with_headers: bool,
) -> None:
    batches: list[RecordBatch | LegacyBatch] = [build(*shape) for shape in shapes]
    base = batches[0].base_offset
    first, end = base + window[0], base + window[0] + window[1]
    results = []
    for c_append in (_columns.append_columns, None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(columns, "append_columns", c_append)
            results.append(decode(batches, first, end, with_headers))
    c_cols, python_cols = results
    assert c_cols == python_cols
    assert as_records(c_cols) == expected(batches, first, end, with_headers)


def test_nothing_kept_gives_empty_columns(decoder: str) -> None:
    batch = build([(5, b"k", b"v", (("h", b"x"),))] * 3, 10, NO_COMPRESSION, False)
    cols = decode([batch], 0, 10, True)
    assert cols.rows == 0 and as_records(cols) == []
    assert bytes(cols.keys.offsets) == bytes(4)


def test_log_append_time_and_legacy_batches(decoder: str) -> None:
    modern = build([(5, b"k", None, ()), (9, None, b"v", ())], 0, GZIP, True)
    legacy_builder = LegacyBatchBuilder(magic=1, base_offset=2)
    legacy_builder.append(77, b"a", b"b")
    legacy = LegacyBatch.from_buffer(legacy_builder.build())
    cols = decode([modern, legacy], 0, 100, False)
    records = as_records(cols)
    assert [r.timestamp for r in records] == [modern.header.max_timestamp] * 2 + [77]
    assert records == expected([modern, legacy], 0, 100, False)


def test_batches_accumulate_until_finish(decoder: str) -> None:
    one = build([(1, b"a", b"1", ())], 0, NO_COMPRESSION, False)
    two = build([(2, None, b"22", (("x", None),))], 1, NO_COMPRESSION, False)
    builder = ColumnsBuilder()
    builder.append(one, 0, 10)
    builder.append(two, 0, 10)
    assert len(builder) == 2 and builder.data_size == 1 + 1 + 2 + 1
    assert as_records(builder.finish()) == expected([one, two], 0, 10, True)
    assert len(builder) == 0
    builder.append(two, 0, 10)
    assert as_records(builder.finish()) == expected([two], 0, 10, True)


@settings(max_examples=200, deadline=None)
@given(specs=record_specs(max_size=8), cut=st.integers(0, 400), flip=st.integers(0, 255))
def test_damaged_records_raise_the_same_error_and_append_nothing(
    specs: list[Spec], cut: int, flip: int
) -> None:
    """A damaged records section: both decoders raise what iterating raises; no column grows."""
    raw = bytearray(build(specs, 0, NO_COMPRESSION, False).raw())
    raw.append(0)  # room for damage past the end too
    at = 61 + cut % max(1, len(raw) - 61)  # inside the records section
    raw[at] ^= flip or 1
    # header fields stay valid: only the records are damaged
    batch = RecordBatch.from_buffer(bytes(raw[:-1]), check_crc=False)
    try:
        list(batch)
        error = None
    except ProtocolError as exc:
        error = (type(exc), str(exc))
    good = build([(1, b"k", b"v", (("h", b"x"),))], 0, NO_COMPRESSION, False)
    for c_append in (_columns.append_columns, None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(columns, "append_columns", c_append)
            builder = ColumnsBuilder()
            builder.append(good, 0, 10)
            fresh = RecordBatch.from_buffer(bytes(raw[:-1]), check_crc=False)
            try:
                builder.append(fresh, 0, 1 << 62)
                got = None
            except ProtocolError as exc:
                got = (type(exc), str(exc))
            assert got == error
            if error is not None:
                assert as_records(builder.finish()) == list(good)
