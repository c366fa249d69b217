"""Connections of the TCP listener, served both ways: an asyncio protocol and a
hand-driven socket (asyncio and trio).

``connections="auto"`` is the asyncio protocol under asyncio and the socket path
under trio; ``"socket"`` is the socket path on either backend.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import pytest

from kafkette.protocol.errors import FrameTooLargeError, InvalidLengthError
from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
)
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.protocol.schema import Request
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net import asyncio_connection, socket_connection
from kafkette.server.net.asyncio_connection import (
    MAX_DIRECT_READS,
    READ_HIGH_WATER,
    ConnectionProtocol,
    serve_protocol,
)
from kafkette.server.net.frame_queue import FrameQueue
from kafkette.server.net.listener import serve_tcp
from kafkette.server.sasl import SaslSettings

CLOSED = (anyio.EndOfStream, anyio.BrokenResourceError)
LOGGER = "kafkette.server.net.listener"


def frame(request: Request, version: int, correlation_id: int) -> bytes:
    body = bytes(encode_request(request, version, correlation_id, "t"))
    return struct.pack(">i", len(body)) + body


def batch(*values: bytes) -> bytes:
    builder = RecordBatchBuilder()
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, None, value)
    return builder.build()


def produce(topic: str, partition: int, acks: int) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, batch(b"v"))])],
    )


def long_poll(topic: str, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0)])],
    )


class Client:
    """Raw Kafka frames over a TCP stream."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def frame(self) -> bytes:
        while (
            len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">i", self.buffer[:4])[0]
        ):
            self.buffer += await self.stream.receive()
        size = struct.unpack(">i", self.buffer[:4])[0]
        body, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
        return body

    async def answer(self, api_key: int, version: int) -> tuple[int, Any]:
        return decode_response(await self.frame(), api_key, version)

    async def assert_closed(self) -> None:
        with anyio.fail_after(5), pytest.raises(CLOSED):
            await self.frame()


@pytest.fixture(params=["auto", "socket"])
def connections(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Server:
    """A listener's port and broker, and the clients connected to it (closed at the end)."""

    def __init__(self, broker: Broker, port: int) -> None:
        self.broker = broker
        self.port = port
        self.clients: list[Client] = []

    async def connect(self) -> Client:
        client = Client(await anyio.connect_tcp("127.0.0.1", self.port))
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.stream.aclose()


@pytest.fixture
async def server(connections: str) -> AsyncIterator[Server]:
    broker = Broker(BrokerConfig(socket_request_max_bytes=100_000))
    broker.cluster.create_topic("t", 1)
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda **kw: serve_tcp(broker, "127.0.0.1", 0, connections=connections, **kw)
        )  # type: ignore[arg-type]
        running = Server(broker, port)
        yield running
        await running.aclose()
        tg.cancel_scope.cancel()


def listener_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


