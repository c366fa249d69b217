"""Turning the (decompressed) records section of a magic 2 batch into Records.

Theory of operation. Records are parsed one by one, with one- and two-byte
varints decoded inline. Producers mostly write *runs* of records with the
same layout: same length, same key and value lengths, no headers, one- or
two-byte timestamp and offset deltas. When the parser sees the next record
start like the one it just read, it tries a *columnar* pass over the run:
with ``S`` the record size, byte ``c`` of every record of the run is
``data[start + c :: S]``, so C code (bytes slicing, ``lstrip``,
``translate``, ``struct``) checks every constant byte and every varint width
of the whole run and extracts all keys, values and deltas, and Python code
runs once per run instead of once per field. A record is only taken in a run
once every one of its bytes that is not a delta, key or value byte has been
checked against the first record, so the result is exactly what the
record-by-record parser returns.

Bounds: every length is checked against the record's declared end and the
record's end against the data; any IndexError (a field running past the data)
becomes a :class:`CorruptRecordError`. Nothing here allocates more than the
data it was given.
"""

from __future__ import annotations

import struct
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any, Final

from kafkette.protocol.errors import (
    CorruptRecordError,
    InvalidLengthError,
    InvalidStringError,
)
from kafkette.protocol.records.record import Header, Record
from kafkette.protocol.records.varint import DECODED_1, read_varint

_new_record: Final = partial(tuple.__new__, Record)
_tuple_new: Final = tuple.__new__
_first: Final = itemgetter(0)

_MIN_RUN: Final = 4
_RETRY_GAP: Final = 32  # records to parse one by one after a run attempt fails

# translate() tables: 0 for a byte that may end a varint (< 0x80), 1 otherwise,
# and the opposite, so that lstrip(b"\0") counts the leading valid bytes.
_LAST_BYTE: Final = bytes(0 if b < 0x80 else 1 for b in range(256))
_CONT_BYTE: Final = bytes(1 if b < 0x80 else 0 for b in range(256))

# Low and high bytes of the two-byte varints of the offset deltas 0 .. 8191
# (entries below 64 are unused: those deltas take one byte).
_DELTA_LOW: Final = bytes(((2 * d) & 0x7F) | 0x80 for d in range(8192))
_DELTA_HIGH: Final = bytes(((2 * d) >> 7) & 0x7F for d in range(8192))

_two_byte_table: list[int] | None = None
_struct_cache: dict[str, struct.Struct] = {}


def _two_byte_values() -> list[int]:
    """``table[b0 | b1 << 8]``: signed value of the two-byte varint ``b0 b1``."""
    global _two_byte_table
    if _two_byte_table is None:
        table = [0] * 65536
        for b0 in range(0x80, 0x100):
            for b1 in range(0x80):
                z = (b0 & 0x7F) | (b1 << 7)
                table[b0 | (b1 << 8)] = (z >> 1) ^ -(z & 1)
        _two_byte_table = table
    return _two_byte_table


def _struct(fmt: str) -> struct.Struct:
    compiled = _struct_cache.get(fmt)
    if compiled is None:
        if len(_struct_cache) > 256:
            _struct_cache.clear()
        compiled = _struct_cache[fmt] = struct.Struct(fmt)
    return compiled


def parse_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
) -> list[Record]:
    """Parse exactly ``count`` records filling ``data``.

    ``fixed_timestamp``, when given (LogAppendTime batches), replaces every
    record's own timestamp.
    """
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    try:
        return _parse(data, count, base_offset, base_timestamp, fixed_timestamp)
    except IndexError:
        raise CorruptRecordError("a record field runs past the end of the records") from None


