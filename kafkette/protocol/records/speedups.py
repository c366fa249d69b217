"""Selection of the optional C accelerator for record parsing.

``parse_records`` is the compiled
:func:`kafkette.protocol.records._speedups.parse_records` when the extension
was built and the environment variable ``KAFKETTE_NO_EXTENSIONS`` is not
``1``, else None (the pure-Python parser then does all the work).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ParseRecords = Callable[[Any, int, int, int, "int | None", type], "list[Any] | None"]


def _load() -> ParseRecords | None:
    if os.environ.get("KAFKETTE_NO_EXTENSIONS") == "1":
        return None
    try:
        from kafkette.protocol.records import _speedups
    except ImportError:  # not built: no compiler at install time
        return None
    return _speedups.parse_records


parse_records: ParseRecords | None = _load()
"""``(data, count, base_offset, base_timestamp, fixed_timestamp, record_type)``:
the Records of a records section, or None for data not well formed."""

EXTENSION_USED: bool = parse_records is not None
"""Whether record parsing uses the C extension."""
