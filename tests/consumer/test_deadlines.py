"""Every blocking consumer call returns within its timeout, with no broker to answer.

The address is a closed loopback port: each connection attempt is refused at once,
and the client retries with backoff. A call must give up at its own timeout, not
after the client's inner retry budgets (``request.timeout.ms``, 30 s: a group's
``poll`` took that long, every call). ``poll`` returns ``{}`` and leaves the group's
work to go on in the background; the other calls raise
:class:`~kafkette.errors.KafkaTimeoutError`.

Real time (the retries wait on sockets and backoff): the bounds leave room for a
loaded two-core machine, and stay far below the 30 s the calls took.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from kafkette import AsyncConsumer, Consumer, TopicPartition
from kafkette.errors import KafkaTimeoutError

POLL_S = 2.0
CALL_S = 0.5
MARGIN_S = 2.0
"""How late a call may return: thread hand-offs and scheduling on a loaded machine."""

TP = TopicPartition("t", 0)


@pytest.fixture
def nowhere() -> Iterator[str]:
    """A loopback address where nothing listens (a port just released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"127.0.0.1:{port}"


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


async def atimed(call: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    started = time.monotonic()
    result = await call()
    return result, time.monotonic() - started


def settings(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "group_id": "g"}


def test_poll_of_a_group_member_returns_at_its_timeout(nowhere: str) -> None:
    with Consumer(**settings(nowhere)) as consumer:
        consumer.subscribe(["t"])
        polls = [
            lambda: consumer.poll(POLL_S),
            lambda: consumer.poll(timeout=POLL_S),
            lambda: consumer.poll(timeout_ms=int(POLL_S * 1000)),
        ]
        for poll in polls:
            records, took = timed(poll)
            assert records == {}
            assert POLL_S - 0.05 <= took < POLL_S + MARGIN_S, f"poll took {took:.2f} s"
        assert consumer.assignment() == set()
        _, took = timed(lambda: consumer.close(timeout=CALL_S))
        assert took < CALL_S + MARGIN_S, f"close took {took:.2f} s"


def test_calls_with_a_timeout_raise_at_it(nowhere: str) -> None:
    with Consumer(**settings(nowhere)) as consumer:
        consumer.assign([TP])
        calls: dict[str, Callable[[], Any]] = {
            "commit": lambda: consumer.commit({TP: 5}, timeout=CALL_S),
            "committed": lambda: consumer.committed([TP], timeout=CALL_S),
            "position": lambda: consumer.position(TP, timeout=CALL_S),
            "end_offsets": lambda: consumer.end_offsets([TP], timeout_ms=CALL_S * 1000),
            "offsets_for_times": lambda: consumer.offsets_for_times({TP: 0}, timeout=CALL_S),
        }
        for name, call in calls.items():
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="did not complete within 500 ms"):
                call()
            took = time.monotonic() - started
            assert took < CALL_S + MARGIN_S, f"{name} took {took:.2f} s"


@pytest.mark.anyio
async def test_async_poll_of_a_group_member_returns_at_its_timeout(nowhere: str) -> None:
    """With a pattern, too: it is matched against metadata that never comes."""
    async with AsyncConsumer(**settings(nowhere)) as consumer:
        consumer.subscribe("^t$")
        polls = [
            lambda: consumer.poll(POLL_S),
            lambda: consumer.poll(timeout=POLL_S),
            lambda: consumer.poll(timeout_ms=int(POLL_S * 1000)),
        ]
        for poll in polls:
            records, took = await atimed(poll)
            assert records == {}
            assert POLL_S - 0.05 <= took < POLL_S + MARGIN_S, f"poll took {took:.2f} s"
        _, took = await atimed(lambda: consumer.close(timeout=CALL_S))
        assert took < CALL_S + MARGIN_S, f"close took {took:.2f} s"


@pytest.mark.anyio
async def test_async_calls_with_a_timeout_raise_at_it(nowhere: str) -> None:
    async with AsyncConsumer(**settings(nowhere)) as consumer:
        consumer.assign([TP])
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "commit": lambda: consumer.commit({TP: 5}, timeout=CALL_S),
            "committed": lambda: consumer.committed([TP], timeout=CALL_S),
            "position": lambda: consumer.position(TP, timeout=CALL_S),
            "end_offsets": lambda: consumer.end_offsets([TP], timeout_ms=CALL_S * 1000),
            "offsets_for_times": lambda: consumer.offsets_for_times({TP: 0}, timeout=CALL_S),
        }
        for name, call in calls.items():
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="did not complete within 500 ms"):
                await call()
            took = time.monotonic() - started
            assert took < CALL_S + MARGIN_S, f"{name} took {took:.2f} s"
