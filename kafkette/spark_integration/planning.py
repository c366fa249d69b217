"""Offset planning, pure: offset ranges, splitting them into Spark tasks, rate limits.

No I/O here: the reader resolves offsets with Kafka and hands the numbers to
these functions, which decide what each Spark task reads and how far a
micro-batch goes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs

from kafkette.structs import TopicPartition

LONG_MAX = 2**63 - 1


@attrs.frozen
class OffsetRange:
    """Offsets ``[start, end)`` of one Kafka partition: what one Spark task reads."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range (records may be fewer: compaction, transaction markers)."""
        return self.end - self.start


def offset_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition present at both ends, sorted by partition."""
    return [OffsetRange(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start]


def split_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The Spark tasks for ``ranges``: empty ranges dropped, then split as Spark's
    connector does.

    With ``min_partitions`` above the number of non-empty ranges, the large
    ranges are split so that there are about ``min_partitions`` tasks, each
    range's share proportional to its size (a range whose share rounds to one
    task stays whole, and is left out of the proportion). Then any range larger
    than ``max_records_per_partition`` is cut into equal parts no larger than it.
    """
    kept = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(kept) < min_partitions:
        kept = _split_for_min_partitions(kept, min_partitions)
    if max_records_per_partition is not None:
        kept = [
            part for r in kept for part in _cut(r, math.ceil(r.size / max_records_per_partition))
        ]
    return kept


def _split_for_min_partitions(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    total = sum(r.size for r in ranges)

    def parts(size: int, of_total: int, target: int) -> int:
        return max(round_half_up(size / of_total * target), 1)

    whole = [r for r in ranges if parts(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in whole)
    split_target = max(min_partitions - len(whole), 1)
    result: list[OffsetRange] = []
    for r in ranges:
        count = 1 if r in whole else parts(r.size, split_total, split_target)
        result.extend(_cut(r, count))
    return result


def round_half_up(value: float) -> int:
    """Java's ``Math.round``: halves go up (Python's ``round`` goes to even)."""
    return math.floor(value + 0.5)


def _cut(r: OffsetRange, count: int) -> list[OffsetRange]:
    """``r`` in ``count`` consecutive parts, sizes differing by at most one, the
    larger ones last; empty parts dropped."""
    result = []
    remaining = r.size
    at = r.start
    for index in range(count):
        size = remaining // (count - index)
        remaining -= size
        if size > 0:
            result.append(OffsetRange(r.tp, at, at + size))
        at += size
    return result


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """End offsets reading at most about ``limit`` offsets past ``start``, spread over
    the partitions in proportion to their lag, as Spark's ``maxOffsetsPerTrigger``.

    A partition whose share is below one offset still gets one (so small
    partitions are not starved); shares above one are rounded down. Partitions
    in ``latest`` but not in ``start`` are left at their latest offset (the
    caller puts new partitions in ``start`` at their earliest offset).
    """
    lags = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end > start[tp]}
    total = sum(lags.values())
    if total < 1:
        return dict(latest)
    result = {}
    for tp, end in latest.items():
        lag = lags.get(tp)
        if lag is None:
            result[tp] = end
            continue
        share = limit * (lag / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, start[tp] + step) if step <= LONG_MAX - start[tp] else end
    return result


def available(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Offsets between ``start`` and ``latest`` (partitions new in ``latest`` count from 0)."""
    return sum(max(end - start.get(tp, 0), 0) for tp, end in latest.items())


class TriggerDelay:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``: whether to wait for more data.

    A micro-batch runs once at least ``min_offsets`` offsets are available, or
    once ``max_delay_ms`` has passed since the last batch ran (Spark's
    connector counts the first batch's delay from 0, so it never waits).
    Driven by :meth:`should_wait` with the time, so tests pass their own clock.
    """

    def __init__(self, min_offsets: int, max_delay_ms: int) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self.last_trigger_ms = 0.0

    def should_wait(self, available_offsets: int, now_ms: float) -> bool:
        """True to skip this trigger; False to run a batch (the delay restarts)."""
        if now_ms - self.last_trigger_ms < self.max_delay_ms and (
            available_offsets < self.min_offsets
        ):
            return True
        self.last_trigger_ms = now_ms
        return False
