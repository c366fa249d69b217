"""The C record parser against the pure-Python one: same records, same errors, no leaks.

These tests need the extension built (``pip install -e .`` with a compiler);
without it the import below fails, loudly, rather than skipping.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import CorruptRecordError, ProtocolError
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    _speedups,
    speedups,
)
from kafkette.protocol.records.record_parser import parse_records
from kafkette.protocol.records.varint import zigzag
from tests.protocol.records.strategies import record_specs

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

Fields = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[bytes, "bytes | None"], ...]]


@pytest.fixture(autouse=True)
def c_extension() -> Iterator[None]:
    """The extension in use here even under KAFKETTE_NO_EXTENSIONS=1."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(speedups, "parse_records", _speedups.parse_records)
        patch.setattr(speedups, "encode_record", _speedups.encode_record)
        yield


@contextmanager
def python_parser() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(speedups, "parse_records", None)
        yield


def outcome(data: Any, count: int, base_offset: int, base_ts: int, fixed: int | None) -> Any:
    """The records :func:`parse_records` returns, or the error it raises (class, message)."""
    try:
        return parse_records(data, count, base_offset, base_ts, fixed)
    except ProtocolError as exc:
        return type(exc), str(exc)


def python_outcome(data: Any, count: int, base_offset: int, base_ts: int, fixed: int | None) -> Any:
    with python_parser():
        return outcome(bytes(data), count, base_offset, base_ts, fixed)


def varint(value: int, padding: int = 0) -> bytes:
    """Zig-zag varint of a signed 64-bit value, with ``padding`` redundant continuation bytes."""
    z = zigzag(value) & ((1 << 64) - 1)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    for _ in range(min(padding, 10 - len(out))):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def encode_record(fields: Fields, padding: int) -> bytes:
    ts_delta, offset_delta, key, value, headers = fields
    body = bytearray(b"\x00")
    body += varint(ts_delta, padding) + varint(offset_delta)
    for field in (key, value):
        body += varint(-1) if field is None else varint(len(field), padding) + field
    body += varint(len(headers))
    for name, hvalue in headers:
        body += varint(len(name)) + name
        body += varint(-1) if hvalue is None else varint(len(hvalue)) + hvalue
    return varint(len(body), padding) + bytes(body)


int64 = st.integers(INT64_MIN, INT64_MAX)
deltas = st.one_of(st.integers(-200, 10_000), int64)
maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
header_names = st.one_of(st.text(max_size=8).map(str.encode), st.binary(max_size=4))
fields = st.tuples(
    deltas,
    deltas,
    maybe_bytes,
    maybe_bytes,
    st.lists(st.tuples(header_names, maybe_bytes), max_size=3).map(tuple),
)
bases = st.one_of(st.integers(-(1 << 40), 1 << 45), int64)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(fields, max_size=20),
    padding=st.integers(0, 3),
    base_offset=bases,
    base_ts=bases,
    fixed=st.one_of(st.none(), int64),
)
def test_same_records_as_python(
    records: list[Fields], padding: int, base_offset: int, base_ts: int, fixed: int | None
) -> None:
    """Hand-made records sections (long, padded and overflowing varints, binary header names):
    the C parser returns the Python parser's records or, when these raise, the same error."""
    data = b"".join(encode_record(f, padding) for f in records)
    expected = python_outcome(data, len(records), base_offset, base_ts, fixed)
    assert outcome(data, len(records), base_offset, base_ts, fixed) == expected
    direct = _speedups.parse_records(data, len(records), base_offset, base_ts, fixed, Record)
    if isinstance(expected, list):
        assert all(type(r) is Record for r in expected)
        if direct is not None:  # None: a 64-bit overflow, which the Python parser then reads
            assert direct == expected
            assert all(type(r) is Record for r in direct)
    else:
        assert direct is None


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(fields, min_size=1, max_size=6),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
    cut=st.integers(0, 3),
    count_change=st.integers(-1, 1),
)
def test_damaged_records_same_outcome(
    records: list[Fields], edits: list[tuple[int, int]], cut: int, count_change: int
) -> None:
    """Bytes overwritten, the end cut off, a wrong count: same records or same error."""
    data = bytearray(b"".join(encode_record(f, 0) for f in records))
    for at, byte in edits:
        data[at % len(data)] = byte
    del data[len(data) - cut :]
    count = len(records) + count_change
    assert outcome(bytes(data), count, 0, 0, None) == python_outcome(data, count, 0, 0, None)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_buffer_types(kind: type) -> None:
    """bytes, bytearray and memoryview (also a slice of a bigger buffer) read the same."""
    records: list[Fields] = [(i, i, b"k%d" % i, b"v" * i, ((b"h", None),)) for i in range(50)]
    data = b"".join(encode_record(f, 0) for f in records)
    expected = python_outcome(data, 50, 7, 1000, None)
    assert len(expected) == 50
    assert _speedups.parse_records(kind(data), 50, 7, 1000, None, Record) == expected
    framed = memoryview(b"xx" + data + b"yy")[2:-2]
    assert _speedups.parse_records(framed, 50, 7, 1000, None, Record) == expected


