"""group_timer_loop from its two collaborators, no Broker: coordinators with deadlines
(here fakes recording their ticks) and a ManualClock."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import pytest

from kafkette.server.groups.timer import group_timer_loop
from kafkette.testing import ManualClock

pytestmark = pytest.mark.anyio


class Deadlines:
    """A coordinator whose deadlines are a list; each tick consumes those due."""

    def __init__(self, *deadlines: int, fail: bool = False) -> None:
        self.deadlines = sorted(deadlines)
        self.ticks: list[int] = []
        self.fail = fail

    def next_deadline_ms(self) -> int | None:
        return self.deadlines[0] if self.deadlines else None

    def tick(self, now_ms: int | None = None) -> None:
        assert now_ms is not None
        self.ticks.append(now_ms)
        self.deadlines = [d for d in self.deadlines if d > now_ms]
        if self.fail:
            raise OSError("disk full")


async def until(condition: Callable[[], object]) -> None:
    """Wait (at most 5 s) for the loop to have done what ``condition`` checks."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.01)


async def test_each_coordinator_ticks_when_its_deadline_comes_on_the_clock() -> None:
    """Nothing ticks before its deadline; each tick gets the clock's time; a coordinator
    with nothing due is left alone."""
    clock = ManualClock()
    start = clock.now_ms
    first = Deadlines(start + 100, start + 300)
    second = Deadlines(start + 200)
    idle = Deadlines()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            group_timer_loop,
            [("first", first), ("second", second), ("idle", idle)],
            lambda: clock.now_ms,
        )
        await anyio.wait_all_tasks_blocked()
        assert (first.ticks, second.ticks) == ([], [])
        clock.advance(150)
        await until(lambda: first.ticks)
        assert (first.ticks, second.ticks) == ([start + 150], [])
        clock.advance(200)
        await until(lambda: len(first.ticks) == 2 and second.ticks)
        tg.cancel_scope.cancel()
    assert first.ticks == [start + 150, start + 350]
    assert second.ticks == [start + 350]
    assert idle.ticks == []


async def test_a_failing_tick_is_logged_by_name_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A coordinator whose tick raises is named in the log; the loop keeps running the
    others' deadlines."""
    clock = ManualClock()
    start = clock.now_ms
    broken = Deadlines(start + 10, fail=True)
    fine = Deadlines(start + 10, start + 1_000)
    with caplog.at_level(logging.ERROR, "kafkette.server.groups"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                group_timer_loop, [("broken", broken), ("fine", fine)], lambda: clock.now_ms
            )
            clock.advance(10)
            await until(lambda: fine.ticks)
            clock.advance(990)
            await until(lambda: len(fine.ticks) == 2)
            tg.cancel_scope.cancel()
    assert broken.ticks == [start + 10]
    assert fine.ticks == [start + 10, start + 1_000]
    assert [r.getMessage() for r in caplog.records] == ["broken coordinator timers failed"]
