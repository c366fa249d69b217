"""Selection of the optional C accelerator for the append path.

``check_batch`` and ``write_batch`` are the compiled functions
of :mod:`kafkette.backends._append` when the extension was built and the
environment variable ``KAFKETTE_NO_EXTENSIONS`` is not ``1``, else None (the
pure-Python code then does all the work). Both compute CRC-32C with the crc32c
package.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from kafkette.protocol.extensions import load_extension

CheckBatch = Callable[[Any, bool], "tuple[int, ...] | None"]
WriteBatch = Callable[[int, Any, int, int], None]


def _load() -> ModuleType | None:
    return load_extension("kafkette.backends._append")


_module = _load()

check_batch: CheckBatch | None = None if _module is None else _module.check_batch
"""``(data, check_crc)``: the 13 header fields of the one batch in ``data`` (as
``HEADER_STRUCT.unpack_from`` returns them) when the append fast path takes it,
else None (the general path then says what is wrong)."""

write_batch: WriteBatch | None = getattr(_module, "write_batch", None)
"""``(fd, data, base_offset, leader_epoch)``: write the batch in ``data`` to ``fd``
as a log stores it (base offset, length and leader epoch rewritten), all of it
or OSError."""

EXTENSION_USED: bool = _module is not None
"""Whether the append path uses the C extension."""
