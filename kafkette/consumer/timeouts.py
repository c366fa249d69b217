"""Timeouts in both spellings: seconds (``timeout``, confluent-kafka and the producer)
and milliseconds (``timeout_ms``, kafka-python).

A blocking consumer method takes ``timeout`` in seconds or ``timeout_ms`` as
keywords. Its first positional argument keeps kafka-python's meaning when it
is an ``int`` (``poll(100)``: 100 ms) and confluent-kafka's when it is a
``float`` (``poll(1.0)``: one second).
"""

from __future__ import annotations


def timeout_in_ms(
    positional: float | None, timeout: float | None, timeout_ms: float | None
) -> float | None:
    """The one timeout given, in milliseconds (None: none given)."""
    given = [v for v in (positional, timeout, timeout_ms) if v is not None]
    if len(given) > 1:
        raise TypeError("give one timeout: positional, timeout= (seconds) or timeout_ms=")
    if positional is not None:
        if isinstance(positional, bool):
            raise TypeError(f"a timeout is a number, not {positional!r}")
        return float(positional) if isinstance(positional, int) else positional * 1000.0
    if timeout is not None:
        return timeout * 1000.0
    return timeout_ms
