"""A disk log's segment regions on their way to the client, and a send that fails.

On plain TCP the asyncio connection sends a region with ``loop.sendfile``
(tests/server/test_sendfile.py). The kernel cannot make TLS records, so under
TLS the region is read in bounded chunks (the large ones in a worker thread)
and written through the transport, each once the transport has drained below
its high-water mark; plain TCP does the same where ``os.sendfile`` is not
available. A send that fails for any reason but the peer going away is
logged once, with the error, and closes the connection, on both kinds of
server connection. These tests read the 8 MB answer of test_direct_write
slowly over real sockets.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from kafkette.backends.types import FileRef
from kafkette.protocol.headers import decode_response
from kafkette.protocol.records import iter_batches
from kafkette.server.net.asyncio_connection import READ_ON_LOOP, REGION_CHUNK, ConnectionProtocol
from tests.server.test_direct_write import (
    FETCH,
    LOGGER,
    PIPELINED,
    VALUES,
    batch,
    broker_with_records,
    read_frames_slowly,
    serving,
    slow_client,
    small_send_buffers,
)

STORED_BYTES = sum(len(batch(value)) for value in VALUES)


class Tls:
    """A server context with a certificate for 127.0.0.1 and a client context trusting it."""

    def __init__(self) -> None:
        ca = trustme.CA()
        self.server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(self.server)
        self.client = ssl.create_default_context()
        ca.configure_trust(self.client)

    def read_frames(self, port: int, data: bytes, count: int) -> list[bytes]:
        """:func:`exchange` over TLS."""
        with self.client.wrap_socket(slow_client(port), server_hostname="127.0.0.1") as sock:
            return exchange(sock, data, count)


@pytest.fixture(scope="module")
def tls() -> Tls:
    return Tls()


def exchange(sock: socket.socket, data: bytes, count: int) -> list[bytes]:
    """Send ``data``, then read 4 KiB at a time; the bodies of up to ``count`` answer
    frames, fewer if the broker closes the connection first."""
    frames: list[bytes] = []
    buffer = bytearray()
    sock.sendall(data)
    while len(frames) < count:
        try:
            chunk = sock.recv(4096)
        except (ConnectionError, ssl.SSLError):
            break
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
            size = struct.unpack_from(">i", buffer)[0]
            frames.append(bytes(buffer[4 : 4 + size]))
            del buffer[: 4 + size]
    return frames


def read_until_closed(port: int) -> list[bytes]:
    """The answers to the pipelined requests received before the broker closed the
    connection (the test expects it to)."""
    with slow_client(port) as sock:
        return exchange(sock, PIPELINED, 3)


class RegionReads:
    """The reads of file regions by the asyncio connection (:meth:`_write_region`):
    (position, length, on the event loop's thread, transport's buffered bytes then)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, fail: OSError | None = None) -> None:
        self.reads: list[tuple[int, int, bool, int]] = []
        self.written_regions: list[int] = []
        self.fail = fail
        self._conn: ConnectionProtocol | None = None
        self._loop_thread = 0
        real_write_region = ConnectionProtocol._write_region
        real_pread = FileRef.pread

        async def write_region(
            conn: ConnectionProtocol, file: FileRef, position: int, size: int
        ) -> None:
            self.written_regions.append(size)
            self._conn, self._loop_thread = conn, threading.get_ident()
            try:
                await real_write_region(conn, file, position, size)
            finally:
                self._conn = None

        def pread(file: FileRef, length: int, position: int) -> bytes:
            conn = self._conn
            if conn is not None:  # (the log's own reads, to find the batches, are not counted)
                assert conn.transport is not None
                on_loop = threading.get_ident() == self._loop_thread
                buffered = conn.transport.get_write_buffer_size()
                self.reads.append((position, length, on_loop, buffered))
                if self.fail is not None:
                    raise self.fail
            return real_pread(file, length, position)

        monkeypatch.setattr(ConnectionProtocol, "_write_region", write_region)
        monkeypatch.setattr(FileRef, "pread", pread)


def check_fetch_answer(frames: list[bytes]) -> None:
    """The pipelined answers in order, the Fetch answer holding every record exactly."""
    assert [struct.unpack_from(">i", f)[0] for f in frames] == [1, 2, 3]
    correlation_id, fetched = decode_response(frames[1], FETCH.API_KEY, 12)
    partition = fetched.responses[0].partitions[0]
    assert (correlation_id, partition.error_code, partition.high_watermark) == (2, 0, 40)
    records = [r for b in iter_batches(partition.records) for r in b]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, None, value) for i, value in enumerate(VALUES)
    ]


def check_chunks(reads: list[tuple[int, int, bool, int]], high_water: int) -> None:
    """The region read once, in order, in chunks of REGION_CHUNK; the large ones off the
    event loop; each read only once the transport held at most its high-water mark."""
    lengths = [length for _, length, _, _ in reads]
    assert sum(lengths) == STORED_BYTES
    assert lengths == [REGION_CHUNK] * (len(lengths) - 1) + [lengths[-1]]
    positions = [position for position, _, _, _ in reads]
    assert positions == [positions[0] + sum(lengths[:i]) for i in range(len(lengths))]
    assert [on_loop for _, length, on_loop, _ in reads] == [
        length <= READ_ON_LOOP for length in lengths
    ]
    assert max(buffered for _, _, _, buffered in reads) <= high_water


