"""event_factory makes working anyio events of the running backend, on asyncio and trio."""

from __future__ import annotations

import anyio
import pytest

from kafkette.client.events import event_factory

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
