"""The coordinators' timer: runs the group and transaction coordinators' deadlines as
they come due.

:func:`group_timer_loop` sleeps until the next deadline of any
coordinator, but never longer than :data:`MAX_SLEEP_S` of real time, so that
a deadline added meanwhile, or an injected clock moved forward by a test, is
seen promptly.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.groups")

MAX_SLEEP_S = 0.1


class Timed(Protocol):
    """A coordinator with deadlines."""

    def next_deadline_ms(self) -> int | None: ...

    def tick(self, now_ms: int | None = None) -> None: ...


async def group_timer_loop(broker: Broker) -> None:
    """Call the ``tick`` of ``broker.groups``, ``broker.consumer_groups`` and
    ``broker.transactions`` whenever a deadline of theirs is due, until cancelled.

    A broker serving its data directory read-only has no timers: what they do
    (expiring members, offsets and transactions) writes to the logs."""
    if broker.config.read_only:
        return
    coordinators: tuple[tuple[str, Timed], ...] = (
        ("group", broker.groups),
        ("consumer group", broker.consumer_groups),
        ("transaction", broker.transactions),
    )
    while True:
        now = broker.now_ms()
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
