"""Columnar reading of runs of same-shaped records (the parser's fast paths).

See :mod:`kafkette.protocol.records.record_parser` for the theory of
operation. :func:`run` reads records of one size; :func:`varied_run` records
that differ in value length only. Both check every byte they do not extract
against the run's first record, so they return exactly what the one-by-one
parser would, or None to leave the records to it.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from kafkette.protocol.records.varint import DECODED_1, read_varint

Segment = tuple[Any, ...]
"""Records of a batch not yet turned into objects.

Either ``(plain,)``, a list of record tuples, ``(records, None)``, a list
of Records made by the C extension, or ``(count, offsets,
ts_get, ts_column, keys, values, header_columns)`` for a run: see
:func:`kafkette.protocol.records.record_parser.iter_records`.
"""

MIN_RUN: Final = 4
"""Fewest records worth a columnar pass."""
_PROBE: Final = 16  # records checked before a run is looked for over the whole batch

# translate() tables: 0 for a byte that may end a varint (< 0x80), 1 otherwise,
# and the opposite, so that lstrip(b"\0") counts the leading valid bytes.
_LAST_BYTE: Final = bytes(0 if b < 0x80 else 1 for b in range(256))
_CONT_BYTE: Final = bytes(1 if b < 0x80 else 0 for b in range(256))

# Low and high bytes of the two-byte varints of the offset deltas 0 .. 8191
# (entries below 64 are unused: those deltas take one byte).
_DELTA_LOW: Final = bytes(((2 * d) & 0x7F) | 0x80 for d in range(8192))
_DELTA_HIGH: Final = bytes(((2 * d) >> 7) & 0x7F for d in range(8192))

_two_byte_table: list[int] | None = None
_STRUCT_CACHE_SIZE: Final = 32
_struct_cache: dict[tuple[str, int], struct.Struct] = {}


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


def _run_struct(record_format: str, count: int) -> struct.Struct:
    """A Struct reading the fields of ``count`` consecutive records in one call.

    Producers repeat the same batch shapes, so these are cached (a few dozen).
    """
    key = (record_format, count)
    compiled = _struct_cache.get(key)
    if compiled is None:
        if len(_struct_cache) >= _STRUCT_CACHE_SIZE:
            _struct_cache.clear()
        compiled = _struct_cache[key] = struct.Struct(record_format * count)
    return compiled


def _varint_end(data: bytes, p: int) -> int:
    while data[p] >= 0x80:
        p += 1
    return p + 1


HeaderLayout = tuple[int, tuple[str, ...], list[tuple[int, int]], list[int]]
"""Headers of a run's records: ``(start, names, value slots, constant bytes)``.

