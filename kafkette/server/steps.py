"""Work too large to do in one go on the event loop, done in steps.

A request may ask for work that is large by design (opening or deleting
thousands of partition logs). :func:`run_in_steps` runs such
work one step at a time and lets the event loop serve other connections
whenever a step budget has passed, so one request never stalls the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

import anyio

STEP_BUDGET_S = 0.005
"""How long work may hold the event loop before other tasks get a turn."""


async def run_in_steps(
    steps: Generator[None, None, None],
    *,
    budget_s: float = STEP_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run ``steps`` to its end, yielding to other tasks every ``budget_s`` seconds.

    If the caller is cancelled (its connection closed, the broker stopping),
    ``steps`` is closed, so that its own clean-up runs.
    """
    try:
        since = clock()
        for _ in steps:
            if clock() - since >= budget_s:
                await anyio.sleep(0)
                since = clock()
    finally:
        steps.close()
