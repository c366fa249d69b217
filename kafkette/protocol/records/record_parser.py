"""Turning the (decompressed) records section of a magic 2 batch into Records.

Theory of operation. Records are parsed one by one, with one- and two-byte
varints decoded inline. Producers mostly write *runs* of records with the
same layout: same length, same key and value lengths, same header keys and
header value lengths, one- or two-byte timestamp and offset deltas. When a
record has been read, the parser tries a *columnar* pass
(:mod:`~kafkette.protocol.records.record_runs`) over the records that follow
it: with ``S`` the record size, byte ``c`` of every record of the run is
``data[start + c :: S]``, so C code (bytes slicing, ``lstrip``,
``translate``, ``struct``) checks every constant byte and every varint width
of the whole run and extracts all keys, values and deltas, and Python code
runs once per run instead of once per field. A record is only taken in a run
once every one of its bytes that is not a delta, key or value byte has been
checked against the first record, so the result is exactly what the
record-by-record parser returns. Records that differ in value length only
(the usual shape of real traffic) take a *varied run*: a short loop reads
each record's length, value length and value, and the fixed-size prefixes
(attributes, deltas, key) and header suffixes are joined into buffers of
same-sized rows that are checked and decoded column-wise as above.

Laziness and the garbage collector. Parsing validates everything and keeps,
per run, columns (an offset range, a timestamp table and the raw deltas, the
tuple of values); :func:`iter_records` makes the Record objects only as the
caller iterates. A consumer that looks at each record and drops it then holds
one Record at a time, which matters: Records are GC-tracked tuples, and a
thousand of them alive at once trigger collections that cost as much as the
parsing. Records outside runs are kept as plain tuples (which the collector
stops tracking) until iteration.

The C extension. When :mod:`~kafkette.protocol.records.speedups` provides
it, a C function parses the whole records section and makes the Records
(untracked by the garbage collector, so laziness buys nothing there); on data
that is not well formed it returns None and the Python code below runs, so
errors are the same with and without the extension.

Bounds: every length is checked against the record's declared end and the
record's end against the data; any IndexError (a field running past the data)
becomes a :class:`CorruptRecordError`. Nothing here allocates more than the
data it was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from typing import Final

from kafkette.protocol.errors import (
    CorruptRecordError,
    InvalidLengthError,
    InvalidStringError,
)
from kafkette.protocol.records import record_runs, speedups
from kafkette.protocol.records.record import Header, Record
from kafkette.protocol.records.record_runs import Segment
from kafkette.protocol.records.varint import DECODED_1, read_varint

_tuple_new: Final = tuple.__new__
_RETRY_GAP: Final = 32  # records to parse one by one after a run attempt fails


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
    return list(
        iter_records(parse_segments(data, count, base_offset, base_timestamp, fixed_timestamp))
    )


def parse_segments(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
) -> list[Segment]:
    """Validate the ``count`` records filling ``data``; return them as segments.

    ``data`` may be any buffer: the records' keys and values are bytes.

    Every error is raised here; :func:`iter_records` then cannot fail.
    """
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    c_parse = speedups.parse_records
    if c_parse is not None:
        # None: data not well formed, and the Python parser below raises the error
        records = c_parse(data, count, base_offset, base_timestamp, fixed_timestamp, Record)
        if records is not None:
            return [(records, None)]
    if not isinstance(data, bytes):
        data = bytes(data)  # keys and values must be bytes, not slices of a view
    try:
        return _parse(data, count, base_offset, base_timestamp, fixed_timestamp)
    except IndexError:
        raise CorruptRecordError("a record field runs past the end of the records") from None


def iter_records(segments: list[Segment]) -> Iterator[Record]:
    """Iterate over the records of ``segments``, making each Record as it is reached.

    May be called any number of times on the same segments.
    """
    if len(segments) == 1 and len(segments[0]) == 2:  # the C parser's list of Records
        return iter(segments[0][0])
    return chain.from_iterable(map(_segment_records, segments))


def _segment_records(segment: Segment) -> Iterator[Record]:
    if len(segment) == 1:  # plain tuples of records parsed one by one
        return map(_tuple_new, repeat(Record), segment[0])
    if len(segment) == 2:  # Records made by the C extension
        return iter(segment[0])
    r, offsets, ts_get, ts_column, keys, values, header_columns = segment
    headers: Iterator[tuple[Header, ...]]
    if header_columns is None:
        headers = repeat((), r)
    else:
        # zip of one (name, value) iterator per header yields each record's headers tuple
        names, columns = header_columns
        headers = zip(
            *[
                repeat((name, None), r) if column is None else zip(repeat(name), column)
                for name, column in zip(names, columns, strict=True)
            ],
            strict=False,
        )
    fields = zip(
        offsets,
        repeat(ts_get, r) if ts_column is None else map(ts_get, ts_column),
        repeat(None, r) if keys is None else keys,
        repeat(None, r) if values is None else values,
        headers,
        strict=False,
    )
    return map(_tuple_new, repeat(Record), fields)


def _parse(
    data: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> list[Segment]:
    segments: list[Segment] = []
    plain: list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]] = []
    append = plain.append
    d1 = DECODED_1
    n = len(data)
    pos = 0
    i = 0
    next_try = 1
    header_keys: dict[bytes, str] = {}  # producers repeat the same few header keys
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
            b2 = data[pos + 1]
            if b2 < 0x80:
                z = (b & 0x7F) | (b2 << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
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
            b2 = data[p + 1]
            if b2 < 0x80:
                z = (b & 0x7F) | (b2 << 7)
                kl = (z >> 1) ^ -(z & 1)
                p += 2
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
            headers, p = _parse_headers(data, p, end, header_keys)
        if p != end:
            raise CorruptRecordError(f"record declares {length} bytes, its fields take {p - pos}")
        append(
            (
                base_offset + od,
                base_ts + tsd if fixed_ts is None else fixed_ts,
                key,
                value,
                headers,
            )
        )
        i += 1
        pos = end
        if i >= next_try and i < count:
            found = None
            if end < n and data[end] == data[start]:
                found = record_runs.run(data, start, end, count - i, base_offset, base_ts, fixed_ts)
            if found is None:
                found = record_runs.varied_run(
                    data, start, end, count - i, base_offset, base_ts, fixed_ts
                )
            if found is not None:
                run, pos = found
                segments.append((plain,))
                segments.append(run)
                plain = []
                append = plain.append
                i += run[0]
            else:
                next_try = i + _RETRY_GAP
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes remain after the batch's {count} records")
    if plain:
        segments.append((plain,))
    return segments


def _parse_headers(
    data: bytes, p: int, end: int, header_keys: dict[bytes, str]
) -> tuple[tuple[Header, ...], int]:
    d1 = DECODED_1
    b = data[p]
    if b < 0x80:
        hc = d1[b]
        p += 1
    else:
        hc, p = read_varint(data, p)
    if hc < 0:
        raise InvalidLengthError(f"negative header count {hc}")
    if hc > end - p:  # each header takes at least two bytes
        raise CorruptRecordError(f"header count {hc} exceeds the record's size")
    headers: list[Header] = []
    append = headers.append
    for _ in range(hc):
        b = data[p]
        if b < 0x80:
            kl = d1[b]
            p += 1
        else:
            kl, p = read_varint(data, p)
        if kl < 0:
            raise InvalidLengthError(f"negative header key length {kl}")
        q = p + kl
        if q > end:
            raise CorruptRecordError("header key runs past the record")
        raw = data[p:q]
        hkey = header_keys.get(raw)
        if hkey is None:
            try:
                hkey = header_keys[raw] = raw.decode()
            except UnicodeDecodeError as exc:
                raise InvalidStringError(f"header key is not UTF-8: {exc}") from None
        b = data[q]
        if b < 0x80:
            vl = d1[b]
            p = q + 1
        else:
            vl, p = read_varint(data, q)
        if vl >= 0:
            q = p + vl
            if q > end:
                raise CorruptRecordError("header value runs past the record")
            append((hkey, data[p:q]))
            p = q
        elif vl == -1:
            append((hkey, None))
        else:
            raise InvalidLengthError(f"negative header value length {vl}")
    return tuple(headers), p
