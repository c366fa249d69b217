"""Exponential backoff with jitter, as Kafka's clients compute it.

The n-th retry waits ``base * 2**n`` milliseconds, capped at ``maximum``, and
spread by +/-20% jitter so that many clients retrying at once do not retry
in lockstep (KIP-580).
"""

from __future__ import annotations

import random

JITTER = 0.2


def backoff_ms(attempt: int, base_ms: int, max_ms: int, rng: random.Random | None = None) -> float:
    """The wait before retry number ``attempt`` (0 for the first retry)."""
    if base_ms <= 0:
        return 0.0
    ceiling = max(max_ms, base_ms)
    exp = min(base_ms * (2 ** min(attempt, 32)), ceiling)
    jitter = (rng or random).uniform(1 - JITTER, 1 + JITTER)
    return float(min(exp * jitter, ceiling * (1 + JITTER)))
