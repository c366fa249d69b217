"""Large answers of a memory log's stored batches go from their views to the socket.

The asyncio connection writes an answer holding at least ``DIRECT_FROM`` bytes
of stored views on the socket itself (``sendmsg``), after everything the
transport holds, as ``loop.sendfile`` does for a disk segment, so that the
views are not copied into the transport's buffer when the socket does not take
them at once. These tests read such answers slowly (a small receive buffer,
small reads, pauses) over real sockets.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import math
import os
import socket
import ssl
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest
import trustme

from kafkette.backends.types import LogSlice
from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import ApiVersionsRequest, FetchRequest
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.records import RecordBatchBuilder, iter_batches
from kafkette.protocol.schema import Request
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net.asyncio_connection import DIRECT_FROM, LARGE_PART, ConnectionProtocol
from kafkette.server.net.frame_queue import FrameQueue
from kafkette.server.net.listener import ConnectionKind, serve_tcp

LOGGER = "kafkette.server.net.listener"
VALUES = [bytes([i]) * 200_000 for i in range(40)]
"""40 batches of one 200 kB record: an 8 MB answer, far more than the socket takes at once."""
T = TypeVar("T")


def frame(request: Request, version: int, correlation_id: int) -> bytes:
    body = bytes(encode_request(request, version, correlation_id, "t"))
    return struct.pack(">i", len(body)) + body


def batch(value: bytes) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, None, value)
    return builder.build()


FETCH = FetchRequest(
    max_wait_ms=0,
    min_bytes=1,
    max_bytes=16 << 20,
    topics=[
        FetchTopic(
            topic="big",
            partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=16 << 20)],
        )
    ],
)
PIPELINED = (
    frame(ApiVersionsRequest(), 3, 1) + frame(FETCH, 12, 2) + frame(ApiVersionsRequest(), 3, 3)
)


def broker_with_records(data_dir: Path | None) -> Broker:
    broker = Broker(BrokerConfig(data_dir=str(data_dir) if data_dir is not None else None))
    broker.cluster.create_topic("big", 1)
    log = broker.cluster.get_partition("big", 0).log
    for value in VALUES:
        log.append(batch(value), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return broker


def slow_client(port: int) -> socket.socket:
    """A blocking socket with a small receive buffer (set before connecting, so that
    the window is small from the start)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)
    sock.connect(("127.0.0.1", port))
    return sock


def read_frames_slowly(port: int, data: bytes, count: int) -> list[bytes]:
    """Send ``data``, then read ``count`` answer frames 4 KiB at a time, pausing now
    and then; the frames' bodies."""
    frames: list[bytes] = []
    buffer = bytearray()
    reads = 0
    with slow_client(port) as sock:
        sock.sendall(data)
        while len(frames) < count:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buffer += chunk
            reads += 1
            if reads % 128 == 0:
                time.sleep(0.002)
            while len(buffer) >= 4:
                size = struct.unpack_from(">i", buffer)[0]
                if len(buffer) < 4 + size:
                    break
                frames.append(bytes(buffer[4 : 4 + size]))
                del buffer[: 4 + size]
    return frames


def serving(
    broker: Broker,
    client: Callable[[int], T],
    tls: ssl.SSLContext | None = None,
    *,
    connections: ConnectionKind = "protocol",
    backend: str = "asyncio",
) -> T:
    """Run ``client(port)`` in a thread against ``broker``'s listener (by default the
    asyncio protocol's connections; ``socket``: SocketIO's, on either backend)."""

    async def main() -> T:
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                functools.partial(serve_tcp, connections=connections, tls=tls),
                broker,
                "127.0.0.1",
                0,
            )
            try:
                with anyio.fail_after(30):
                    return await anyio.to_thread.run_sync(client, port)
            finally:
                tg.cancel_scope.cancel()

    try:
        return anyio.run(main, backend=backend)
    finally:
        broker.close()


