"""GatherWriter: a frame's pieces written to an asyncio transport in order, not joined.

Over plain TCP the pieces go to the socket with ``writev`` while the transport
holds nothing; what the socket does not take goes to the transport, and so does
everything after it until the transport has written it. Under TLS the pieces are
joined and handed to the transport. Each test reads what arrived at the other
end, byte for byte.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trustme

from kafkette.client.gather_write import IOV_MAX, GatherWriter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the writer is asyncio's (trio and memory:// use StreamPipe)


class Recorder(asyncio.Protocol):
    """A client protocol that remembers how its connection ended."""

    def __init__(self) -> None:
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


@asynccontextmanager
async def connected(
    *, send_buffer: int | None = None
) -> AsyncIterator[tuple[asyncio.Transport, Recorder, socket.socket]]:
    """A client transport over one end of a socket pair; the other end, blocking, is
    the test's to read (in a thread) or close."""
    ours, theirs = socket.socketpair()
    if send_buffer is not None:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, send_buffer)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(Recorder, sock=ours)
    try:
        yield transport, protocol, theirs
    finally:
        transport.abort()
        theirs.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        chunk = sock.recv(min(size - len(received), 1 << 20))
        if not chunk:
            break
        received += chunk
    return bytes(received)


def _pieces(count: int, size: int) -> list[bytes | bytearray | memoryview]:
    kinds = (bytes, bytearray, memoryview)
    return [kinds[i % 3](bytes([i % 251]) * (size + i % 7)) for i in range(count)]


async def test_pieces_go_out_in_one_writev_uncopied_while_the_socket_takes_them() -> None:
    async with connected() as (transport, _, theirs):
        writer = GatherWriter(transport)
        assert writer.vectored
        parts = _pieces(10, 1000)
        writer.write(parts)
        assert writer.queued_bytes == 0 and transport.get_write_buffer_size() == 0
        expected = b"".join(parts)
        received = await asyncio.to_thread(_read_exactly, theirs, len(expected))
        assert received == expected


async def test_more_pieces_than_one_writev_takes_arrive_in_order() -> None:
    async with connected() as (transport, _, theirs):
        writer = GatherWriter(transport)
        parts = _pieces(2 * IOV_MAX + 5, 3)
        writer.write(parts)
        writer.write([b"after"])
        expected = b"".join(parts) + b"after"
        received = await asyncio.to_thread(_read_exactly, theirs, len(expected))
        assert received == expected
        assert writer.queued_bytes == 0


async def test_what_a_full_socket_does_not_take_is_queued_in_order_behind_the_rest() -> None:
    """The socket takes part of a piece: its rest and the later pieces go to the
    transport, and a later write goes there too (behind them), not to the socket."""
    async with connected(send_buffer=16384) as (transport, _, theirs):
        writer = GatherWriter(transport)
        first = _pieces(6, 200_000)
        writer.write(first)
        queued = writer.queued_bytes
        total = sum(len(p) for p in first)
        assert 0 < queued < total  # the socket took some, the transport holds the rest
        assert transport.get_write_buffer_size() == queued
        second: list[bytes | bytearray | memoryview] = [bytearray(b"second" * 1000), b"end"]
        writer.write(second)
        assert writer.queued_bytes == queued + sum(len(p) for p in second)
        expected = b"".join(first) + b"".join(second)
        received = await asyncio.to_thread(_read_exactly, theirs, len(expected))
        assert received == expected
        assert transport.get_write_buffer_size() == 0


async def test_a_peer_gone_mid_write_closes_the_transport_and_later_writes_do_nothing() -> None:
    async with connected(send_buffer=16384) as (transport, protocol, theirs):
        writer = GatherWriter(transport)
        writer.write(_pieces(4, 100_000))  # the socket fills; the transport holds the rest
        assert writer.queued_bytes > 0
        theirs.close()
        writer.write([bytearray(b"x" * 100_000)])  # queued behind: no error here
        lost = await asyncio.wait_for(protocol.lost, 10)
        assert isinstance(lost, (BrokenPipeError, ConnectionResetError))
        assert transport.is_closing()
        before = writer.queued_bytes
        writer.write([b"late"])  # the socket is closed: nothing is written to its number
        assert writer.queued_bytes == before + 4


async def test_a_peer_gone_before_the_write_closes_the_transport() -> None:
    async with connected() as (transport, protocol, theirs):
        writer = GatherWriter(transport)
        theirs.close()
        await asyncio.sleep(0)
        writer.write([b"head", bytearray(b"batch" * 2000)])  # EPIPE: the transport reports it
        lost = await asyncio.wait_for(protocol.lost, 10)
        assert isinstance(lost, (BrokenPipeError, ConnectionResetError))


async def test_under_tls_the_pieces_are_joined_and_written_by_the_transport() -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    received = bytearray()
    enough = asyncio.Event()
    parts = _pieces(50, 3000)
    expected = b"".join(parts)

    class Server(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            received.extend(data)
            if len(received) >= len(expected):
                enough.set()

    loop = asyncio.get_running_loop()
    server = await loop.create_server(Server, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        transport, _ = await loop.create_connection(
            Recorder, "127.0.0.1", port, ssl=client_context, server_hostname="localhost"
        )
        try:
            writer = GatherWriter(transport)
            assert not writer.vectored
            writer.write(parts)
            assert writer.queued_bytes == len(expected)  # one joined write
            await asyncio.wait_for(enough.wait(), 10)
            assert bytes(received) == expected
        finally:
            transport.close()
    finally:
        server.close()
        await server.wait_closed()