async def wait_for_log(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The listener's records at ``level`` once there is one (the connection task logs
    after the client sees the close)."""
    with anyio.fail_after(5):
        while not (found := listener_records(caplog, level)):
            await anyio.sleep(0.01)
    return found


@pytest.mark.anyio
async def test_acks_zero_is_not_answered_and_the_next_request_is(server: Server) -> None:
    client = await server.connect()
    await client.send(
        frame(produce("t", 0, acks=0), 9, 1)
        + frame(ApiVersionsRequest(), 3, 2)
        + frame(produce("t", 0, acks=1), 9, 3)
    )
    correlation_id, versions = await client.answer(18, 3)
    assert (correlation_id, versions.error_code) == (2, 0)
    correlation_id, produced = await client.answer(0, 9)
    partition = produced.responses[0].partition_responses[0]
    assert (correlation_id, partition.error_code, partition.base_offset) == (3, 0, 1)
    assert server.broker.cluster.get_partition("t", 0).log.log_end_offset == 2
    await client.stream.aclose()


PIPELINED = 60


@pytest.mark.anyio
async def test_pipelined_requests_give_the_other_tasks_turns(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests already received are served without a wait, but not all in one go: a
    client may have thousands pipelined (librdkafka sends a Produce per partition), and
    970 of them held a disk broker's loop for 128 ms (#30, ``bench/first_writes.py``).
    With the step budget at 0 the other tasks get a turn between any two requests."""
    monkeypatch.setattr(asyncio_connection, "STEP_BUDGET_S", 0.0)
    monkeypatch.setattr(socket_connection, "STEP_BUDGET_S", 0.0)
    log = server.broker.cluster.get_partition("t", 0).log
    seen: set[int] = set()  # the log end offsets another task saw while they were served
    done = False

    async def watch() -> None:
        while not done:
            seen.add(log.log_end_offset)
            await anyio.sleep(0)

    client = await server.connect()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        await client.send(b"".join(frame(produce("t", 0, acks=1), 9, i) for i in range(PIPELINED)))
        answers = [await client.answer(0, 9) for _ in range(PIPELINED)]
        done = True
    assert [
        (correlation_id, p.error_code, p.base_offset)
        for correlation_id, answer in answers
        for p in answer.responses[0].partition_responses
    ] == [(i, 0, i) for i in range(PIPELINED)]
    assert len(seen - {0, PIPELINED}) >= PIPELINED // 2, sorted(seen)


@pytest.mark.anyio
async def test_failed_acks_zero_produce_closes_with_one_log_line(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    client = await server.connect()
    await client.send(frame(produce("t", 5, acks=0), 9, 1) + frame(ApiVersionsRequest(), 3, 2))
    await client.assert_closed()
    (line,) = await wait_for_log(caplog, logging.WARNING)
    assert line.startswith("closing connection from 127.0.0.1:")
    assert line.endswith(": produce with acks=0 failed for t-5: 3")


@pytest.mark.anyio
async def test_requests_before_a_bad_size_are_answered_then_the_connection_closes(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    client = await server.connect()
    await client.send(
        frame(ApiVersionsRequest(), 3, 7)
        + frame(ApiVersionsRequest(), 3, 8)
        + b"GET / HTTP/1.1\r\n"
    )
    assert [(await client.answer(18, 3))[0] for _ in range(2)] == [7, 8]
    await client.assert_closed()
    (line,) = await wait_for_log(caplog, logging.WARNING)
    assert line.startswith("closing connection from 127.0.0.1:")
    assert "1195725856" in line  # "GET " read as a size


@pytest.mark.anyio
async def test_unknown_api_closes_after_earlier_answers(server: Server) -> None:
    client = await server.connect()
    await client.send(frame(ApiVersionsRequest(), 3, 1) + struct.pack(">ihhi", 8, 777, 0, 2))
    assert (await client.answer(18, 3))[0] == 1
    await client.assert_closed()


@pytest.mark.anyio
async def test_a_client_gone_mid_request_is_logged(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    client = await server.connect()
    whole = frame(MetadataRequest(topics=None), 12, 1)
    await client.send(whole[:-3])
    await client.stream.aclose()
    (line,) = await wait_for_log(caplog, logging.INFO)
    assert line.startswith("client 127.0.0.1:")
    assert line.endswith(" went away in the middle of a request")


@pytest.mark.anyio
async def test_requests_sent_before_the_client_closes_its_side_are_answered(
    server: Server,
) -> None:
    client = await server.connect()
    await client.send(b"".join(frame(ApiVersionsRequest(), 3, i) for i in range(3)))
    await client.stream.send_eof()  # type: ignore[attr-defined]
    assert [(await client.answer(18, 3))[0] for _ in range(3)] == [0, 1, 2]
    await client.assert_closed()


@pytest.mark.anyio
async def test_a_blocking_request_does_not_hold_back_earlier_answers(server: Server) -> None:
    """A long poll pipelined behind a request: the first answer goes out at once."""
    client = await server.connect()
    await client.send(frame(ApiVersionsRequest(), 3, 1) + frame(long_poll("t", 800), 12, 2))
    started = anyio.current_time()
    assert (await client.answer(18, 3))[0] == 1
    answered = anyio.current_time() - started
    correlation_id, fetched = await client.answer(1, 12)
    polled = anyio.current_time() - started
    assert (correlation_id, fetched.responses[0].partitions[0].error_code) == (2, 0)
    assert answered < 0.6 <= polled


@pytest.mark.anyio
async def test_cancelling_the_listener_closes_every_connection(connections: str) -> None:
    broker = Broker()
    broker.cluster.create_topic("t", 1)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                lambda **kw: serve_tcp(broker, "127.0.0.1", 0, connections=connections, **kw)
            )  # type: ignore[arg-type]
            server = Server(broker, port)
            idle = await server.connect()
            polling = await server.connect()
            await polling.send(
                frame(ApiVersionsRequest(), 3, 1) + frame(long_poll("t", 60_000), 12, 2)
            )
            assert (await polling.answer(18, 3))[0] == 1  # the fetch is now waiting
            tg.cancel_scope.cancel()
        await idle.assert_closed()
        await polling.assert_closed()
        await server.aclose()


@pytest.mark.anyio
async def test_failed_authentication_is_answered_at_once_and_closed_after_the_delay(
    connections: str,
) -> None:
    settings = SaslSettings.with_users(["PLAIN"], [("alice", "secret")])
    settings.failed_authentication_delay_ms = 400
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda **kw: serve_tcp(
                Broker(), "127.0.0.1", 0, sasl=settings, connections=connections, **kw
            )  # type: ignore[arg-type]
        )
        server = Server(Broker(), port)
        client = await server.connect()
        await client.send(frame(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1))
        assert (await client.answer(17, 1))[1].error_code == 0
        await client.send(frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2, 2))
        correlation_id, response = await client.answer(36, 2)
        answered = anyio.current_time()
        assert isinstance(response, SaslAuthenticateResponse)
        assert (correlation_id, response.error_code) == (2, 58)
        await client.assert_closed()
        assert anyio.current_time() - answered >= 0.3
        await server.aclose()
        tg.cancel_scope.cancel()