def small_send_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker's sockets keep 64 KiB unsent at most, whatever the host's TCP
    autotuning allows, so the 8 MB answer never fits at once."""
    real = ConnectionProtocol.connection_made

    def connection_made(self: ConnectionProtocol, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        real(self, transport)

    monkeypatch.setattr(ConnectionProtocol, "connection_made", connection_made)


def count_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(cls, name)

    async def counted(self: Any, *args: Any) -> Any:
        calls.append(1)
        return await real(self, *args)

    monkeypatch.setattr(cls, name, counted)
    return calls


def spy_on_descriptors(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """The descriptors os.dup made, and those os.close closed."""
    dups: list[int] = []
    closed: list[int] = []
    real_dup, real_close = os.dup, os.close

    def dup(fd: int) -> int:
        dups.append(real_dup(fd))
        return dups[-1]

    def close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, "dup", dup)
    monkeypatch.setattr(os, "close", close)
    return dups, closed


def test_a_large_memory_fetch_read_slowly_is_byte_identical_to_the_disk_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same batches in a memory and a disk log: the Fetch answer (views written on
    the socket / sendfile) is the same bytes, and the pipelined answers around it
    come before and after it. The descriptor duplicated to wait for writability
    is closed after the answer."""
    small_send_buffers(monkeypatch)
    waits = count_calls(monkeypatch, ConnectionProtocol, "_wait_writable")
    dups, closed = spy_on_descriptors(monkeypatch)
    read = functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    from_memory = serving(broker_with_records(None), read)
    waited_for_memory = len(waits)
    from_disk = serving(broker_with_records(tmp_path / "data"), read)

    assert waited_for_memory > 0  # the socket did not take the answer at once
    assert len(waits) == waited_for_memory  # the disk answer went by sendfile
    assert len(dups) == 1 and closed.count(dups[0]) == 1
    assert [struct.unpack_from(">i", f)[0] for f in from_memory] == [1, 2, 3]
    assert from_memory == from_disk
    correlation_id, fetched = decode_response(from_memory[1], FETCH.API_KEY, 12)
    partition = fetched.responses[0].partitions[0]
    assert (correlation_id, partition.error_code, partition.high_watermark) == (2, 0, 40)
    records = [r for b in iter_batches(partition.records) for r in b]
    assert [r.offset for r in records] == list(range(40))
    assert [r.value for r in records] == VALUES