def test_malformed_returns_none() -> None:
    """The C function leaves every error to the Python parser: it returns None."""
    good = encode_record((0, 0, b"k", b"v", ()), 0)
    cases = [
        (good[:-1], 1),  # truncated
        (good, 2),  # fewer records than declared
        (good + b"\x00", 1),  # bytes after the records
        (good, -1),  # negative count
        (encode_record((0, 0, b"k", b"v", ((b"\xff", b"x"),)), 0), 1),  # header key not UTF-8
        (b"\x0e\x00\x00\x00\x03k\x02v\x00" + b"\x00" * 6, 1),  # key length -2
        (b"\x80" * 10 + b"\x01", 1),  # varint longer than ten bytes
        (b"\xff" * 9 + b"\x7f", 1),  # a length beyond 64 bits
    ]
    for data, count in cases:
        assert _speedups.parse_records(data, count, 0, 0, None, Record) is None
        with pytest.raises(ProtocolError):
            parse_records(data, count, 0, 0, None)


def test_log_append_time_shares_the_timestamp_object() -> None:
    """A LogAppendTime batch's records all carry the batch's timestamp."""
    data = b"".join(encode_record((i, i, None, b"v", ()), 0) for i in range(3))
    fixed = 1_700_000_000_123
    records = _speedups.parse_records(data, 3, 10, 5, fixed, Record)
    assert records == [Record(10 + i, fixed, None, b"v", ()) for i in range(3)]


def test_bad_arguments() -> None:
    """A record type that is not a tuple subclass, a non-int timestamp: TypeError."""
    with pytest.raises(TypeError):
        _speedups.parse_records(b"", 0, 0, 0, None, dict)
    with pytest.raises(TypeError):
        _speedups.parse_records(b"", 0, 0, 0, "1", Record)
    with pytest.raises(TypeError):
        _speedups.parse_records("text", 0, 0, 0, None, Record)


@settings(max_examples=25, deadline=None)
@given(
    specs=record_specs(),
    codec=st.sampled_from([NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD]),
    log_append_time=st.booleans(),
)
def test_batches_same_as_python(specs: list[Any], codec: int, log_append_time: bool) -> None:
    """Whole batches, compressed or not, through RecordBatch: the same records either way."""
    builder = RecordBatchBuilder(
        compression=codec, base_offset=123, log_append_time=log_append_time
    )
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    buf = builder.build()
    with python_parser():
        expected = list(RecordBatch.from_buffer(buf))
    batch = RecordBatch.from_buffer(buf)
    assert list(batch) == batch.records() == expected


def test_untracked_records_are_freed() -> None:
    """Records the C parser makes are untracked by the GC, and freed when dropped."""
    data = b"".join(encode_record((i, i, b"key", b"value", ((b"h", b"v"),)), 0) for i in range(10))
    records = _speedups.parse_records(data, 10, 0, 0, None, Record)
    assert records is not None
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.headers) for r in records)
    value = records[0].value
    held = sys.getrefcount(value)
    del records
    assert sys.getrefcount(value) == held - 1  # the record's reference is gone with it


class WithDict(tuple):  # type: ignore[type-arg]
    """A tuple subclass whose instances have a __dict__ (and a weakref slot)."""


class Slotless(tuple):  # type: ignore[type-arg]
    """A tuple subclass laid out as a tuple, like Record."""

    __slots__ = ()