# The asyncio protocol on a fake transport: what cannot be seen from a socket.


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.written = asyncio.Event()
        self.reading = True
        self.pauses = 0
        self.state = "open"

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.written.set()

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.state != "open"

    def close(self) -> None:
        self.state = "closed"

    def abort(self) -> None:
        self.state = "aborted"


def connected(max_frame: int = 10_000_000) -> tuple[ConnectionProtocol, FakeTransport]:
    conn = ConnectionProtocol(FrameQueue(max_frame), math.inf)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def receive(conn: ConnectionProtocol, data: bytes) -> None:
    """What the transport does with bytes read from the socket."""
    while data:
        buffer = conn.get_buffer(-1)
        n = min(len(buffer), len(data))
        buffer[:n] = data[:n]
        conn.buffer_updated(n)
        data = data[n:]


def answers(written: bytes) -> list[int]:
    """Correlation ids of the answer frames in ``written``."""
    ids = []
    while written:
        size = struct.unpack(">i", written[:4])[0]
        ids.append(struct.unpack(">i", written[4:8])[0])
        written = written[4 + size :]
    return ids


def test_pipelined_requests_are_answered_each_as_soon_as_it_is_served() -> None:
    """Five requests in one read: five writes, in order, the first before the second
    request is served (the client works on it meanwhile)."""

    async def main() -> None:
        conn, transport = connected()
        waiting: list[bool] = []  # at each write: whether requests still wait to be served
        write = transport.write

        def watching_write(data: Any) -> None:
            waiting.append(conn.decoder.has_whole_frame)
            write(data)

        transport.write = watching_write  # type: ignore[method-assign]
        task = asyncio.create_task(serve_protocol(Broker(), conn, "peer"))
        receive(conn, b"".join(frame(ApiVersionsRequest(), 3, i) for i in range(5)))
        while len(transport.writes) < 5:
            transport.written.clear()
            await transport.written.wait()
        assert [answers(w) for w in transport.writes] == [[0], [1], [2], [3], [4]]
        assert waiting == [True, True, True, True, False]
        receive(conn, frame(ApiVersionsRequest(), 3, 5))
        transport.written.clear()
        await transport.written.wait()
        assert [answers(w) for w in transport.writes] == [[0], [1], [2], [3], [4], [5]]
        conn.connection_lost(None)
        await task
        assert transport.state == "closed"

    asyncio.run(asyncio.wait_for(main(), 10))


