"""Our client connection re-authenticates (KIP-368), against an in-process SASL listener
over loopback, on asyncio and trio.

The client's clock is a test clock, moved past the re-authentication point; the
broker keeps real time (its session lasts a minute, so it never expires here).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
import attrs
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.client.security.sasl import REAUTH_WINDOW, ReauthSchedule, SaslCredentials
from kafkette.errors import KafkaConnectionError
from kafkette.protocol.messages import MetadataRequest, MetadataResponse
from kafkette.protocol.schema import Response
from kafkette.server import Broker
from kafkette.server.net.listener import serve_tcp
from kafkette.server.sasl import SaslSettings

pytestmark = pytest.mark.anyio

LIFETIME_MS = 60_000


def test_the_schedule_is_85_to_95_percent_of_the_lifetime() -> None:
    assert REAUTH_WINDOW == (0.85, 0.95)
    for draw, expected in [(0.0, 1000 + 8500), (1.0, 1000 + 9500), (0.5, 1000 + 9000)]:
        schedule = ReauthSchedule(rng=lambda draw=draw: draw)
        schedule.started(1000.0, 10_000)
        assert schedule.due_ms == pytest.approx(expected)
        assert not schedule.due(expected - 1) and schedule.due(expected)
    schedule = ReauthSchedule()
    schedule.started(1000.0, 0)
    assert schedule.due_ms is None and not schedule.due(1e18)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, SaslSettings]]:
    settings = SaslSettings.with_users(["PLAIN", "SCRAM-SHA-512"], [("alice", "secret")])
    settings = attrs.evolve(
        settings, connections_max_reauth_ms={"PLAIN": LIFETIME_MS, "SCRAM-SHA-512": LIFETIME_MS}
    )
    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda **kw: serve_tcp(Broker(), "127.0.0.1", 0, sasl=settings, **kw))
        yield port, settings
        tg.cancel_scope.cancel()


async def connect(port: int, clock: Clock, mechanism: str = "PLAIN") -> BrokerConnection:
    return await BrokerConnection.connect(
        "127.0.0.1", port, sasl=SaslCredentials(mechanism, "alice", "secret"), clock=clock
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_requests_wait_for_a_reauthentication_then_go_in_order(
    listener: tuple[int, SaslSettings], mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kafkette.server.net.listener")
    clock = Clock()
    connection = await connect(listener[0], clock, mechanism)
    answers: list[tuple[int, Response | None, BaseException | None]] = []
    try:
        assert isinstance(await connection.request(MetadataRequest(topics=[])), MetadataResponse)
        assert connection.reauthentications == 0
        clock.now = LIFETIME_MS * 0.95  # due whatever the draw
        async with anyio.create_task_group() as tg:
            connection.start_pump(tg)  # submit needs it off asyncio
            for tag in range(5):
                connection.submit(
                    MetadataRequest(topics=[]),
                    lambda response, error, tag=tag: answers.append((tag, response, error)),
                )
            # A request made meanwhile waits for the re-authentication too.
            assert isinstance(
                await connection.request(MetadataRequest(topics=[])), MetadataResponse
            )
            with anyio.fail_after(10):
                while len(answers) < 5:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert [tag for tag, _, _ in answers] == [0, 1, 2, 3, 4]
        assert all(isinstance(r, MetadataResponse) and e is None for _, r, e in answers)
        assert connection.reauthentications == 1
        assert not connection.closed
        # Not due again before 85% of the new session.
        assert isinstance(await connection.request(MetadataRequest(topics=[])), MetadataResponse)
        assert connection.reauthentications == 1
    finally:
        await connection.aclose()
    lines = [r.getMessage() for r in caplog.records if "re-authenticated" in r.getMessage()]
    assert len(lines) == 1
    assert f"re-authenticated as User:alice with {mechanism}" in lines[0]
    assert "(re-authentication 1 on this connection, session 60000 ms)" in lines[0]


async def test_a_failed_reauthentication_closes_the_connection(
    listener: tuple[int, SaslSettings],
) -> None:
    port, settings = listener
    clock = Clock()
    connection = await connect(port, clock, "SCRAM-SHA-512")
    answers: list[BaseException | None] = []
    try:
        assert settings.store.remove_scram_credential("SCRAM-SHA-512", "alice")
        clock.now = LIFETIME_MS
        async with anyio.create_task_group() as tg:
            connection.start_pump(tg)
            connection.submit(MetadataRequest(topics=[]), lambda _r, error: answers.append(error))
            with pytest.raises(KafkaConnectionError) as info:
                await connection.request(MetadataRequest(topics=[]))
            tg.cancel_scope.cancel()
        assert connection.closed
        assert len(answers) == 1 and isinstance(answers[0], KafkaConnectionError)
        assert "re-authentication with" in str(info.value.__cause__)
    finally:
        await connection.aclose()


async def test_a_request_alone_reauthenticates(listener: tuple[int, SaslSettings]) -> None:
    """Without submitted requests (no pump off asyncio), the exchange goes as requests do."""
    clock = Clock()
    connection = await connect(listener[0], clock, "SCRAM-SHA-512")
    try:
        for round_ in range(1, 3):
            clock.now += LIFETIME_MS
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(connection.request, MetadataRequest(topics=[]))
            assert connection.reauthentications == round_
            if round_ == 1:
                await anyio.sleep(1.05)  # the broker takes one re-authentication a second
    finally:
        await connection.aclose()
