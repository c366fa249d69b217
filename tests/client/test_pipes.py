"""The frame pipes under a connection, against scripted brokers, on asyncio and trio.

Under asyncio a TCP connection uses :class:`AsyncioPipe`, under trio
:class:`StreamPipe`: each test runs on both, so both keep the same contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.client.gather_write import GatherWriter
from kafkette.client.pipes import AsyncioPipe, OnResponse, StreamPipe
from kafkette.client.wire import ClientWire
from kafkette.errors import KafkaConnectionError, KafkaTimeoutError
from kafkette.protocol.framing import RECEIVE_ROOM, FrameDecoder, encode_frame
from kafkette.protocol.headers import decode_request, encode_response
from kafkette.protocol.messages import (
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.api_versions_response import ApiVersion
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.messages.metadata_response import MetadataResponseTopic
from kafkette.protocol.schema import Request, Response

pytestmark = pytest.mark.anyio

# Answer: (request's correlation id, api version, request) -> frame bytes to send, or None
Answer = Callable[[int, int, Request], Awaitable[bytes | None]]


def _api_versions(correlation_id: int, version: int) -> bytes:
    response = ApiVersionsResponse(
        api_keys=[
            ApiVersion(api_key=18, min_version=0, max_version=3),
            ApiVersion(api_key=3, min_version=0, max_version=12),
        ]
    )
    return encode_frame(encode_response(response, version, correlation_id))


def _metadata(correlation_id: int, version: int, name: str) -> bytes:
    response = MetadataResponse(topics=[MetadataResponseTopic(name=name)])
    return encode_frame(encode_response(response, version, correlation_id))


@asynccontextmanager
async def scripted_broker(answer: Answer) -> AsyncIterator[int]:
    """A listener that answers ApiVersions itself and every other request with ``answer``."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:

        async def serve(stream: anyio.abc.SocketStream) -> None:
            decoder = FrameDecoder(1 << 30)
            async with stream:
                try:
                    while True:
                        decoder.feed(await stream.receive())
                        while (frame := decoder.next_frame()) is not None:
                            header, request = decode_request(frame)
                            cid, version = header.correlation_id, header.request_api_version
                            if header.request_api_key == 18:
                                await stream.send(_api_versions(cid, version))
                            elif (out := await answer(cid, version, request)) is not None:
                                await stream.send(out)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            yield listener.extra(anyio.abc.SocketAttribute.local_port)
            tg.cancel_scope.cancel()


async def echo(cid: int, version: int, request: Request) -> bytes:
    """Answer a topic's metadata request with that topic."""
    assert isinstance(request, MetadataRequest) and request.topics
    return _metadata(cid, version, request.topics[0].name)


async def answer_only_a(cid: int, version: int, request: Request) -> bytes | None:
    """Answer the request for topic "a"; leave every other unanswered."""
    assert isinstance(request, MetadataRequest) and request.topics
    name = request.topics[0].name
    return _metadata(cid, version, name) if name == "a" else None


def _topic_request(name: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=name)])


