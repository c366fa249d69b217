"""Polling helpers for the consumer tests."""

from __future__ import annotations

import time

from kafkette import AsyncConsumer, Consumer, ConsumerRecord

DEADLINE_S = 15.0


async def apoll_n(consumer: AsyncConsumer, n: int, **kwargs: int) -> list[ConsumerRecord]:
    """Poll until ``n`` records came (fails after DEADLINE_S); in poll order."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < n:
        assert time.monotonic() < deadline, f"got {len(got)} of {n} records"
        for records in (await consumer.poll(timeout_ms=200, **kwargs)).values():
            got += records
    return got


def poll_n(consumer: Consumer, n: int, **kwargs: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < n:
        assert time.monotonic() < deadline, f"got {len(got)} of {n} records"
        for records in consumer.poll(timeout_ms=200, **kwargs).values():
            got += records
    return got


def offsets(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]