@pytest.mark.parametrize("record_type", [Record, WithDict, Slotless])
def test_record_types(record_type: type[tuple[Any, ...]]) -> None:
    """Records of any tuple subclass: exact items, untracked, list untracked, freed."""
    specs = [(i, i, b"k%d" % i, b"v" * i, ((b"h", b"x"),) if i % 2 else ()) for i in range(5)]
    data = b"".join(encode_record(spec, 0) for spec in specs)
    records = _speedups.parse_records(data, 5, 100, 1000, None, record_type)
    assert records is not None
    assert [type(r) for r in records] == [record_type] * 5
    assert [tuple(r) for r in records] == [
        (100 + i, 1000 + i, b"k%d" % i, b"v" * i, (("h", b"x"),) if i % 2 else ()) for i in range(5)
    ]
    assert not gc.is_tracked(records)
    assert not any(gc.is_tracked(r) for r in records)
    if record_type is WithDict:
        records[0].note = "instances keep a working __dict__"
        assert records[0].__dict__ == {"note": "instances keep a working __dict__"}
    refs = sys.getrefcount(record_type)
    del records
    assert sys.getrefcount(record_type) == refs - 5  # each record held its type


class Wide(tuple):  # type: ignore[type-arg]
    """A tuple subclass of nine items laid out as a tuple, like the consumer's records."""

    __slots__ = ()


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(fields, max_size=12),
    prefix=st.tuples(st.text(max_size=5), st.integers(0, 1 << 31)),
    suffix=st.tuples(st.integers(-1, 1), st.one_of(st.none(), st.integers(0, 1 << 31))),
    fixed=st.one_of(st.none(), st.integers(0, 1 << 45)),
)
def test_prefix_and_suffix_wrap_each_record(
    records: list[Fields],
    prefix: tuple[str, int],
    suffix: tuple[int, int | None],
    fixed: int | None,
) -> None:
    """With a prefix and a suffix, each record is ``(*prefix, *record, *suffix)`` of the
    given type, the Python parser's record in the middle; untracked and freed as Records."""
    data = b"".join(encode_record(f, 0) for f in records)
    expected = python_outcome(data, len(records), 7, 1000, fixed)
    made = _speedups.parse_records(data, len(records), 7, 1000, fixed, Wide, prefix, suffix)
    if not isinstance(expected, list):
        assert made is None
        return
    if made is None:  # a 64-bit overflow, which the Python parser then reads: as without
        assert _speedups.parse_records(data, len(records), 7, 1000, fixed, Record) is None
        return
    assert [tuple(r) for r in made] == [(*prefix, *r, *suffix) for r in expected]
    assert all(type(r) is Wide for r in made)
    assert not gc.is_tracked(made) and not any(gc.is_tracked(r) for r in made)


def test_prefix_and_suffix_items_are_shared_and_released() -> None:
    """Every record holds the prefix's and suffix's own objects, and lets go of them."""
    topic = "".join(["to", "pic"])  # not interned: its reference count is this test's
    data = b"".join(encode_record((i, i, b"k", b"v", ()), 0) for i in range(3))
    held = sys.getrefcount(topic)
    made = _speedups.parse_records(data, 3, 0, 0, None, Wide, (topic, 4), (0, None))
    assert made is not None
    assert all(r[0] is topic for r in made)
    assert sys.getrefcount(topic) == held + 3
    del made
    assert sys.getrefcount(topic) == held
    assert _speedups.parse_records(data, 3, 0, 0, None, Record, (), ()) == [
        Record(i, i, b"k", b"v", ()) for i in range(3)
    ]


def test_prefix_and_suffix_take_atomic_items_only() -> None:
    """Records are untracked by the collector, so they may not hold what could make a
    cycle: a list in the prefix or suffix is a TypeError, as is a prefix not a tuple."""
    data = encode_record((0, 0, b"k", b"v", ()), 0)
    with pytest.raises(TypeError, match="str, int or None"):
        _speedups.parse_records(data, 1, 0, 0, None, Wide, ([],), ())
    with pytest.raises(TypeError, match="str, int or None"):
        _speedups.parse_records(data, 1, 0, 0, None, Wide, (), (1.5,))
    with pytest.raises(TypeError):
        _speedups.parse_records(data, 1, 0, 0, None, Wide, ["t", 0], ())


