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
  metadata age); default :func:`monotonic_ms`.

This module imports nothing of kafkette, so every layer may use it.
"""

from __future__ import annotations

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
