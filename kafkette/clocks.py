"""The clocks, in one place: which kind of time each part keeps, and in what unit.

Everything that keeps time takes its clock as an argument (a plain callable
returning milliseconds), so that tests inject a
:class:`~kafkette.testing.ManualClock` or a fake instead of sleeping:

- :data:`WallClockMs` - milliseconds since the Unix epoch, as a float: the
  broker's time (session and transaction timeouts, retention, timestamps it
  assigns); default :func:`wall_ms`.
- :data:`LogClockMs` - the same wall time in whole milliseconds: the partition
  logs' (segment roll and retention, the time index); default :func:`wall_ms_int`.
- :data:`MonotonicClockMs` - milliseconds from an arbitrary origin that never
  goes back: the clients' (linger, backoff, request and delivery timeouts,
  metadata age); default :func:`monotonic_ms`. The async clients keep the
  running event loop's clock instead (:func:`loop_clock_ms`), so that a fake
  loop clock (trio's ``MockClock``) moves their timers as it moves their sleeps.

This module imports nothing of kafkette, so every layer may use it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

WallClockMs = Callable[[], float]
"""Milliseconds since the Unix epoch."""

LogClockMs = Callable[[], int]
"""Whole milliseconds since the Unix epoch."""

MonotonicClockMs = Callable[[], float]
"""Milliseconds from an arbitrary origin; only differences mean something."""


def wall_ms() -> float:
    """The system clock in milliseconds since the epoch."""
    return time.time() * 1000.0


def wall_ms_int() -> int:
    """The system clock in whole milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> float:
    """The monotonic clock in milliseconds."""
    return time.monotonic() * 1000.0


def loop_clock_ms() -> MonotonicClockMs:
    """The running event loop's clock in milliseconds (the clock its sleeps and
    timeouts keep), or :func:`monotonic_ms` when no loop runs in this thread.

    Call it in the event loop. The clock it returns may be read from any thread:
    asyncio's ``loop.time`` is ``time.monotonic``, and trio's clock object
    (real or ``MockClock``) is read directly rather than through the run context.
    """
    loop_time: Callable[[], float] | None
    try:
        loop_time = asyncio.get_running_loop().time
    except RuntimeError:
        loop_time = _trio_time()
    if loop_time is None:
        return monotonic_ms
    read = loop_time
    return lambda: read() * 1000.0


class LoopWallClock:
    """Wall time (milliseconds since the epoch, a :data:`WallClockMs`) that moves with an
    event loop's clock: the broker's clock of an in-process cluster served on a test's
    loop, so that a fake loop clock (trio's ``MockClock``) moves broker timers too.

    Until :meth:`start` it stands at the wall time it was made; from :meth:`start`
    (called in the loop) it is that start's wall time plus the loop time since.
    """

    def __init__(self) -> None:
        self._origin_ms = float(wall_ms_int())  # whole: deadlines stay whole too
        self._loop_ms: MonotonicClockMs | None = None
        self._loop_origin_ms = 0.0

    def start(self) -> None:
        """Follow the running event loop's clock from now on (call it in the loop)."""
        loop_ms = loop_clock_ms()
        self._origin_ms = float(wall_ms_int())
        self._loop_origin_ms = loop_ms()
        self._loop_ms = loop_ms

    def __call__(self) -> float:
        if self._loop_ms is None:
            return self._origin_ms
        return self._origin_ms + (self._loop_ms() - self._loop_origin_ms)


def _trio_time() -> Callable[[], float] | None:
    trio = sys.modules.get("trio")  # not imported: not running either
    if trio is None:
        return None
    try:
        current_time: Callable[[], float] = trio.lowlevel.current_clock().current_time
        return current_time
    except RuntimeError:  # not in trio either
        return None
