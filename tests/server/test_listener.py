"""The listener in process: frames in, frames out, over a real loopback socket."""

from __future__ import annotations

import functools
import struct

import anyio
import anyio.abc
import pytest

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import ApiVersionsRequest, CreateTopicsRequest, MetadataRequest
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net.listener import CloseConnection, process_frame, serve_tcp

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "socket"])
def connections(request: pytest.FixtureRequest) -> str:
    """How the listener serves connections: ``auto`` is the asyncio protocol under
    asyncio (the socket path under trio), ``socket`` the socket path on either."""
    return str(request.param)


def body(request: object, version: int, correlation_id: int) -> memoryview:
    return memoryview(bytes(encode_request(request, version, correlation_id, "t")))  # type: ignore[arg-type]


async def test_process_frame_answers_and_refuses() -> None:
    """Requests are answered; unknown versions (but ApiVersions) and garbage close."""
    broker = Broker()
    parts = await process_frame(broker, body(ApiVersionsRequest(), 3, 5), "peer")
    frame = b"".join(parts)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    correlation_id, response = decode_response(frame[4:], 18, 3)
    assert (correlation_id, response.error_code) == (5, 0)  # type: ignore[attr-defined]

    # ApiVersions newer than ours: answered at v0 with UNSUPPORTED_VERSION (KIP-511)
    newer = bytearray(body(ApiVersionsRequest(), 3, 6))
    newer[2:4] = struct.pack(">h", 99)
    frame = b"".join(await process_frame(broker, memoryview(bytes(newer)), "peer"))
    correlation_id, response = decode_response(frame[4:], 18, 0)
    assert (correlation_id, response.error_code) == (6, 35)  # type: ignore[attr-defined]

    # any other API at an unknown version, or garbage: the connection is closed
    newer_metadata = bytearray(body(MetadataRequest(topics=None), 12, 7))
    newer_metadata[2:4] = struct.pack(">h", 99)
    for frame_body in (
        memoryview(bytes(newer_metadata)),
        memoryview(b"\x00\x03"),
        memoryview(struct.pack(">hhi", 777, 0, 1)),
    ):
        with pytest.raises(CloseConnection):
            await process_frame(broker, frame_body, "peer")


async def test_serve_tcp_pipelined_and_limit(connections: str) -> None:
    """Pipelined requests are answered in order; a frame over the limit closes."""
    broker = Broker(BrokerConfig(socket_request_max_bytes=1000))
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve_tcp, connections=connections), broker, "127.0.0.1", 0
        )
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            requests = [
                CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 1, 1)]) for i in range(10)
            ]
            data = b""
            for i, request in enumerate(requests):
                payload = bytes(body(request, 7, 100 + i))
                data += struct.pack(">i", len(payload)) + payload
            await stream.send(data)
            received = b""
            answers: list[tuple[int, str]] = []
            while len(answers) < 10:
                received += await stream.receive()
                while len(received) >= 4:
                    size = struct.unpack(">i", received[:4])[0]
                    if len(received) < 4 + size:
                        break
                    correlation_id, response = decode_response(received[4 : 4 + size], 19, 7)
                    answers.append((correlation_id, response.topics[0].name))  # type: ignore[attr-defined]
                    received = received[4 + size :]
            assert answers == [(100 + i, f"t{i}") for i in range(10)]
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(struct.pack(">i", 1001))
            with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                await stream.receive()
        tg.cancel_scope.cancel()
    assert sorted(broker.cluster.topics) == [f"t{i}" for i in range(10)]


async def _roundtrip(
    stream: anyio.abc.ByteStream, request: object, version: int, key: int
) -> object:
    payload = bytes(body(request, version, 1))
    await stream.send(struct.pack(">i", len(payload)) + payload)
    received = b""
    while len(received) < 4 or len(received) < 4 + struct.unpack(">i", received[:4])[0]:
        received += await stream.receive()
    return decode_response(received[4:], key, version)[1]


async def test_idle_connections_close_but_a_long_request_is_not_idle(connections: str) -> None:
    """connections.max.idle.ms counts time waiting for a request, not time serving one."""
    from kafkette.protocol.messages import FetchRequest, FetchResponse
    from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic

    broker = Broker(BrokerConfig(connections_max_idle_ms=300))
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve_tcp, connections=connections), broker, "127.0.0.1", 0
        )
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            create = CreateTopicsRequest(topics=[CreatableTopic("quiet", 1, 1)])
            await _roundtrip(stream, create, 7, 19)
            # a long poll of 700 ms on an empty partition: served, not cut as idle
            fetch = FetchRequest(
                max_wait_ms=700,
                min_bytes=1,
                topics=[FetchTopic(topic="quiet", partitions=[FetchPartition(partition=0)])],
            )
            started = anyio.current_time()
            response = await _roundtrip(stream, fetch, 12, 1)
            assert isinstance(response, FetchResponse)
            assert response.responses[0].partitions[0].error_code == 0
            assert anyio.current_time() - started >= 0.6
            # then nothing is sent: the broker closes the connection
            with anyio.fail_after(5):
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await stream.receive()
        tg.cancel_scope.cancel()
