"""A clock that moves only when a test says so."""

from __future__ import annotations

import threading

DEFAULT_START_MS = 1_700_000_000_000
"""2023-11-14T22:13:20Z: any fixed instant will do."""


class ManualClock:
    """Milliseconds since the epoch, advanced by :meth:`advance` (thread-safe).

    Pass it as a broker's clock (``memory_cluster(name, clock=clock)``) to
    expire consumer-group sessions, rebalance timeouts and retention without
    sleeping.
    """

    def __init__(self, start_ms: int = DEFAULT_START_MS) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return float(self._now)

    @property
    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        """Move the clock ``ms`` milliseconds forward; returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock only moves forward, got {ms} ms")
        with self._lock:
            self._now += ms
            return self._now