def test_answers_queued_before_a_blocking_request_are_written_and_cancel_aborts() -> None:
    async def main() -> None:
        broker = Broker()
        broker.cluster.create_topic("t", 1)
        conn, transport = connected()
        task = asyncio.create_task(serve_protocol(broker, conn, "peer"))
        receive(conn, frame(ApiVersionsRequest(), 3, 1) + frame(long_poll("t", 60_000), 12, 2))
        await transport.written.wait()
        assert [answers(w) for w in transport.writes] == [[1]]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert transport.state == "aborted"

    asyncio.run(asyncio.wait_for(main(), 10))


def test_reading_pauses_while_whole_requests_pile_up() -> None:
    """A client sending faster than it is served: reading pauses above the high-water
    mark and resumes once the waiting requests fall to half of it."""

    async def main() -> None:
        conn, transport = connected()
        body = b"\x00" * 65_532
        count = 2 * READ_HIGH_WATER // 65_536 + 4
        receive(conn, struct.pack(">i", len(body)) + body)
        assert transport.reading  # one request waiting is never a reason to pause
        for _ in range(count - 1):
            receive(conn, struct.pack(">i", len(body)) + body)
        assert (transport.reading, transport.pauses) == (False, 1)
        taken = 0
        while not transport.reading:
            frame_body = await conn.next_frame()
            assert frame_body is not None and bytes(frame_body) == body
            taken += 1
        assert conn.decoder.buffered <= READ_HIGH_WATER // 2
        assert conn.decoder.buffered + taken * 65_536 == count * 65_536

    asyncio.run(asyncio.wait_for(main(), 10))


def test_one_large_request_arriving_does_not_pause_reading() -> None:
    """Bytes of a request still arriving are bounded by the frame size limit, not paused."""

    async def main() -> None:
        conn, transport = connected(max_frame=4 * READ_HIGH_WATER)
        body = bytes(range(256)) * (3 * READ_HIGH_WATER // 256)
        data = struct.pack(">i", len(body)) + body
        receive(conn, data[:-1])
        assert (transport.reading, transport.pauses) == (True, 0)
        receive(conn, data[-1:])
        frame_body = await conn.next_frame()
        assert frame_body is not None and bytes(frame_body) == body

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_bad_size_is_raised_after_the_requests_before_it() -> None:
    async def main() -> None:
        conn, _ = connected(max_frame=1000)
        first = frame(ApiVersionsRequest(), 3, 1)
        receive(conn, first + struct.pack(">i", 1001))
        frame_body = await conn.next_frame()
        assert frame_body is not None and bytes(frame_body) == first[4:]
        with pytest.raises(FrameTooLargeError, match="1001"):
            await conn.next_frame()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_bad_size_first_stops_reading() -> None:
    async def main() -> None:
        conn, transport = connected(max_frame=1000)
        receive(conn, struct.pack(">i", -5))
        assert (transport.reading, transport.pauses) == (False, 1)
        with pytest.raises(InvalidLengthError, match="-5"):
            await conn.next_frame()

    asyncio.run(asyncio.wait_for(main(), 10))


@pytest.mark.anyio
async def test_a_large_disk_fetch_between_pipelined_requests_keeps_its_place(
    connections: str, tmp_path: Any
) -> None:
    """Segment bytes sent with sendfile (more than the socket buffers hold) go out
    after the answers queued before them and before the ones after."""
    from kafkette.protocol.records import iter_batches

    broker = Broker(BrokerConfig(data_dir=str(tmp_path / "data")))
    broker.cluster.create_topic("big", 1)
    log = broker.cluster.get_partition("big", 0).log
    values = [bytes([i]) * 200_000 for i in range(40)]
    for value in values:
        log.append(batch(value), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    fetch = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=100 << 20,
        topics=[
            FetchTopic(
                topic="big",
                partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=50 << 20)],
            )
        ],
    )
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda **kw: serve_tcp(broker, "127.0.0.1", 0, connections=connections, **kw)
        )  # type: ignore[arg-type]
        server = Server(broker, port)
        client = await server.connect()
        await client.send(
            frame(ApiVersionsRequest(), 3, 1)
            + frame(fetch, 12, 2)
            + frame(ApiVersionsRequest(), 3, 3)
        )
        with anyio.fail_after(20):
            first = (await client.answer(18, 3))[0]
            correlation_id, fetched = await client.answer(1, 12)
            last = (await client.answer(18, 3))[0]
        await server.aclose()
        tg.cancel_scope.cancel()
    broker.close()
    assert (first, correlation_id, last) == (1, 2, 3)
    records = fetched.responses[0].partitions[0].records
    assert [r.value for b in iter_batches(records) for r in b] == values


