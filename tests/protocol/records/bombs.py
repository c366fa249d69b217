"""Decompression bombs for the tests, built in a streaming way and once per session."""

from __future__ import annotations

import functools
import zlib

GIB = 1 << 30
_CHUNK = bytes(4 << 20)


@functools.cache
def gzip_gib_of_zeros() -> bytes:
    """1 GiB of zero bytes, gzip-compressed (about 4.5 MiB), never held uncompressed."""
    obj = zlib.compressobj(1, wbits=31)
    return b"".join(obj.compress(_CHUNK) for _ in range(GIB // len(_CHUNK))) + obj.flush()