Positions are from the record's start; a slot is ``(position, length)``,
length -1 for a null value. The header count, key lengths, keys and value
lengths are the constant bytes: only header values differ between records.
"""


def _template(
    data: bytes, start: int, size: int
) -> tuple[tuple[int, ...], HeaderLayout | None] | None:
    """Field positions of the (valid) record at ``start``, from its start.

    Returns ``((ts_at, ts_width, od_at, od_width, kl_at, kl, key_at, vl_at, vl,
    value_at), headers)``, with ``headers`` None for a record without any, or
    None for a layout the columnar paths do not handle.
    """
    ts_at = _varint_end(data, start) + 1 - start
    od_at = _varint_end(data, start + ts_at) - start
    kl_at = _varint_end(data, start + od_at) - start
    ts_width = od_at - ts_at
    od_width = kl_at - od_at
    if ts_at > 3 or ts_width > 2 or od_width > 2:
        return None
    kl, key_at = read_varint(data, start + kl_at)
    key_at -= start
    vl_at = key_at + max(kl, 0)
    vl, value_at = read_varint(data, start + vl_at)
    value_at -= start
    fields = (ts_at, ts_width, od_at, od_width, kl_at, kl, key_at, vl_at, vl, value_at)
    headers_at = value_at + max(vl, 0)
    if headers_at == size - 1 and data[start + headers_at] == 0:
        return fields, None
    headers = _header_layout(data, start, headers_at, size)
    return None if headers is None else (fields, headers)


def _header_layout(data: bytes, start: int, at: int, size: int) -> HeaderLayout | None:
    """Layout of the valid headers at ``start + at`` if every varint in them takes one byte."""
    p = start + at
    count = data[p]
    if count >= 0x80 or count & 1:
        return None
    constants = [at]
    names: list[str] = []
    slots: list[tuple[int, int]] = []
    p += 1
    for _ in range(count >> 1):
        b = data[p]
        if b >= 0x80 or b & 1:
            return None
        name_end = p + 1 + (b >> 1)
        constants.extend(range(p - start, name_end - start))
        names.append(data[p + 1 : name_end].decode())
        p = name_end
        b = data[p]
        constants.append(p - start)
        if b == 1:
            slots.append((p + 1 - start, -1))
            p += 1
        elif b < 0x80 and not b & 1:
            slots.append((p + 1 - start, b >> 1))
            p += 1 + (b >> 1)
        else:
            return None
    if p != start + size:
        return None
    return at, tuple(names), slots, constants


def _header_columns(
    view: memoryview, stride: int, r: int, headers: HeaderLayout, offset: int
) -> tuple[tuple[str, ...], list[tuple[bytes, ...] | None]]:
    """Each header's values over ``r`` rows of ``stride`` bytes (None: always null).

    ``offset`` is subtracted from the layout's positions (rows that do not
    start where records do).
    """
    names, slots = headers[1], headers[2]
    fmt = []
    at = 0
    for position, length in slots:
        if length >= 0:
            fmt.append(f"{position - offset - at}x{length}s")
            at = position - offset + length
    fmt.append(f"{stride - at}x")
    flat = _run_struct("".join(fmt), r).unpack(view)
    present = sum(1 for _, length in slots if length >= 0)
    columns: list[tuple[bytes, ...] | None] = []
    i = 0
    for _, length in slots:
        if length >= 0:
            columns.append(flat[i::present])
            i += 1
        else:
            columns.append(None)
    return names, columns


def _check_columns(
    buf: bytes,
    pos: int,
    stride: int,
    m: int,
    template: int,
    constants: list[int],
    varints: tuple[tuple[int, int], ...],
) -> int:
    """How many of the ``m`` rows of ``stride`` bytes from ``pos`` pass the checks.

    Row ``j`` passes if its bytes at ``constants`` equal those of the row at
    ``template`` and each ``(at, width)`` of ``varints`` holds a varint of
    exactly that width; the count stops at the first row that fails.
    """
    stop = pos + m * stride
    r = m
    for c in constants:
        column = buf[pos + c : stop : stride]
        r = min(r, m - len(column.lstrip(bytes((buf[template + c],)))))
    for at, width in varints:
        if width == 1:
            column = buf[pos + at : stop : stride].translate(_LAST_BYTE)
        else:
            column = buf[pos + at : stop : stride].translate(_CONT_BYTE)
            r = min(r, m - len(column.lstrip(b"\0")))
            column = buf[pos + at + 1 : stop : stride].translate(_LAST_BYTE)
        r = min(r, m - len(column.lstrip(b"\0")))
    return r


def _delta_columns(
    buf: bytes,
    pos: int,
    stride: int,
    r: int,
    ts: tuple[int, int],
    od: tuple[int, int],
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> tuple[Any, Any, Any]:
    """Offsets and timestamps of ``r`` checked rows: ``(offsets, ts_get, ts_column)``."""
    stop = pos + r * stride
    ts_at, ts_width = ts
    od_at, od_width = od
    ts_get: Any
    ts_column: Any = None
    if fixed_ts is not None:
        ts_get = fixed_ts
    elif ts_width == 1:
        # A table over the deltas the run uses turns each timestamp into one
        # lookup, and records with the same timestamp share one int object.
        ts_column = buf[pos + ts_at : stop : stride]
        lo = min(ts_column)
        table = [0] * lo + list(map(base_ts.__add__, DECODED_1[lo : max(ts_column) + 1]))
        ts_get = table.__getitem__
    else:
        ts_column = _two_byte_keys(buf, pos + ts_at, stop, stride, r)
        table2 = _two_byte_values()
        ts_get = {k: base_ts + table2[k] for k in set(ts_column)}.__getitem__
    first = _consecutive(buf, pos + od_at, stop, stride, r, od_width)
    offsets: Any
    if first is None:
        if od_width == 1:
            deltas: Any = map(DECODED_1.__getitem__, buf[pos + od_at : stop : stride])
        else:
            deltas = _two_byte_column(buf, pos + od_at, stop, stride, r)
        offsets = list(map(base_offset.__add__, deltas))
    else:
        offsets = range(base_offset + first, base_offset + first + r)
    return offsets, ts_get, ts_column


def run(
    data: bytes,
    start: int,
    pos: int,
    remaining: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> tuple[Segment, int] | None:
    """Check the run of records laid out like the one at ``start``, from ``pos``.

    Returns its segment (whose first item is the number of records) and the
    position after it, or None when no run is worth it. The record at
    ``start`` is already known valid.
    """
    size = pos - start
    m = min(remaining, (len(data) - pos) // size)
    if m < MIN_RUN:
        return None
    template = _template(data, start, size)
    if template is None:
        return None
    layout, headers = template
    ts_at, ts_width, od_at, od_width, kl_at, kl, key_at, vl_at, vl, value_at = layout
    # The length bytes first: the run ends where they change, and the other
    # checks then only look at the run. A short probe comes before the whole
    # window so that a failed attempt costs little whatever the batch size.
    r = _same_length_run(data, start, pos, size, ts_at - 1, min(m, _PROBE))
    if r == _PROBE and m > _PROBE:
        r = _same_length_run(data, start, pos, size, ts_at - 1, m)
    if r < MIN_RUN:
        return None
    constants = [
        *range(kl_at, key_at),
        *range(vl_at, value_at),
        *([size - 1] if headers is None else headers[3]),
    ]
    varints = ((ts_at, ts_width), (od_at, od_width))
    r = _check_columns(data, pos, size, r, start, constants, varints)
    if r < MIN_RUN:
        return None
    offsets, ts_get, ts_column = _delta_columns(
        data, pos, size, r, varints[0], varints[1], base_offset, base_ts, fixed_ts
    )
    view = memoryview(data)[pos : pos + r * size]
    keys: tuple[bytes, ...] | None = None
    values: tuple[bytes, ...] | None = None
    tail = size - value_at - max(vl, 0)
    if kl >= 0 and vl >= 0:
        fmt = f"{key_at}x{kl}s{value_at - key_at - kl}x{vl}s{tail}x"
        flat = _run_struct(fmt, r).unpack(view)
        keys = flat[0::2]
        values = flat[1::2]
    elif kl >= 0:
        keys = _run_struct(f"{key_at}x{kl}s{size - key_at - kl}x", r).unpack(view)
    elif vl >= 0:
        values = _run_struct(f"{value_at}x{vl}s{tail}x", r).unpack(view)
    header_columns = None if headers is None else _header_columns(view, size, r, headers, 0)
    return (r, offsets, ts_get, ts_column, keys, values, header_columns), pos + r * size


def varied_run(
    data: bytes,
    start: int,
    pos: int,
    remaining: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
) -> tuple[Segment, int] | None:
    """Like :func:`run` for records that differ from the template in value length only.

    A short Python loop walks the record lengths and checks each value length
    and header count; the fixed-size *prefix* of every record (attributes,
    deltas, key) is then joined into one buffer of same-sized rows and
    checked and decoded column-wise like a run.
    """
    size = pos - start
    template = _template(data, start, size)
    if template is None:
        return None
    layout, headers = template
    ts_at, ts_width, od_at, od_width, kl_at, kl, key_at, vl_at, vl, value_at = layout
    if vl < 0:
        return None  # a null value has a fixed size: that is a plain run
    lw = ts_at - 1
    prefix = vl_at - lw  # bytes from the attributes to the end of the key
    suffix = size - value_at - vl  # the headers: bytes after the value
    data_end = len(data)
    prefix_rows: list[bytes] = []
    values: list[bytes] = []
    suffix_rows: list[bytes] = [data[start + size - suffix : start + size]]
    add_row = prefix_rows.append
    add_value = values.append
    add_suffix = suffix_rows.append
    p = pos
    # One short loop per record for what differs in size: the record length,
    # the value length (which must fill the record exactly) and the value;
    # the fixed-size prefixes are checked and decoded column-wise below.
    for _ in range(remaining):
        if p + 1 >= data_end:
            break
        b = data[p]
        if b < 0x80:
            if b & 1:
                break
            e = p + 1 + (b >> 1)
            q = p + 1
        else:
            b2 = data[p + 1]
            if b2 >= 0x80:
                break
            z = (b & 0x7F) | (b2 << 7)
            if z & 1:
                break
            q = p + 2
            e = q + (z >> 1)
        v = q + prefix  # the value length varint
        w = e - suffix  # where the value must end
        if e > data_end or v >= w:
            break
        b = data[v]
        if b < 0x80:
            if b & 1 or v + 1 + (b >> 1) != w:
                break
            v += 1
        else:
            b2 = data[v + 1]
            if b2 >= 0x80:
                break
            z = (b & 0x7F) | (b2 << 7)
            if z & 1 or v + 2 + (z >> 1) != w:
                break
            v += 2
        if headers is None:
            if data[w]:  # the header count
                break
        else:
            add_suffix(data[w:e])
        add_row(data[q : q + prefix])
        add_value(data[v:w])
        p = e
    r = len(values)
    if r < MIN_RUN:
        return None
    rows = b"".join(prefix_rows)
    kl_row = kl_at - lw
    key_row = key_at - lw
    if rows[kl_row:key_row] != data[start + kl_at : start + key_at]:
        return None  # the first record's key length differs from the template's
    varints = ((ts_at - lw, ts_width), (od_at - lw, od_width))
    r = _check_columns(rows, 0, prefix, r, 0, list(range(kl_row, key_row)), varints)
    if headers is not None:
        # Row 0 is the template's headers: every row must match its constant bytes.
        header_rows = b"".join(suffix_rows)
        constants = [c - headers[0] for c in headers[3]]
        r = _check_columns(header_rows, suffix, suffix, r, 0, constants, ())
    if r < MIN_RUN:
        return None
    offsets, ts_get, ts_column = _delta_columns(
        rows, 0, prefix, r, varints[0], varints[1], base_offset, base_ts, fixed_ts
    )
    header_columns = None
    if headers is not None:
        view = memoryview(header_rows)[suffix : suffix * (r + 1)]
        header_columns = _header_columns(view, suffix, r, headers, headers[0])
    keys: tuple[bytes, ...] | None = None
    if kl >= 0:
        keys = _run_struct(f"{key_row}x{kl}s", r).unpack(memoryview(rows)[: r * prefix])
    if r < len(values):  # a record failed the column checks: the run ends before it
        del values[r:]
        p = pos
        for _ in range(r):
            b = data[p]
            p += 1 + (b >> 1) if b < 0x80 else 2 + (((b & 0x7F) | (data[p + 1] << 7)) >> 1)
    return (r, offsets, ts_get, ts_column, keys, values, header_columns), p


def _same_length_run(data: bytes, start: int, pos: int, size: int, width: int, m: int) -> int:
    """How many of the ``m`` records from ``pos`` start with the length bytes at ``start``."""
    stop = pos + m * size
    r = m
    for c in range(width):
        column = data[pos + c : stop : size]
        r = min(r, m - len(column.lstrip(bytes((data[start + c],)))))
    return r


def _two_byte_keys(data: bytes, at: int, stop: int, size: int, r: int) -> tuple[int, ...]:
    """``b0 | b1 << 8`` of the two-byte varints at ``at``, ``at + size``, ..."""
    pairs = bytearray(2 * r)
    pairs[0::2] = data[at:stop:size]
    pairs[1::2] = data[at + 1 : stop : size]
    return struct.unpack(f"<{r}H", pairs)


def _two_byte_column(data: bytes, at: int, stop: int, size: int, r: int) -> Any:
    """Signed values of the two-byte varints at ``at``, ``at + size``, ... (checked)."""
    return map(_two_byte_values().__getitem__, _two_byte_keys(data, at, stop, size, r))


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