async def test_tcp_connections_use_the_pipe_of_their_event_loop(anyio_backend: str) -> None:
    async with (
        scripted_broker(echo) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        expected = AsyncioPipe if anyio_backend == "asyncio" else StreamPipe
        assert type(connection._pipe) is expected
        response = await connection.request(_topic_request("a"))
        assert isinstance(response, MetadataResponse)
        assert [t.name for t in response.topics] == ["a"]


async def test_a_cancelled_request_leaves_the_others_and_the_connection_intact() -> None:
    """The request waiting for "slow" is cancelled; its answer comes after."""
    received_slow = anyio.Event()
    release = anyio.Event()

    async def answer(cid: int, version: int, request: Request) -> bytes:
        assert isinstance(request, MetadataRequest) and request.topics
        name = request.topics[0].name
        if name == "slow":
            received_slow.set()
            await release.wait()
        return _metadata(cid, version, name)

    async with (
        scripted_broker(answer) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        cancelled = []

        async def slow(scope: anyio.CancelScope) -> None:
            with scope:
                await connection.request(_topic_request("slow"))
            cancelled.append(scope.cancelled_caught)

        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()
            tg.start_soon(slow, scope)
            await received_slow.wait()
            scope.cancel()
        assert cancelled == [True]
        release.set()
        names = []
        for name in ("b", "c"):
            response = await connection.request(_topic_request(name))
            assert isinstance(response, MetadataResponse)
            names.append(response.topics[0].name)
        assert names == ["b", "c"]  # the late "slow" answer was dropped, not misrouted
        assert not connection.closed
        assert connection.in_flight == 0


async def test_a_broker_that_stops_reading_times_the_request_out() -> None:
    """The frame cannot be written whole: waiting for the socket to drain times out too."""

    async def never(cid: int, version: int, request: Request) -> None:
        await anyio.sleep_forever()

    async with scripted_broker(never) as port:
        connection = await BrokerConnection.connect("127.0.0.1", port, request_timeout_s=0.5)
        # 64 MiB of topic names: more than both sockets' buffers hold
        big = MetadataRequest(
            topics=[MetadataRequestTopic(name="x" * 30_000) for _ in range(2_200)]
        )
        with anyio.fail_after(10):
            with pytest.raises(KafkaTimeoutError, match="no response"):
                await connection.request(big)
        assert connection.closed
        with pytest.raises(KafkaConnectionError, match="closed"):
            await connection.request(_topic_request("a"))


async def test_a_malformed_response_fails_every_waiting_request() -> None:
    received_first = anyio.Event()

    async def garbage(cid: int, version: int, request: Request) -> bytes | None:
        assert isinstance(request, MetadataRequest) and request.topics
        if request.topics[0].name == "bad":
            return encode_frame(cid.to_bytes(4, "big") + b"\xff" * 7)
        received_first.set()
        return None  # never answered

    async with (
        scripted_broker(garbage) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        errors: dict[str, KafkaConnectionError] = {}

        async def call(name: str) -> None:
            try:
                await connection.request(_topic_request(name))
            except KafkaConnectionError as exc:
                errors[name] = exc

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "waiting")
                await received_first.wait()
                tg.start_soon(call, "bad")
        assert sorted(errors) == ["bad", "waiting"]
        for exc in errors.values():
            assert "malformed response" in f"{exc} {exc.__cause__}"
        assert connection.closed


# ---- submit: requests written without a task each (the producer's path); under
# trio the connection's pump, started in the test's task group, writes and reads

Outcome = tuple[str | None, str | None]
"""(topic named in the response, or None; error class name, or None)"""


def _recorder(outcomes: list[Outcome], done: anyio.Event, count: int) -> OnResponse:
    def on_response(response: Response | None, error: BaseException | None) -> None:
        if response is not None:
            assert isinstance(response, MetadataResponse)
            outcomes.append((response.topics[0].name, None))
        else:
            outcomes.append((None, type(error).__name__))
        if len(outcomes) == count:
            done.set()

    return on_response


async def test_submitted_requests_get_their_responses_between_awaited_ones() -> None:
    async with (
        scripted_broker(echo) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
        anyio.create_task_group() as tg,
    ):
        connection.start_pump(tg)
        outcomes: list[Outcome] = []
        done = anyio.Event()
        on_response = _recorder(outcomes, done, 2)
        assert connection.can_submit
        connection.submit(_topic_request("a"), on_response)
        awaited = await connection.request(_topic_request("b"))
        connection.submit(_topic_request("c"), on_response)
        with anyio.fail_after(10):
            await done.wait()
        assert isinstance(awaited, MetadataResponse)
        assert awaited.topics[0].name == "b"
        assert outcomes == [("a", None), ("c", None)]
        assert connection.in_flight == 0
        tg.cancel_scope.cancel()


async def test_streams_submit_only_while_their_pump_runs(anyio_backend: str) -> None:
    """Under trio a request waiting for its response reads; the pump takes over after it,
    and when the pump stops, awaited requests read for themselves again."""
    async with (
        scripted_broker(echo) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        assert connection.can_submit is (anyio_backend == "asyncio")
        async with anyio.create_task_group() as tg:
            connection.start_pump(tg)
            connection.start_pump(tg)  # once is enough
            assert connection.can_submit
            outcomes: list[Outcome] = []
            done = anyio.Event()
            connection.submit(_topic_request("a"), _recorder(outcomes, done, 1))
            with anyio.fail_after(10):
                await done.wait()
            assert outcomes == [("a", None)]
            tg.cancel_scope.cancel()
        assert connection.can_submit is (anyio_backend == "asyncio")
        with anyio.fail_after(10):
            response = await connection.request(_topic_request("b"))
        assert isinstance(response, MetadataResponse)
        assert response.topics[0].name == "b"


async def test_an_unanswered_submitted_request_times_out_and_closes_the_connection() -> None:
    """ "a" is answered; "b" never is: it times out at its own deadline, and "c",
    still waiting, fails with the connection."""

    async with scripted_broker(answer_only_a) as port, anyio.create_task_group() as tg:
        connection = await BrokerConnection.connect("127.0.0.1", port, request_timeout_s=0.3)
        connection.start_pump(tg)
        outcomes: list[Outcome] = []
        done = anyio.Event()
        on_response = _recorder(outcomes, done, 3)
        connection.submit(_topic_request("a"), on_response)
        connection.submit(_topic_request("b"), on_response)
        connection.submit(_topic_request("c"), on_response)
        with anyio.fail_after(10):
            await done.wait()
        assert outcomes == [
            ("a", None),
            (None, "KafkaTimeoutError"),
            (None, "KafkaConnectionError"),
        ]
        assert connection.closed
        with pytest.raises(KafkaConnectionError, match="closed"):
            connection.submit(_topic_request("d"), on_response)


async def test_a_request_submitted_to_an_idle_pump_still_times_out() -> None:
    """The pump reads without a deadline while nothing is due; a request submitted
    then gets its own."""
    async with scripted_broker(answer_only_a) as port, anyio.create_task_group() as tg:
        connection = await BrokerConnection.connect("127.0.0.1", port, request_timeout_s=0.3)
        connection.start_pump(tg)
        await anyio.wait_all_tasks_blocked()  # the pump (trio) is reading, nothing due
        outcomes: list[Outcome] = []
        done = anyio.Event()
        connection.submit(_topic_request("b"), _recorder(outcomes, done, 1))
        with anyio.fail_after(10):
            await done.wait()
        assert outcomes == [(None, "KafkaTimeoutError")]
        assert connection.closed


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_awaited_request_behind_an_answered_one_times_out_on_its_own_deadline() -> None:
    async with scripted_broker(answer_only_a) as port:
        connection = await BrokerConnection.connect("127.0.0.1", port, request_timeout_s=0.3)
        response = await connection.request(_topic_request("a"))
        assert isinstance(response, MetadataResponse)
        with anyio.fail_after(10):
            with pytest.raises(KafkaTimeoutError, match="no response"):
                await connection.request(_topic_request("b"))
        assert connection.closed


async def test_submitted_requests_fail_when_the_broker_closes_the_connection() -> None:
    received = anyio.Event()

    async def hang_up(cid: int, version: int, request: Request) -> bytes | None:
        received.set()
        raise anyio.BrokenResourceError  # the scripted broker closes the stream

    async with scripted_broker(hang_up) as port, anyio.create_task_group() as tg:
        connection = await BrokerConnection.connect("127.0.0.1", port)
        connection.start_pump(tg)
        outcomes: list[Outcome] = []
        done = anyio.Event()
        connection.submit(_topic_request("a"), _recorder(outcomes, done, 1))
        with anyio.fail_after(10):
            await done.wait()
        assert outcomes == [(None, "KafkaConnectionError")]
        assert connection.closed


async def many_topics(cid: int, version: int, request: Request) -> bytes:
    """Answer with 40,000 topics: a response of about 1 MB, read in several reads."""
    topics = [MetadataResponseTopic(name=f"topic-{i:06d}") for i in range(40_000)]
    return encode_frame(encode_response(MetadataResponse(topics=topics), version, cid))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_pipe_reads_a_large_response_into_its_own_buffer() -> None:
    """The transport reads into the wire's buffer (no new bytes object per read, no
    copy), and once a large response's size is known, the rest of it straight into the
    buffer the response is handed out in; responses spread over reads arrive whole."""
    sizes: list[int] = []  # of the response frames' bodies

    async def answer(cid: int, version: int, request: Request) -> bytes:
        frame = await many_topics(cid, version, request)
        sizes.append(len(frame) - 4)
        return frame

    async with (
        scripted_broker(answer) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        pipe = connection._pipe
        assert isinstance(pipe, AsyncioPipe)
        lengths: list[int] = []  # of the buffer each read went into
        reads: list[int] = []
        get_buffer, buffer_updated = pipe.get_buffer, pipe.buffer_updated

        def tracked_get_buffer(sizehint: int) -> memoryview:
            buffer = get_buffer(sizehint)
            assert pipe._direct  # the wire's buffer, not the pipe's own
            assert isinstance(buffer.obj, bytearray)
            lengths.append(len(buffer.obj))
            return buffer

        def tracked_buffer_updated(nbytes: int) -> None:
            reads.append(nbytes)
            buffer_updated(nbytes)

        pipe.get_buffer = tracked_get_buffer  # type: ignore[method-assign]
        pipe.buffer_updated = tracked_buffer_updated  # type: ignore[method-assign]
        for _ in range(2):
            response = await connection.request(_topic_request("a"))
            assert isinstance(response, MetadataResponse)
            assert [t.name for t in response.topics] == [f"topic-{i:06d}" for i in range(40_000)]
        size = sizes[0]
        assert sizes == [size, size] and size > 1_000_000
        assert all(length == RECEIVE_ROOM or length > size for length in lengths)
        into_own = sum(n for length, n in zip(lengths, reads, strict=True) if length > size)
        assert into_own >= 2 * (size - RECEIVE_ROOM)
        assert sum(reads) == 2 * (size + 4)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_corked_submits_go_out_in_one_write_in_order() -> None:
    reads: list[list[str]] = []

    async with (
        scripted_broker(echo) as port,
        await BrokerConnection.connect("127.0.0.1", port) as connection,
    ):
        pipe = connection._pipe
        assert isinstance(pipe, AsyncioPipe)
        assert pipe._transport is not None

        class CountingWriter(GatherWriter):
            def write(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
                decoder = FrameDecoder(1 << 20)
                decoder.feed(b"".join(parts))
                names = []
                while (frame := decoder.next_frame()) is not None:
                    request = decode_request(frame)[1]
                    assert isinstance(request, MetadataRequest) and request.topics
                    names.append(request.topics[0].name)
                reads.append(names)
                super().write(parts)

        pipe._writer = CountingWriter(pipe._transport)
        outcomes: list[Outcome] = []
        done = anyio.Event()
        on_response = _recorder(outcomes, done, 4)
        connection.cork()
        for name in ("a", "b", "c"):
            connection.submit(_topic_request(name), on_response)
        assert reads == []
        connection.uncork()
        connection.cork()
        connection.submit(_topic_request("d"), on_response)
        connection.uncork()
        connection.uncork()  # nothing held: no write
        with anyio.fail_after(10):
            await done.wait()
        assert reads == [["a", "b", "c"], ["d"]]
        assert outcomes == [("a", None), ("b", None), ("c", None), ("d", None)]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_asyncio_pipe_behind_its_socket_calls_back_once_it_drained() -> None:
    """While the transport has paused writing (more than the high-water mark queued) the
    pipe is ``behind`` and takes no submit; ``resume_writing`` runs each callback given
    to ``when_drained`` once (the producer's sender waits for it rather than starting
    workers), and so does a connection that breaks while behind."""
    pipe = AsyncioPipe(ClientWire(None), address="b:1", request_timeout_s=30)
    assert not pipe.behind
    calls: list[tuple[str, bool]] = []
    pipe.pause_writing()  # as the transport calls it
    assert pipe.behind and not pipe.can_submit
    pipe.when_drained(lambda: calls.append(("first", pipe.behind)))
    pipe.when_drained(lambda: calls.append(("second", pipe.behind)))
    assert calls == []
    pipe.resume_writing()
    assert calls == [("first", False), ("second", False)] and pipe.can_submit
    pipe.resume_writing()
    assert len(calls) == 2  # once each
    pipe.pause_writing()
    pipe.when_drained(lambda: calls.append(("broken", pipe.behind)))
    pipe._fail(KafkaConnectionError("gone"))
    assert calls[2:] == [("broken", False)] and not pipe.can_submit
