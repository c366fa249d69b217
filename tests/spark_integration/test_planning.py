"""Offset planning: splitting ranges into tasks, rate limits, the trigger delay."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kafkette.spark_integration.planning import (
    OffsetRange,
    TriggerDelay,
    available,
    offset_ranges,
    rate_limit,
    split_ranges,
)
from kafkette.structs import TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)

partitions = st.builds(TopicPartition, st.sampled_from("abc"), st.integers(0, 3))
range_lists = st.dictionaries(
    partitions, st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), max_size=8
).map(lambda d: [OffsetRange(tp, s, s + n) for tp, (s, n) in sorted(d.items())])


def test_offset_ranges_pair_the_ends_of_the_partitions_at_both() -> None:
    assert offset_ranges({A0: 1, A1: 2}, {A1: 5, A0: 3, B0: 9}) == [
        OffsetRange(A0, 1, 3),
        OffsetRange(A1, 2, 5),
    ]


def test_one_task_per_partition_without_options_and_empty_ranges_dropped() -> None:
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(A1, 5, 5), OffsetRange(B0, 3, 4)]
    assert split_ranges(ranges) == [OffsetRange(A0, 0, 10), OffsetRange(B0, 3, 4)]


def test_min_partitions_splits_a_large_range_evenly() -> None:
    assert split_ranges([OffsetRange(A0, 0, 100)], min_partitions=4) == [
        OffsetRange(A0, 0, 25),
        OffsetRange(A0, 25, 50),
        OffsetRange(A0, 50, 75),
        OffsetRange(A0, 75, 100),
    ]


def test_min_partitions_leaves_small_ranges_whole_and_splits_the_skewed_one() -> None:
    ranges = [OffsetRange(A0, 0, 1), OffsetRange(A1, 0, 99)]
    assert split_ranges(ranges, min_partitions=4) == [
        OffsetRange(A0, 0, 1),
        OffsetRange(A1, 0, 33),
        OffsetRange(A1, 33, 66),
        OffsetRange(A1, 66, 99),
    ]


def test_min_partitions_below_the_partition_count_changes_nothing() -> None:
    ranges = [OffsetRange(A0, 0, 50), OffsetRange(A1, 0, 50)]
    assert split_ranges(ranges, min_partitions=2) == ranges


def test_max_records_per_partition_cuts_ranges_no_larger_than_it() -> None:
    assert split_ranges([OffsetRange(A0, 10, 20), OffsetRange(B0, 0, 3)], None, 4) == [
        OffsetRange(A0, 10, 13),
        OffsetRange(A0, 13, 16),
        OffsetRange(A0, 16, 20),
        OffsetRange(B0, 0, 3),
    ]


@given(range_lists, st.none() | st.integers(1, 20), st.none() | st.integers(1, 5000))
def test_splitting_covers_every_offset_exactly_once(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> None:
    parts = split_ranges(ranges, min_partitions, max_records)
    assert all(p.size > 0 for p in parts)
    if max_records is not None:
        assert all(p.size <= max_records for p in parts)
    for r in ranges:
        mine = [p for p in parts if p.tp == r.tp]
        if r.size == 0:
            assert mine == []
            continue
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(x.end == y.start for x, y in itertools.pairwise(mine))
    non_empty = [r for r in ranges if r.size > 0]
    if min_partitions is not None and max_records is None:
        # about min_partitions tasks: rounding may make a few more or fewer
        assert len(parts) <= max(min_partitions, len(non_empty)) * 2
        if sum(r.size for r in non_empty) >= 4 * min_partitions:
            assert len(parts) >= min(min_partitions, len(non_empty))


def test_rate_limit_spreads_the_limit_by_lag() -> None:
    start = {A0: 0, A1: 100, B0: 7}
    latest = {A0: 80, A1: 120, B0: 7}
    assert rate_limit(10, start, latest) == {A0: 8, A1: 102, B0: 7}


def test_rate_limit_gives_a_starved_partition_one_offset() -> None:
    assert rate_limit(10, {A0: 0, A1: 0}, {A0: 1000, A1: 1}) == {A0: 9, A1: 1}


def test_rate_limit_with_nothing_new_returns_latest() -> None:
    assert rate_limit(5, {A0: 3}, {A0: 3, A1: 9}) == {A0: 3, A1: 9}


@given(
    st.dictionaries(partitions, st.tuples(st.integers(0, 10**9), st.integers(0, 10**6))),
    st.integers(1, 10**7),
)
def test_rate_limit_stays_between_start_and_latest_and_near_the_limit(
    spans: dict[TopicPartition, tuple[int, int]], limit: int
) -> None:
    start = {tp: s for tp, (s, _) in spans.items()}
    latest = {tp: s + lag for tp, (s, lag) in spans.items()}
    ends = rate_limit(limit, start, latest)
    assert set(ends) == set(latest)
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in ends)
    taken = sum(ends[tp] - start[tp] for tp in ends)
    assert taken <= limit + len(spans)
    if limit >= available(start, latest):
        assert ends == latest


def test_trigger_delay_waits_for_min_offsets_until_the_delay_passes() -> None:
    delay = TriggerDelay(min_offsets=10, max_delay_ms=1000)
    assert not delay.should_wait(0, now_ms=5000)  # the first batch never waits
    assert delay.should_wait(3, now_ms=5100)
    assert delay.should_wait(9, now_ms=5999)
    assert not delay.should_wait(10, now_ms=6000 - 1)
    assert delay.should_wait(2, now_ms=6500)
    assert not delay.should_wait(2, now_ms=7000)  # the delay passed: run with what there is


def test_available_counts_new_partitions_from_zero() -> None:
    assert available({A0: 5}, {A0: 8, A1: 4}) == 7
