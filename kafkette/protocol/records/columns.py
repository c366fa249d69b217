"""Record batches decoded into columns: plain buffers laid out as Arrow lays them out.

For readers that want columns rather than records (the Spark data source
hands Arrow batches to the JVM): :class:`ColumnsBuilder` appends the records
of whole batches, those whose offsets are in ``[first, end)``, to growing
buffers, with no Python object per record; :meth:`ColumnsBuilder.finish`
returns :class:`Columns`. Nothing here imports pyarrow: the buffers are
``bytearray``\\ s any Arrow binding can wrap without copying.

Layout (native byte order, as Arrow): offsets and timestamps are int64, one per
record; a :class:`BinaryColumn` is ``count + 1`` int32 end offsets into its
data (starting at 0), the data, and a validity bitmap (bit ``i`` of byte
``i // 8``, least significant first, set when the value is not null; padding
bits zero). Headers, when asked for, are a list column: ``count + 1`` int32
offsets into the header entries, whose names and values are binary columns
(names are UTF-8, never null).

The C extension (:mod:`kafkette.protocol.records._columns`) decodes magic 2
sections straight into the buffers; the Python code here (also used for
legacy batches, and for data the C code does not take) goes through the
record parser. Both give the same bytes and raise the same errors: on data
that is not well formed the C code leaves the buffers untouched and the
Python parser raises. Only records between ``first`` and ``end`` are kept,
but every record of the batch is checked, as iterating over it would.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, compress
from typing import Any, Final, NamedTuple

from kafkette.protocol.errors import CorruptRecordError
from kafkette.protocol.extensions import load_extension
from kafkette.protocol.records.default_records import RecordBatch
from kafkette.protocol.records.legacy_records import LegacyBatch
from kafkette.protocol.records.record import Record

_INT32_MAX: Final = 0x7FFFFFFF
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def _load() -> Any:
    module = load_extension("kafkette.protocol.records._columns")
    return None if module is None else module.append_columns


_Binary = tuple["array[int]", bytes, list[bool], int]
"""A binary column's new part: end offsets (the first: the current end), data,
validity flags, null count."""

append_columns: Any = _load()
"""The C decoder (``_columns.append_columns``), or None: not built, or
``KAFKETTE_NO_EXTENSIONS=1``."""


class BinaryColumn(NamedTuple):
    """A nullable binary column: Arrow's offsets, data and validity buffers."""

    offsets: bytearray
    """``rows + 1`` native int32: value ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
    data: bytearray
    validity: bytearray | None
    """Bitmap, least significant bit first: set for a value, clear for null; None
    for a column that is never null (header names)."""
    null_count: int


class Columns(NamedTuple):
    """The records a :class:`ColumnsBuilder` took, as column buffers."""

    rows: int
    offsets: bytearray
    """``rows`` native int64."""
    timestamps: bytearray
    """``rows`` native int64, milliseconds (-1 for magic 0 records)."""
    keys: BinaryColumn
    values: BinaryColumn
    header_offsets: bytearray | None
    """``rows + 1`` native int32 into the header entries; None without headers."""
    header_names: BinaryColumn | None
    header_values: BinaryColumn | None


class ColumnsBuilder:
    """Appends the records of batches to column buffers; :meth:`finish` hands them out.

    ``with_headers`` false leaves the header columns out (headers are still
    checked). Columns stay under 2 GiB of data each (Arrow's int32 offsets):
    call :meth:`finish` before :attr:`data_size` gets near it; an append that
    would go past raises ``OverflowError`` and appends nothing.
    """

    __slots__ = ("_buffers", "_nulls", "with_headers")

    def __init__(self, with_headers: bool = True) -> None:
        self.with_headers = with_headers
        self._reset()

    def _reset(self) -> None:
        zero = bytes(4)
        # in the order of the C extension's *_BUF constants
        self._buffers = [
            bytearray(),  # offsets
            bytearray(),  # timestamps
            bytearray(zero),  # key offsets
            bytearray(),  # key data
            bytearray(),  # key validity
            bytearray(zero),  # value offsets
            bytearray(),  # value data
            bytearray(),  # value validity
            bytearray(zero),  # header offsets
            bytearray(zero),  # header name offsets
            bytearray(),  # header name data
            bytearray(zero),  # header value offsets
            bytearray(),  # header value data
            bytearray(),  # header value validity
        ]
        self._nulls = [0, 0, 0]  # keys, values, header values

    def __len__(self) -> int:
        """Records appended since the last :meth:`finish`."""
        return len(self._buffers[0]) // 8

    @property
    def data_size(self) -> int:
        """Bytes of keys, values and headers appended since the last :meth:`finish`."""
        b = self._buffers
        return len(b[3]) + len(b[6]) + len(b[10]) + len(b[12])

    def append(self, batch: RecordBatch | LegacyBatch, first: int, end: int) -> int:
        """Append the batch's records with offsets in ``[first, end)``; return how many.

        Raises the batch's parse errors (:class:`~kafkette.protocol.errors.ProtocolError`)
        as iterating over it would, appending nothing then.
        """
        if isinstance(batch, RecordBatch):
            c_append = append_columns
            if c_append is not None:
                h = batch.header
                fixed = h.max_timestamp if h.is_log_append_time else None
                added = c_append(
                    batch.records_data(),
                    h.record_count,
                    h.base_offset,
                    h.base_timestamp,
                    fixed,
                    first,
                    end,
                    self.with_headers,
                    self._buffers,
                )
                if added is not None:
                    self._add_nulls(added[1:])
                    return int(added[0])
        records: Iterable[Record] = iter(batch)  # the record parser raises what is wrong
        return self.append_records([r for r in records if first <= r[0] < end])

    def append_records(self, records: list[Record]) -> int:
        """Append ``records`` (offset, timestamp, key, value, headers) as they are."""
        if not records:
            return 0
        b = self._buffers
        rows0 = len(self)
        offsets = array("q")
        timestamps = array("q")
        try:
            offsets.extend([r[0] for r in records])
            timestamps.extend([r[1] for r in records])
        except OverflowError:
            raise CorruptRecordError("record offset or timestamp beyond 64 bits") from None
        keys = [r[2] for r in records]
        values = [r[3] for r in records]
        key_col = _binary(keys, b[2])
        value_col = _binary(values, b[5])
        header_parts = None
        if self.with_headers:
            headers = [r[4] for r in records]
            names = [name.encode() for hs in headers for name, _ in hs]
            hvalues = [value for hs in headers for _, value in hs]
            headers0 = len(b[11]) // 4 - 1
            if headers0 + len(names) > _INT32_MAX:
                raise OverflowError("more than 2**31 headers in one set of columns")
            header_offsets = array("i", accumulate(map(len, headers), initial=headers0))
            header_parts = (
                header_offsets,
                _binary(names, b[9]),
                _binary(hvalues, b[11]),
            )
        # nothing can fail from here: append
        b[0] += offsets.tobytes()
        b[1] += timestamps.tobytes()
        self._extend(key_col, 2, rows0)
        self._extend(value_col, 5, rows0)
        self._nulls[0] += key_col[3]
        self._nulls[1] += value_col[3]
        if header_parts is not None:
            b[8] += header_parts[0][1:].tobytes()
            self._extend(header_parts[1], 9, None)
            self._extend(header_parts[2], 11, headers0)
            self._nulls[2] += header_parts[2][3]
        return len(records)

    def _extend(self, part: _Binary, at: int, rows0: int | None) -> None:
        """Append a binary column's part at buffers ``at`` (offsets, data, validity)."""
        offsets, data, valid, _ = part
        b = self._buffers
        b[at] += offsets[1:].tobytes()
        b[at + 1] += data
        if rows0 is not None:  # header names have no validity bitmap
            _set_bits(b[at + 2], rows0, valid)

    def _add_nulls(self, counts: tuple[int, int, int]) -> None:
        nulls = self._nulls
        nulls[0] += counts[0]
        nulls[1] += counts[1]
        nulls[2] += counts[2]

    def finish(self) -> Columns:
        """The columns appended so far; the builder starts over, empty."""
        b = self._buffers
        k, v, h = self._nulls
        columns = Columns(
            len(self),
            b[0],
            b[1],
            BinaryColumn(b[2], b[3], b[4], k),
            BinaryColumn(b[5], b[6], b[7], v),
            b[8] if self.with_headers else None,
            BinaryColumn(b[9], b[10], None, 0) if self.with_headers else None,
            BinaryColumn(b[11], b[12], b[13], h) if self.with_headers else None,
        )
        self._reset()
        return columns


def _binary(items: Sequence[bytes | None], offsets_buf: bytearray) -> _Binary:
    """The part ``items`` add to a binary column whose offsets are ``offsets_buf``."""
    valid = [item is not None for item in items]
    present = list(compress(items, valid))
    data = b"".join(present)  # type: ignore[arg-type]
    start = array("i", offsets_buf[-4:])[0]
    if start + len(data) > _INT32_MAX:
        raise OverflowError("a column's data would pass 2 GiB: finish() first")
    lengths = [0 if item is None else len(item) for item in items]
    return array("i", accumulate(lengths, initial=start)), data, valid, len(items) - len(present)


def _set_bits(bitmap: bytearray, start: int, valid: list[bool]) -> None:
    """Write ``valid`` as bits ``start``, ``start + 1``... of ``bitmap`` (grown as needed)."""
    end = start + len(valid)
    bitmap.extend(bytes((end + 7) // 8 - len(bitmap)))
    for i, flag in enumerate(valid, start):
        if flag:
            bitmap[i >> 3] |= 1 << (i & 7)