LEAK_SCRIPT = """
import resource, sys
from kafkette.protocol.records import Record, _speedups
from tests.protocol.records.test_speedups import encode_record

good = b"".join(
    encode_record((i, i, b"k%d" % i, b"v" * 100, ((b"h", b"x"), (b"n", None))), 0)
    for i in range(20)
)
bad = good[:-1]
class Wide(tuple):
    __slots__ = ()
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(20_000):
    _speedups.parse_records(good, 20, 0, 0, None, Record)
    _speedups.parse_records(bad, 20, 0, 0, None, Record)
before = rss()
for _ in range(100_000):
    _speedups.parse_records(good, 20, 0, 0, None, Record)
    _speedups.parse_records(bad, 20, 0, 0, None, Record)
    _speedups.parse_records(bytearray(good), 20, 0, 0, 5, Record)
    _speedups.parse_records(good, 20, 0, 0, None, Wide, ("topic", 3), (0, None))
    _speedups.parse_records(bad, 20, 0, 0, None, Wide, ("topic", 3), (0, None))
print(rss() - before)
"""


def test_no_leak() -> None:
    """1e5 rounds of good, truncated and bytearray input, with and without a prefix and a
    suffix: the peak RSS does not grow.

    Run in a child process so that the peak is this loop's alone.
    """
    out = subprocess.run(
        [sys.executable, "-c", LEAK_SCRIPT], capture_output=True, text=True, check=True
    )
    growth_kib = int(out.stdout)
    assert growth_kib < 1024, f"RSS grew by {growth_kib} KiB"


def test_truncated_error_message_is_pythons() -> None:
    """A record cut short gives the Python parser's error and message with the extension."""
    data = encode_record((0, 0, b"key", b"value", ()), 0)[:-1]
    assert speedups.parse_records is not None
    with pytest.raises(CorruptRecordError, match=r"^record length 14 runs past the records$"):
        parse_records(data, 1, 0, 0, None)


def build_batch(specs: list[Any], **kwargs: Any) -> bytes:
    builder = RecordBatchBuilder(**kwargs)
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    return builder.build()


@settings(max_examples=50, deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.one_of(st.integers(-(1 << 40), 1 << 45), int64),
            # around the two- and three-byte varint lengths; bytearrays take the Python path
            st.one_of(maybe_bytes, st.integers(8190, 8193).map(b"k".__mul__)),
            st.one_of(
                maybe_bytes,
                st.integers(1 << 20, (1 << 20) + 1).map(b"v".__mul__),
                st.binary(max_size=5).map(bytearray),
            ),
            st.sampled_from([(), (("h", b"v"),), (("n", None),)]),
        ),
        max_size=10,
    ),
    codec=st.sampled_from([NO_COMPRESSION, LZ4]),
)
def test_encoder_same_bytes_as_python(specs: list[Any], codec: int) -> None:
    """RecordBatchBuilder writes the same batch bytes (or raises the same error) either way."""

    def build_or_error() -> Any:
        try:
            return build_batch(specs, compression=codec, base_offset=5)
        except ProtocolError as exc:
            return type(exc), str(exc)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(speedups, "encode_record", None)
        expected = build_or_error()
    assert build_or_error() == expected


def test_encode_record_bytes() -> None:
    """One record: the exact bytes, and None for what the Python encoder handles."""
    assert _speedups.encode_record(0, 0, None, b"v") == b"\x0e\x00\x00\x00\x01\x02v\x00"
    assert _speedups.encode_record(1, 2, b"k", None) == bytes([7 * 2, 0, 2, 4, 2]) + b"k\x01\x00"
    assert _speedups.encode_record(-1, 64, b"", b"") == bytes([7 * 2, 0, 1, 0x80, 1, 0, 0, 0])
    assert _speedups.encode_record(0, 0, bytearray(b"k"), b"v") is None
    assert _speedups.encode_record(0, 0, b"k", "v") is None
    assert _speedups.encode_record(1 << 63, 0, b"k", b"v") is None
    assert _speedups.encode_record(0, -(1 << 64), b"k", b"v") is None


def test_encode_record_argument_count() -> None:
    """Four arguments exactly, as the Python encoder's signature without headers."""
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _speedups.encode_record(0, 0, None)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _speedups.encode_record(0, 0, None, b"v", ())
