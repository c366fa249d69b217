"""event_factory, call_soon_factory and clock_factory: the running backend's, asyncio and trio."""

from __future__ import annotations

import anyio
import pytest

from kafkette.client.events import call_soon_factory, clock_factory, event_factory

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