def test_serving_waits_while_the_transport_is_full() -> None:
    """Above the transport's high-water mark the serving task stops until it drains."""

    async def main() -> None:
        conn, transport = connected()
        conn.pause_writing()  # what the transport does when its buffer is full
        task = asyncio.create_task(serve_protocol(Broker(), conn, "peer"))
        receive(conn, frame(ApiVersionsRequest(), 3, 1) + frame(ApiVersionsRequest(), 3, 2))
        await transport.written.wait()  # the first answer is handed over, then the task waits
        assert [answers(w) for w in transport.writes] == [[1]]
        transport.written.clear()
        conn.resume_writing()
        await transport.written.wait()
        assert [answers(w) for w in transport.writes] == [[1], [2]]
        conn.connection_lost(None)
        await task

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_request_already_in_the_socket_is_read_without_the_event_loop() -> None:
    """After answering, the serving task reads what the socket holds before it waits:
    the second request here reaches only the socket, never the (fake) transport."""

    async def main() -> None:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.setblocking(False)
            conn = ConnectionProtocol(FrameQueue(10_000), math.inf, ours)
            transport = FakeTransport()
            conn.connection_made(transport)
            theirs.sendall(frame(ApiVersionsRequest(), 3, 2))
            receive(conn, frame(ApiVersionsRequest(), 3, 1))
            task = asyncio.create_task(serve_protocol(Broker(), conn, "peer"))
            while len(transport.writes) < 2:
                transport.written.clear()
                await transport.written.wait()
            assert [answers(w) for w in transport.writes] == [[1], [2]]
            conn.connection_lost(None)
            await task

    asyncio.run(asyncio.wait_for(main(), 10))


def test_reads_by_the_serving_task_give_the_event_loop_a_turn() -> None:
    """A client whose next request is always already there: after MAX_DIRECT_READS
    reads of its own the task waits on the event loop (here: forever, as the fake
    transport delivers nothing), with the next request still in the socket."""

    async def main() -> None:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.setblocking(False)
            conn = ConnectionProtocol(FrameQueue(10_000), math.inf, ours)
            sent = [1]

            class Client(FakeTransport):
                def write(self, data: Any) -> None:
                    super().write(data)
                    sent.append(sent[-1] + 1)  # answered: the next request goes out
                    theirs.sendall(frame(ApiVersionsRequest(), 3, sent[-1]))

            transport = Client()
            conn.connection_made(transport)
            receive(conn, frame(ApiVersionsRequest(), 3, 1))
            task = asyncio.create_task(serve_protocol(Broker(), conn, "peer"))
            while not conn.waiting:
                transport.written.clear()
                await transport.written.wait()
            answered = [i for w in transport.writes for i in answers(w)]
            assert answered == list(range(1, MAX_DIRECT_READS + 2))
            assert ours.recv(4) == struct.pack(">i", len(frame(ApiVersionsRequest(), 3, 0)) - 4)
            conn.connection_lost(None)
            await task

    asyncio.run(asyncio.wait_for(main(), 10))
