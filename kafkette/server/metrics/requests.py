"""Counters the request path updates: requests and their latency per API and version,
connections per listener, SASL authentications.

Each update is a dictionary lookup and a few integer additions on the broker's event
loop (the only thread that serves requests), so no lock is taken; the histogram's
bucket is found by bisection over :data:`LATENCY_BUCKETS_S`.
"""

from __future__ import annotations

from bisect import bisect_left

LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds) of the request latency histogram's buckets: a broker answers
most requests in well under a millisecond, long polls wait up to ``fetch.max.wait.ms``."""


class RequestStats:
    """Requests served per (API key, version): a count, the sum of their durations and a
    histogram of them. A request is observed once its handler has answered."""

    def __init__(self) -> None:
        self.by_api: dict[tuple[int, int], list[float]] = {}
        """(API key, version) -> [count, total seconds, count of bucket 0, ..., of +Inf]."""

    def observe(self, api_key: int, version: int, seconds: float) -> None:
        """Count one request that took ``seconds``."""
        stats = self.by_api.get((api_key, version))
        if stats is None:
            stats = self.by_api[(api_key, version)] = [0.0] * (len(LATENCY_BUCKETS_S) + 3)
        stats[0] += 1
        stats[1] += seconds
        stats[2 + bisect_left(LATENCY_BUCKETS_S, seconds)] += 1


class ConnectionStats:
    """Open and accepted connections per listener, SASL authentications per mechanism."""

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.accepted: dict[str, int] = {}
        self.authentication_failures: dict[str, int] = {}
        self.authentication_successes: dict[str, int] = {}

    def opened(self, listener: str) -> None:
        """A connection was accepted on ``listener``."""
        self.open[listener] = self.open.get(listener, 0) + 1
        self.accepted[listener] = self.accepted.get(listener, 0) + 1

    def closed(self, listener: str) -> None:
        """A connection of ``listener`` closed."""
        self.open[listener] = self.open.get(listener, 0) - 1

    def authenticated(self, mechanism: str | None, ok: bool) -> None:
        """A SASL authentication ended (``mechanism`` None: none was agreed)."""
        counts = self.authentication_successes if ok else self.authentication_failures
        key = mechanism or ""
        counts[key] = counts.get(key, 0) + 1
