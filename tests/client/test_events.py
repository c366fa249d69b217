"""event_factory, call_soon_factory and clock_factory: the running backend's, asyncio and trio."""

from __future__ import annotations

import asyncio
import select
import selectors
import socket
import sys
from collections.abc import Callable

import anyio
import pytest

from kafkette.client.events import (
    FINE_WAIT_S,
    call_soon_factory,
    clock_factory,
    event_factory,
    fine_timer_loop,
    timers_fire_when_due,
)

pytestmark = pytest.mark.anyio


async def test_events_from_the_factory_are_anyio_events_of_this_loop() -> None:
    new_event = event_factory()
    event = new_event()
    assert isinstance(event, anyio.Event)
    assert type(event) is type(anyio.Event())
    assert not event.is_set()
    woken: list[str] = []

    async def waiter() -> None:
        await event.wait()
        woken.append("woken")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert woken == []
        event.set()
    assert woken == ["woken"]
    assert event.is_set()
    assert not new_event().is_set()  # each call, a new event


async def test_call_soon_runs_the_callback_after_the_current_step() -> None:
    order: list[str] = []
    call_soon = call_soon_factory()
    call_soon(lambda: order.append("soon"))
    order.append("now")
    assert order == ["now"]
    with anyio.fail_after(5):
        while order == ["now"]:
            await anyio.sleep(0)
    assert order == ["now", "soon"]


async def test_the_clock_is_the_one_anyio_reads() -> None:
    """The same clock as anyio.current_time (cancel scope deadlines are on it)."""
    clock = clock_factory()
    before = anyio.current_time()
    now = clock()
    after = anyio.current_time()
    assert before <= now <= after


async def test_timers_fire_on_whole_milliseconds_in_a_loop_not_made_fine() -> None:
    """Only a sync client's own loop (a FineTimerLoop) says its timers fire when due."""
    assert timers_fire_when_due() is False


def fine_timer_loop_here() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The FineTimerLoop's factory on Linux; elsewhere there is none (asyncio's default
    loop: kqueue's and IOCP's waits are not rounded to milliseconds), and None."""
    factory = fine_timer_loop()
    assert (factory is not None) == (sys.platform == "linux")
    return factory


class TestFineTimerLoop:
    def test_a_short_wait_is_a_select_to_the_microsecond(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Waits under FINE_WAIT_S go to select() with the exact timeout (epoll would round
        2.3 ms up to 3); longer ones, and polls, to epoll alone."""
        waits: list[float] = []
        real_select = select.select

        def spy(r: list[int], w: list[int], x: list[int], timeout: float) -> object:
            waits.append(timeout)
            return real_select(r, w, x, timeout)

        factory = fine_timer_loop_here()
        if factory is None:  # not Linux: asserted above that there is no such loop
            return
        loop = factory()
        try:
            selector = loop._selector  # type: ignore[attr-defined]
            monkeypatch.setattr(select, "select", spy)
            assert selector.select(0.0023) == []
            assert selector.select(0) == []
            assert selector.select(FINE_WAIT_S * 1.5) == []
            assert waits == [0.0023]
        finally:
            loop.close()

    def test_what_is_ready_during_a_short_wait_is_reported(self) -> None:
        factory = fine_timer_loop_here()
        if factory is None:  # not Linux: asserted above that there is no such loop
            return
        loop = factory()
        left, right = socket.socketpair()
        try:
            selector = loop._selector  # type: ignore[attr-defined]
            selector.register(left, selectors.EVENT_READ, "left")
            assert selector.select(0.001) == []
            right.send(b"x")
            ready = selector.select(0.04)
            assert [(key.data, events) for key, events in ready] == [("left", selectors.EVENT_READ)]
            selector.unregister(left)
        finally:
            left.close()
            right.close()
            loop.close()

    def test_call_later_runs_its_callback(self) -> None:
        factory = fine_timer_loop_here()
        if factory is None:  # not Linux: asserted above that there is no such loop
            return
        loop = factory()
        try:
            fired: list[float] = []
            start = loop.time()
            loop.call_later(0.0023, lambda: fired.append(loop.time()))
            loop.call_later(0.01, loop.stop)
            loop.run_forever()
            assert len(fired) == 1
            assert fired[0] - start >= 0.0023
        finally:
            loop.close()
