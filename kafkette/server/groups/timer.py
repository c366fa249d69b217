"""The group coordinator's timer: runs its deadlines as they come due.

:func:`group_timer_loop` sleeps until the coordinator's next deadline, but
never longer than :data:`MAX_SLEEP_S` of real time, so that a deadline added
meanwhile, or an injected clock moved forward by a test, is seen promptly.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

logger = logging.getLogger("kafkette.server.groups")

MAX_SLEEP_S = 0.1


async def group_timer_loop(broker: Broker) -> None:
    """Call ``broker.groups.tick`` whenever a deadline is due, until cancelled."""
    groups = broker.groups
    while True:
        now = broker.now_ms()
        deadline = groups.next_deadline_ms()
        if deadline is not None and deadline <= now:
            try:
                groups.tick(now)
            except Exception:
                logger.exception("group coordinator timers failed")
                await anyio.sleep(MAX_SLEEP_S)
            continue
        wait_s = MAX_SLEEP_S if deadline is None else min(MAX_SLEEP_S, (deadline - now) / 1000)
        await anyio.sleep(max(wait_s, 0.001))