def _parse(
    data: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> list[Record]:
    out: list[Record] = []
    append = out.append
    d1 = DECODED_1
    n = len(data)
    pos = 0
    i = 0
    next_try = 1
    while i < count:
        if pos >= n:
            raise CorruptRecordError(f"batch declares {count} records but holds {i}")
        start = pos
        # record length
        b = data[pos]
        if b < 0x80:
            length = d1[b]
            pos += 1
        else:
            length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise CorruptRecordError(f"record length {length} runs past the records")
        p = pos + 1  # skip the attributes byte (unused by Kafka)
        # timestamp delta
        b = data[p]
        if b < 0x80:
            tsd = d1[b]
            p += 1
        else:
            b2 = data[p + 1]
            if b2 < 0x80:
                z = (b & 0x7F) | (b2 << 7)
                tsd = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                tsd, p = read_varint(data, p)
        # offset delta
        b = data[p]
        if b < 0x80:
            od = d1[b]
            p += 1
        else:
            b2 = data[p + 1]
            if b2 < 0x80:
                z = (b & 0x7F) | (b2 << 7)
                od = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                od, p = read_varint(data, p)
        # key
        b = data[p]
        if b < 0x80:
            kl = d1[b]
            p += 1
        else:
            kl, p = read_varint(data, p)
        if kl >= 0:
            key: bytes | None = data[p : p + kl]
            p += kl
        elif kl == -1:
            key = None
        else:
            raise InvalidLengthError(f"negative record key length {kl}")
        # value
        b = data[p]
        if b < 0x80:
            vl = d1[b]
            p += 1
        else:
            b2 = data[p + 1]
            if b2 < 0x80:
                z = (b & 0x7F) | (b2 << 7)
                vl = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                vl, p = read_varint(data, p)
        if vl >= 0:
            value: bytes | None = data[p : p + vl]
            p += vl
        elif vl == -1:
            value = None
        else:
            raise InvalidLengthError(f"negative record value length {vl}")
        # headers
        b = data[p]
        if b == 0:
            headers: tuple[Header, ...] = ()
            p += 1
        else:
            headers, p = _parse_headers(data, p, end)
        if p != end:
            raise CorruptRecordError(f"record declares {length} bytes, its fields take {p - pos}")
        append(
            _new_record(
                (
                    base_offset + od,
                    base_ts + tsd if fixed_ts is None else fixed_ts,
                    key,
                    value,
                    headers,
                )
            )
        )
        i += 1
        pos = end
        if i >= next_try and i < count and end < n and data[end] == data[start] and not headers:
            taken = _run(out, data, start, end, count - i, base_offset, base_ts, fixed_ts)
            if taken:
                i += taken
                pos = end + taken * (end - start)
            else:
                next_try = i + _RETRY_GAP
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes remain after the batch's {count} records")
    return out


def _parse_headers(data: bytes, p: int, end: int) -> tuple[tuple[Header, ...], int]:
    hc, p = read_varint(data, p)
    if hc < 0:
        raise InvalidLengthError(f"negative header count {hc}")
    if hc > end - p:  # each header takes at least two bytes
        raise CorruptRecordError(f"header count {hc} exceeds the record's size")
    headers: list[Header] = []
    for _ in range(hc):
        kl, p = read_varint(data, p)
        if kl < 0:
            raise InvalidLengthError(f"negative header key length {kl}")
        if p + kl > end:
            raise CorruptRecordError("header key runs past the record")
        try:
            hkey = data[p : p + kl].decode()
        except UnicodeDecodeError as exc:
            raise InvalidStringError(f"header key is not UTF-8: {exc}") from None
        p += kl
        vl, p = read_varint(data, p)
        if vl >= 0:
            if p + vl > end:
                raise CorruptRecordError("header value runs past the record")
            headers.append((hkey, data[p : p + vl]))
            p += vl
        elif vl == -1:
            headers.append((hkey, None))
        else:
            raise InvalidLengthError(f"negative header value length {vl}")
    return tuple(headers), p


def _varint_end(data: bytes, p: int) -> int:
    while data[p] >= 0x80:
        p += 1
    return p + 1


def _run(
    out: list[Record],
    data: bytes,
    start: int,
    pos: int,
    remaining: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> int:
    """Parse the run of records laid out like the one at ``start``, from ``pos``.

    Appends them to ``out`` and returns how many; 0 when no run is worth it.
    The record at ``start`` has already been parsed and is known valid.
    """
    size = pos - start
    m = min(remaining, (len(data) - pos) // size)
    if m < _MIN_RUN:
        return 0
    # Layout of the template record, as offsets from its start.
    ts_at = _varint_end(data, start) + 1 - start
    od_at = _varint_end(data, start + ts_at) - start
    kl_at = _varint_end(data, start + od_at) - start
    ts_width = od_at - ts_at
    od_width = kl_at - od_at
    if ts_at > 3 or ts_width > 2 or od_width > 2:
        return 0
    kl, key_at = read_varint(data, start + kl_at)
    key_at -= start
    vl_at = key_at + max(kl, 0)
    vl, value_at = read_varint(data, start + vl_at)
    value_at -= start
    if value_at + max(vl, 0) != size - 1:
        return 0  # the header count is not the single byte 0
    constants = [*range(ts_at - 1), *range(kl_at, key_at), *range(vl_at, value_at), size - 1]
    stop = pos + m * size
    r = m
    for c in constants:
        column = data[pos + c : stop : size]
        r = min(r, m - len(column.lstrip(bytes((data[start + c],)))))
    for at, width in ((ts_at, ts_width), (od_at, od_width)):
        if width == 1:
            column = data[pos + at : stop : size].translate(_LAST_BYTE)
        else:
            column = data[pos + at : stop : size].translate(_CONT_BYTE)
            r = min(r, m - len(column.lstrip(b"\0")))
            column = data[pos + at + 1 : stop : size].translate(_LAST_BYTE)
        r = min(r, m - len(column.lstrip(b"\0")))
    if r < _MIN_RUN:
        return 0
    stop = pos + r * size
    timestamps: Any
    if fixed_ts is not None:
        timestamps = repeat(fixed_ts, r)
    elif ts_width == 1:
        # A per-run table turns each timestamp into one list lookup.
        table = list(map(base_ts.__add__, DECODED_1))
        timestamps = map(table.__getitem__, data[pos + ts_at : stop : size])
    else:
        timestamps = map(base_ts.__add__, _two_byte_column(data, pos + ts_at, stop, size, r))
    offsets: Any = _consecutive(data, pos + od_at, stop, size, r, od_width)
    if offsets is None:
        if od_width == 1:
            deltas: Any = map(DECODED_1.__getitem__, data[pos + od_at : stop : size])
        else:
            deltas = _two_byte_column(data, pos + od_at, stop, size, r)
        offsets = map(base_offset.__add__, deltas)
    else:
        offsets = range(base_offset + offsets, base_offset + offsets + r)
    view = memoryview(data)[pos:stop]
    keys: Any
    values: Any
    if kl >= 0 and vl >= 0:
        fmt = f"{key_at}x{kl}s{value_at - key_at - kl}x{vl}s1x"
        keys, values = zip(*_struct(fmt).iter_unpack(view), strict=True)
    elif kl >= 0:
        keys = map(_first, _struct(f"{key_at}x{kl}s{size - key_at - kl}x").iter_unpack(view))
        values = repeat(None, r)
    elif vl >= 0:
        keys = repeat(None, r)
        values = map(_first, _struct(f"{value_at}x{vl}s1x").iter_unpack(view))
    else:
        keys, values = repeat(None, r), repeat(None, r)
    fields = zip(offsets, timestamps, keys, values, repeat((), r), strict=False)
    out.extend(map(_tuple_new, repeat(Record), fields))
    return r


def _two_byte_column(data: bytes, at: int, stop: int, size: int, r: int) -> Any:
    """Signed values of the two-byte varints at ``at``, ``at + size``, ... (checked)."""
    pairs = bytearray(2 * r)
    pairs[0::2] = data[at:stop:size]
    pairs[1::2] = data[at + 1 : stop : size]
    return map(_two_byte_values().__getitem__, struct.unpack(f"<{r}H", pairs))


def _consecutive(data: bytes, at: int, stop: int, size: int, r: int, width: int) -> int | None:
    """First offset delta of the column if the deltas count up by one, else None."""
    b0 = data[at]
    if width == 1:
        first = DECODED_1[b0]
        if first < 0 or first + r > 64:
            return None
        return first if data[at:stop:size] == bytes(range(2 * first, 2 * (first + r), 2)) else None
    z = (b0 & 0x7F) | (data[at + 1] << 7)
    first = z >> 1
    if z & 1 or first < 64 or first + r > 8192:
        return None
    if (
        data[at:stop:size] != _DELTA_LOW[first : first + r]
        or data[at + 1 : stop : size] != _DELTA_HIGH[first : first + r]
    ):
        return None
    return first