def test_the_stored_views_are_handed_to_the_socket_and_not_to_the_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sendmsg gets the very views the log stores; the transport only the small answers."""
    broker = broker_with_records(None)
    stored = broker.cluster.get_partition("big", 0).log.read(0, 16 << 20).buffers
    assert len(stored) == len(VALUES) and sum(len(v) for v in stored) >= DIRECT_FROM
    handed: list[list[Any]] = []
    real_sendmsg = socket.socket.sendmsg

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        handed.append(list(buffers))
        return real_sendmsg(self, buffers, *args)

    written: list[int] = []
    real_made = ConnectionProtocol.connection_made

    def connection_made(self: ConnectionProtocol, transport: Any) -> None:
        write = transport.write

        def spy(data: Any) -> None:
            written.append(len(data))
            write(data)

        transport.write = spy
        real_made(self, transport)

    monkeypatch.setattr(socket.socket, "sendmsg", sendmsg)
    monkeypatch.setattr(ConnectionProtocol, "connection_made", connection_made)
    frames = serving(broker, functools.partial(read_frames_slowly, data=PIPELINED, count=3))

    assert [struct.unpack_from(">i", f)[0] for f in frames] == [1, 2, 3]
    first = handed[0]
    assert all(any(part is view for part in first) for view in stored)
    assert sum(len(part) for part in first) == 4 + len(frames[1])
    assert written == [4 + len(frames[0]), 4 + len(frames[2])]
    assert max(written) < LARGE_PART


def leave_mid_answer(port: int, caplog: pytest.LogCaptureFixture) -> None:
    """Ask for the 8 MB Fetch answer, read 64 KiB of it and close; return once the
    broker has logged the client gone."""
    with slow_client(port) as sock:
        sock.sendall(frame(FETCH, 12, 1))
        got = 0
        while got < 64 * 1024:
            got += len(sock.recv(4096))
    # (closed with unread bytes: the broker's socket is reset)
    deadline = time.monotonic() + 10
    while not any("middle of an answer" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_client_gone_in_the_middle_of_an_answer_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The client reads 64 KiB of the 8 MB answer and closes: one INFO line, nothing
    else logged, any duplicate descriptor closed, and the listener serves the next
    client."""
    caplog.set_level(logging.DEBUG)
    small_send_buffers(monkeypatch)
    dups, closed = spy_on_descriptors(monkeypatch)

    def client(port: int) -> int:
        leave_mid_answer(port, caplog)
        answers = read_frames_slowly(port, frame(ApiVersionsRequest(), 3, 7), 1)
        return int(struct.unpack_from(">i", answers[0])[0])

    assert serving(broker_with_records(None), client) == 7
    (line,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert line.startswith("client 127.0.0.1:")
    assert line.endswith(" went away in the middle of an answer")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert len(dups) <= 1 and all(closed.count(fd) == 1 for fd in dups)


def test_views_go_out_after_the_bytes_the_transport_still_holds() -> None:
    """8 MB handed to the transport that the slow peer has not taken yet, then an
    answer of views: the views reach the socket only after those bytes, and bytes
    queued during the direct write go out after it."""
    before = bytes(range(256)) * (8 << 12)
    views = tuple(memoryview(bytes([i]) * 100_000).toreadonly() for i in range(20))
    after = b"after"
    expected = before + b"head" + b"".join(views) + after

    def read_all(sock: socket.socket) -> bytes:
        received = bytearray()
        while len(received) < len(expected):
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
        return bytes(received)

    async def main() -> bytes:
        ours, theirs = socket.socketpair()
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        transport, conn = await loop.connect_accepted_socket(
            lambda: ConnectionProtocol(FrameQueue(1000), math.inf, ours), ours
        )
        reader = asyncio.ensure_future(asyncio.to_thread(read_all, theirs))
        conn.write([before])
        conn.flush()
        assert transport.get_write_buffer_size() > 0  # the peer has not taken it all
        sending = asyncio.ensure_future(
            conn.send_parts([b"head", LogSlice(sum(len(v) for v in views), views)])
        )
        await asyncio.sleep(0)
        conn.write([after])  # queued while the answer is written: flush waits for it
        conn.flush()
        await sending
        conn.flush()
        received = await asyncio.wait_for(reader, 20)
        conn.close()
        theirs.close()
        return received

    received = asyncio.run(main())
    assert len(received) == len(expected)
    assert received == expected


@pytest.mark.parametrize("storage", ["memory", "disk"])
def test_under_tls_the_transport_writes_the_answer(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket carries TLS records there: the same answers, none by sendmsg (nor by
    sendfile from a disk log: its region is read and written through the transport)."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    handed: list[int] = []
    real_sendmsg = socket.socket.sendmsg

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        handed.append(1)
        return real_sendmsg(self, buffers, *args)

    def read_over_tls(port: int) -> list[bytes]:
        frames: list[bytes] = []
        buffer = bytearray()
        with client_context.wrap_socket(slow_client(port), server_hostname="127.0.0.1") as sock:
            sock.sendall(PIPELINED)
            while len(frames) < 3:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError("the broker closed the connection")
                buffer += chunk
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    size = struct.unpack_from(">i", buffer)[0]
                    frames.append(bytes(buffer[4 : 4 + size]))
                    del buffer[: 4 + size]
        return frames

    plain = serving(
        broker_with_records(None), functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    )
    sent_files: list[int] = []
    real_sendfile = os.sendfile

    def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        sent_files.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(socket.socket, "sendmsg", sendmsg)
    monkeypatch.setattr(os, "sendfile", sendfile)
    data_dir = tmp_path / "data" if storage == "disk" else None
    over_tls = serving(broker_with_records(data_dir), read_over_tls, tls=server_context)
    assert handed == sent_files == []
    assert over_tls == plain
    assert [struct.unpack_from(">i", f)[0] for f in over_tls] == [1, 2, 3]


def test_without_a_descriptor_to_watch_the_transport_sends_the_rest(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """os.dup failing (no descriptor left) while the socket is full: the rest of the
    answer goes through the transport, in order, with one warning; later large
    answers on that connection go through the transport from the start."""
    plain = serving(
        broker_with_records(None), functools.partial(read_frames_slowly, data=PIPELINED, count=3)
    )
    tried: list[int] = []

    def no_descriptor(fd: int) -> int:
        tried.append(fd)
        raise OSError(errno.EMFILE, "Too many open files")

    small_send_buffers(monkeypatch)
    monkeypatch.setattr(os, "dup", no_descriptor)
    caplog.set_level(logging.INFO, LOGGER)
    twice = functools.partial(read_frames_slowly, data=PIPELINED + PIPELINED, count=6)
    frames = serving(broker_with_records(None), twice)
    assert len(tried) == 1
    assert frames == plain + plain
    (line,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert (
        line == "answers of stored views go through the transport: [Errno 24] Too many open files"
    )
