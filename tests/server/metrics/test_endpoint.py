"""The scrape endpoint over HTTP, with connections and SASL authentications counted per
listener and mechanism (asyncio and trio)."""

from __future__ import annotations

import functools

import anyio
import anyio.abc
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.client.security.sasl import SaslCredentials
from kafkette.errors import SaslAuthenticationFailedError
from kafkette.protocol.messages import CreateTopicsRequest, MetadataRequest
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.server import Broker, RequestContext
from kafkette.server.metrics.http import serve_metrics
from kafkette.server.net.listener import serve_tcp
from kafkette.server.sasl import SaslSettings
from tests.server.metrics.scrape import samples, value

pytestmark = pytest.mark.anyio

SETTINGS = SaslSettings.with_users(["PLAIN"], [("alice", "secret")])


async def get(port: int, request: bytes) -> bytes:
    """One HTTP exchange on a new connection (the request asks to close it)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request)
        received = b""
        with anyio.fail_after(10):
            while True:
                try:
                    received += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return received


def scrape_request(path: bytes = b"/metrics", method: bytes = b"GET") -> bytes:
    return method + b" " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


async def test_connections_and_authentications_per_listener() -> None:
    broker = Broker()
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve_tcp, sasl=SETTINGS, name="INTERNAL"), broker, "127.0.0.1", 0
        )
        metrics_port = await tg.start(serve_metrics, broker.metrics.scrape, "127.0.0.1", 0)
        good = SaslCredentials("PLAIN", "alice", "secret")
        async with await BrokerConnection.connect("127.0.0.1", port, sasl=good) as connection:
            await connection.request(MetadataRequest(topics=None))
            with pytest.raises(SaslAuthenticationFailedError):
                bad = SaslCredentials("PLAIN", "alice", "wrong")
                await BrokerConnection.connect("127.0.0.1", port, sasl=bad)
            with anyio.fail_after(10):  # the refused connection's task ends on its own
                while broker.metrics.connections.open.get("INTERNAL") != 1:
                    await anyio.sleep(0.01)
            answer = await get(metrics_port, scrape_request())
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"Content-Type: text/plain; version=0.0.4; charset=utf-8" in head
        scraped = samples(body.decode())
        assert value(scraped, "kafkette_connections", listener="INTERNAL") == 1
        assert value(scraped, "kafkette_connections_accepted_total", listener="INTERNAL") == 2
        assert value(scraped, "kafkette_authentication_successes_total", mechanism="PLAIN") == 1
        assert value(scraped, "kafkette_authentication_failures_total", mechanism="PLAIN") == 1
        assert value(scraped, "kafkette_requests_total", api="Metadata", version="12") == 1
        tg.cancel_scope.cancel()


async def test_other_paths_methods_and_garbage() -> None:
    broker = Broker()
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, broker.metrics.scrape, "127.0.0.1", 0)
        assert (await get(port, scrape_request(b"/nope"))).startswith(b"HTTP/1.1 404 Not Found")
        post = await get(port, scrape_request(method=b"POST"))
        assert post.startswith(b"HTTP/1.1 405 Method Not Allowed") and b"Allow: GET, HEAD" in post
        head = await get(port, scrape_request(method=b"HEAD"))
        assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
        assert (await get(port, b"\x00\x01garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
        # Two scrapes on one kept-alive connection.
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            for _ in range(2):
                await stream.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                received = b""
                with anyio.fail_after(10):
                    while b"kafkette_client_metrics_instances 0\n" not in received:
                        received += await stream.receive()
        tg.cancel_scope.cancel()


async def test_serve_refuses_a_metrics_address_in_use_before_serving() -> None:
    """kafkette serve's run() fails with one OSError naming the endpoint (main prints it and
    exits 1), not a task group's traceback, and serves nothing meanwhile."""
    from kafkette.cli.serve import run
    from kafkette.server import BrokerConfig

    taken = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with taken:
        port = taken.extra(anyio.abc.SocketAttribute.local_port)
        config = BrokerConfig(host="127.0.0.1", port=0)
        with pytest.raises(OSError, match=rf"metrics endpoint 127\.0\.0\.1:{port}: "):
            await run(config, metrics=("127.0.0.1", port))


async def test_a_large_scrape_lets_other_tasks_run() -> None:
    """Scraping 2,000 partitions yields to the loop between steps (it was one piece of work
    of half a second at 10,000 partitions); its text is the same as in one go."""
    broker = Broker()
    topics = [CreatableTopic(f"topic-{i}", 10, 1) for i in range(200)]
    await broker.handle(
        RequestContext(RequestHeader(19, 7, 1, "t")), CreateTopicsRequest(topics=topics)
    )
    turns = 0
    done = anyio.Event()

    async def other() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await anyio.sleep(0)
        before = turns
        text = await broker.metrics.scrape()
        during = turns - before
        done.set()
    assert during >= 1
    assert text == broker.metrics.text()
    assert text.count("kafkette_log_end_offset{") == 2000
