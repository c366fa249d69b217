"""The coordinators' timer: runs the group and transaction coordinators' deadlines as
they come due.

:func:`group_timer_loop` sleeps until the next deadline of any
coordinator, but never longer than :data:`MAX_SLEEP_S` of real time, so that
a deadline added meanwhile, or an injected clock moved forward by a test, is
seen promptly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio

logger = logging.getLogger("kafkette.server.groups")

MAX_SLEEP_S = 0.1


class Timed(Protocol):
    """A coordinator with deadlines."""

    def next_deadline_ms(self) -> int | None: ...

    def tick(self, now_ms: int | None = None) -> None: ...


async def group_timer_loop(
    coordinators: Sequence[tuple[str, Timed]], clock: Callable[[], int]
) -> None:
    """Call the ``tick`` of each (name, coordinator) whenever a deadline of its is due
    by ``clock`` (ms), until cancelled; the name is for the log line of a failed tick."""
    while True:
        now = clock()
        deadlines = [(name, c, c.next_deadline_ms()) for name, c in coordinators]
        due = [(name, c) for name, c, d in deadlines if d is not None and d <= now]
        failed = False
        for name, coordinator in due:
            try:
                coordinator.tick(now)
            except Exception:
                logger.exception("%s coordinator timers failed", name)
                failed = True
        if failed:
            await anyio.sleep(MAX_SLEEP_S)
        if due:
            continue
        pending = [d for _, _, d in deadlines if d is not None]
        wait_s = MAX_SLEEP_S if not pending else min(MAX_SLEEP_S, (min(pending) - now) / 1000)
        await anyio.sleep(max(wait_s, 0.001))