@pytest.fixture
def disk_answer(tmp_path: Path) -> list[bytes]:
    """The pipelined answers of a disk broker over plain TCP (the region by sendfile)."""
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    return serving(broker_with_records(tmp_path / "plain"), read)


def test_under_tls_a_region_is_read_in_chunks_off_the_loop_as_the_transport_drains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: Tls, disk_answer: list[bytes]
) -> None:
    """The 8 MB region of a disk log's Fetch answer, read slowly over TLS: the same bytes
    as over plain TCP, read in 256 KiB chunks in a worker thread, never more than the
    transport's high-water mark waiting in it when the next chunk is read."""
    small_send_buffers(monkeypatch)
    spy = RegionReads(monkeypatch)
    high_waters: list[int] = []
    real_made = ConnectionProtocol.connection_made

    def connection_made(conn: ConnectionProtocol, transport: Any) -> None:
        real_made(conn, transport)
        high_waters.append(transport.get_write_buffer_limits()[1])

    monkeypatch.setattr(ConnectionProtocol, "connection_made", connection_made)
    read = functools.partial(tls.read_frames, data=PIPELINED, count=3)
    frames = serving(broker_with_records(tmp_path / "data"), read, tls=tls.server)
    check_fetch_answer(frames)
    assert frames == disk_answer
    assert spy.written_regions == [STORED_BYTES]
    (high_water,) = high_waters
    check_chunks(spy.reads, high_water)


def test_without_sendfile_plain_tcp_reads_the_region_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk_answer: list[bytes]
) -> None:
    """loop.sendfile saying os.sendfile cannot be used (SendfileNotAvailableError, which
    leaves nothing sent): the region is read and written through the transport, in
    chunks, and the answers are the same bytes."""
    small_send_buffers(monkeypatch)

    async def no_sendfile(*args: Any, **kwargs: Any) -> int:
        raise asyncio.SendfileNotAvailableError("no sendfile here")

    spy = RegionReads(monkeypatch)
    monkeypatch.setattr(asyncio.BaseEventLoop, "sendfile", no_sendfile)
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    frames = serving(broker_with_records(tmp_path / "data"), read)
    assert frames == disk_answer
    assert spy.written_regions == [STORED_BYTES]
    check_chunks(spy.reads, 64 * 1024)  # asyncio's default high-water mark


def internal_error(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    """The one line the listener logged: the connection closed after an internal error."""
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith("closing connection from 127.0.0.1:")
    assert record.getMessage().endswith(" after an internal error")
    assert record.exc_info is not None
    return record


@pytest.fixture
def listener_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, LOGGER)
    yield caplog


def test_an_unexpected_sendfile_error_is_logged_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener_log: pytest.LogCaptureFixture
) -> None:
    """loop.sendfile failing with a RuntimeError (as it does when it cannot send on a
    transport at all) is not taken for the peer gone: one ERROR line with the error,
    and the connection closes after the answer before it."""

    async def broken_sendfile(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("sendfile broke")

    monkeypatch.setattr(asyncio.BaseEventLoop, "sendfile", broken_sendfile)
    frames = serving(broker_with_records(tmp_path / "data"), read_until_closed)
    assert [struct.unpack_from(">i", f)[0] for f in frames] == [1]
    record = internal_error(listener_log)
    assert record.exc_info is not None
    assert repr(record.exc_info[1]) == "RuntimeError('sendfile broke')"


def test_under_tls_a_segment_read_error_is_logged_and_closes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tls: Tls,
    listener_log: pytest.LogCaptureFixture,
) -> None:
    """The region's file cannot be read (EIO) under TLS: one ERROR line with the error,
    the connection closed after the answer before the Fetch."""
    spy = RegionReads(monkeypatch, fail=OSError(errno.EIO, "Input/output error"))
    read = functools.partial(tls.read_frames, data=PIPELINED, count=3)
    frames = serving(broker_with_records(tmp_path / "data"), read, tls=tls.server)
    assert [struct.unpack_from(">i", f)[0] for f in frames] == [1]
    assert len(spy.reads) == 1
    record = internal_error(listener_log)
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "[Errno 5] Input/output error"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_socket_connections_log_a_sendfile_error_and_close(
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    listener_log: pytest.LogCaptureFixture,
) -> None:
    """SocketIO's os.sendfile failing with EIO (not the peer going away) is logged once,
    with the error, and closes the connection after the answer before it."""

    def failing_sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "sendfile", failing_sendfile)
    frames = serving(
        broker_with_records(tmp_path / "data"),
        read_until_closed,
        connections="socket",
        backend=backend,
    )
    assert [struct.unpack_from(">i", f)[0] for f in frames] == [1]
    record = internal_error(listener_log)
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "[Errno 5] Input/output error"
