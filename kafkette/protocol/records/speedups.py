"""Selection of the optional C accelerator for record parsing and encoding.

``parse_records`` and ``encode_record`` are the compiled functions of
:mod:`kafkette.protocol.records._speedups` when the extension was built and
the environment variable ``KAFKETTE_NO_EXTENSIONS`` is not ``1``, else None
(the pure-Python code then does all the work).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from kafkette.protocol.extensions import load_extension

ParseRecords = Callable[..., "list[Any] | None"]
EncodeRecord = Callable[[int, int, Any, Any], "bytes | None"]


def _load() -> ModuleType | None:
    return load_extension("kafkette.protocol.records._speedups")


_module = _load()

parse_records: ParseRecords | None = None if _module is None else _module.parse_records
"""``(data, count, base_offset, base_timestamp, fixed_timestamp, record_type[, prefix,
suffix])``: the Records of a records section (each ``record_type((*prefix, *fields,
*suffix))``), or None for data not well formed."""

encode_record: EncodeRecord | None = None if _module is None else _module.encode_record
"""``(timestamp_delta, offset_delta, key, value)``: the bytes of a record
without headers, length prefix included, as RecordBatchBuilder writes them;
None for what only the Python encoder handles."""

take_records: Callable[..., tuple[list[Any], int, int]] | None = (
    None if _module is None else _module.take_records
)
"""``(data, cursor, position, limit, record_type, prefix, timestamp_types, crc32c,
transactional_below, skip_control)``: the consumer's records of the batches from byte
``cursor`` of a fetch's records on, until one Python must read, and the cursor and position
reached (see ``_speedups.c``)."""

fetch_end_offset: Callable[[Any], int | None] | None = (
    None if _module is None else _module.fetch_end_offset
)
"""``(data)``: the offset after the last complete entry of a fetch's records, or None."""

EXTENSION_USED: bool = parse_records is not None
"""Whether record parsing uses the C extension."""
