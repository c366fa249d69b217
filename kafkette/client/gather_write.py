"""Writing a frame's pieces to an asyncio transport without joining them.

A Produce request is written in pieces (:func:`encode_request_parts
<kafkette.protocol.headers.encode_request_parts>`): its header, then each
large batch's own buffer. Joining them, or handing them to
``transport.write`` one by one while something is queued, copies every
batch once more: at 1 MiB batches, into memory the allocator maps afresh, so
each copy is also a page fault per 4 KiB.

:class:`GatherWriter` writes the pieces with one ``writev`` straight to a
plain TCP socket while its transport has nothing queued (asyncio's own
``write`` does the same with one buffer: it tries the socket, then queues
what the socket did not take). What the socket does not take goes to the
transport, which copies that rest into its buffer and writes it when the
socket is writable; later pieces go there too until it is empty, so the
bytes leave in order. Under TLS (the transport encrypts) and where there is
no ``os.writev``, the pieces are joined and handed to the transport.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from kafkette.protocol.primitives import Buffer

try:
    IOV_MAX = os.sysconf("SC_IOV_MAX")
except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name
    IOV_MAX = 16
if IOV_MAX <= 0:  # no limit reported
    IOV_MAX = 1024


def _socket_fd(transport: asyncio.Transport) -> int | None:
    """The transport's socket to ``writev`` to: a plain (not TLS) socket, or None."""
    if not hasattr(os, "writev") or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    fd: int = sock.fileno()
    return fd if fd >= 0 else None


class GatherWriter:
    """Writes pieces to ``transport`` in order, each written once and never joined
    while the socket keeps up (see the module's docstring)."""

    __slots__ = ("_fd", "_transport", "queued_bytes")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._fd = _socket_fd(transport)
        self.queued_bytes = 0
        """Bytes handed to the transport's buffer (copied there) since the start."""

    @property
    def vectored(self) -> bool:
        """Whether pieces go to the socket with ``writev`` (plain TCP), not joined."""
        return self._fd is not None

    def write(self, parts: Sequence[Buffer]) -> None:
        """Write ``parts`` one after another; errors are the transport's to report (it
        closes and calls ``connection_lost``), as for ``transport.write``."""
        transport = self._transport
        fd = self._fd
        if fd is None:
            self._queue(parts[0] if len(parts) == 1 else b"".join(parts))
            return
        # The socket is open while the transport is not closing; what the transport
        # holds goes out first.
        if transport.is_closing() or transport.get_write_buffer_size():
            for part in parts:
                self._queue(part)
            return
        start = 0
        while start < len(parts):
            chunk = parts[start : start + IOV_MAX]
            try:
                written = os.writev(fd, chunk)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError:  # broken: the transport finds out as it writes the rest
                written = 0
            for part in chunk:
                size = len(part)
                if written >= size:
                    written -= size
                    start += 1
                    continue
                if written:
                    self._queue(memoryview(part)[written:])
                    start += 1
                for rest in parts[start:]:
                    self._queue(rest)
                return

    def _queue(self, data: Buffer) -> None:
        self.queued_bytes += len(data)
        self._transport.write(data)
