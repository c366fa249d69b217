"""The stream reader's offset logic against a fake Kafka (no Spark): limits, delay, data loss."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kafkette.spark_integration.options import parse_reader_options
from kafkette.spark_integration.partition_reader import KafkaDataLossError, KafkaInputPartition
from kafkette.spark_integration.planning import OffsetRange
from kafkette.spark_integration.stream_reader import KafkaStreamReader
from kafkette.structs import TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)


class FakeKafka:
    def __init__(self) -> None:
        self.earliest_offsets: dict[TopicPartition, int] = {A0: 0, A1: 0}
        self.latest_offsets: dict[TopicPartition, int] = {A0: 0, A1: 0}
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []

    def partitions(self) -> set[TopicPartition]:
        return set(self.latest_offsets)

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.earliest_offsets[tp] for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.latest_offsets[tp] for tp in partitions}

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        raise NotImplementedError

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.commits.append((group, dict(offsets)))

    def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def reader(kafka: FakeKafka, clock: Clock | None = None, **options: str) -> KafkaStreamReader:
    parsed = parse_reader_options(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "a", **options}, streaming=True
    )
    return KafkaStreamReader(parsed, lookup=kafka, clock=clock)


def test_starts_at_latest_and_reads_everything_new_without_limits() -> None:
    kafka = FakeKafka()
    kafka.latest_offsets = {A0: 5, A1: 7}
    source = reader(kafka)
    start = source.initialOffset()
    assert start == {"a": {"0": 5, "1": 7}}
    assert source.getDefaultReadLimit() == ReadAllAvailable()
    kafka.latest_offsets = {A0: 9, A1: 7}
    end = source.latestOffset(start, source.getDefaultReadLimit())
    assert end == {"a": {"0": 9, "1": 7}}
    parts = source.partitions(start, end)
    assert [p.range for p in parts if isinstance(p, KafkaInputPartition)] == [OffsetRange(A0, 5, 9)]


def test_max_offsets_per_trigger_spreads_by_lag() -> None:
    kafka = FakeKafka()
    kafka.latest_offsets = {A0: 30, A1: 10}
    source = reader(kafka, startingOffsets="earliest", maxOffsetsPerTrigger="8")
    assert source.getDefaultReadLimit() == ReadMaxRows(8)
    start = source.initialOffset()
    first = source.latestOffset(start, ReadMaxRows(8))
    assert first == {"a": {"0": 6, "1": 2}}
    # the engine's ReadAllAvailable overrides the option
    assert source.latestOffset(first, ReadAllAvailable()) == {"a": {"0": 30, "1": 10}}


def test_available_now_stops_at_the_offsets_seen_when_it_started() -> None:
    kafka = FakeKafka()
    kafka.latest_offsets = {A0: 4, A1: 4}
    source = reader(kafka, startingOffsets="earliest", maxOffsetsPerTrigger="6")
    start = source.initialOffset()
    source.prepareForTriggerAvailableNow()
    kafka.latest_offsets = {A0: 100, A1: 100}
    first = source.latestOffset(start, ReadMaxRows(6))
    assert first == {"a": {"0": 3, "1": 3}}
    second = source.latestOffset(first, ReadMaxRows(6))
    assert second == {"a": {"0": 4, "1": 4}}
    assert source.latestOffset(second, ReadMaxRows(6)) == second


def test_min_offsets_per_trigger_waits_until_enough_or_the_delay() -> None:
    kafka = FakeKafka()
    clock = Clock()
    source = reader(kafka, clock, minOffsetsPerTrigger="10", maxTriggerDelay="5s")
    assert source.getDefaultReadLimit() == ReadMinRows(10)
    start = source.initialOffset()
    kafka.latest_offsets = {A0: 1, A1: 0}
    first = source.latestOffset(start, ReadMinRows(10))  # the first trigger never waits
    assert first == {"a": {"0": 1, "1": 0}}
    kafka.latest_offsets = {A0: 5, A1: 2}
    clock.now += 1000
    assert source.latestOffset(first, ReadMinRows(10)) == first
    kafka.latest_offsets = {A0: 8, A1: 3}
    clock.now += 1000
    assert source.latestOffset(first, ReadMinRows(10)) == {"a": {"0": 8, "1": 3}}
    kafka.latest_offsets = {A0: 9, A1: 3}
    clock.now += 4999
    assert source.latestOffset({"a": {"0": 8, "1": 3}}, ReadMinRows(10)) == {"a": {"0": 8, "1": 3}}
    clock.now += 1
    assert source.latestOffset({"a": {"0": 8, "1": 3}}, ReadMinRows(10)) == {"a": {"0": 9, "1": 3}}


def test_new_partitions_are_read_from_their_start() -> None:
    kafka = FakeKafka()
    kafka.latest_offsets = {A0: 3}
    source = reader(kafka)
    start = source.initialOffset()
    kafka.latest_offsets = {A0: 3, A1: 4}
    end = source.latestOffset(start, ReadAllAvailable())
    assert end == {"a": {"0": 3, "1": 4}}
    parts = source.partitions(start, end)
    assert [p.range for p in parts if isinstance(p, KafkaInputPartition)] == [OffsetRange(A1, 0, 4)]


def test_data_loss_fails_or_is_skipped() -> None:
    kafka = FakeKafka()
    kafka.latest_offsets = {A0: 3}
    kafka.earliest_offsets = {A0: 0, A1: 2}
    source = reader(kafka)
    start = source.initialOffset()
    kafka.latest_offsets = {A0: 3, A1: 4}
    with pytest.raises(KafkaDataLossError, match="Added partition a-1 starts from 2 instead of 0"):
        source.latestOffset(start, ReadAllAvailable())
    lenient = reader(kafka, failOnDataLoss="false")
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 3, "1": 4}}
    # a recreated topic: the end went below the start
    with pytest.raises(KafkaDataLossError, match="Partition a-0 offset was changed from 3 to 1"):
        source.partitions({"a": {"0": 3}}, {"a": {"0": 1}})
    assert lenient.partitions({"a": {"0": 3}}, {"a": {"0": 1}}) == []
    kafka.latest_offsets = {A1: 4}
    with pytest.raises(KafkaDataLossError, match=r"Partitions Set\(a-0\) have been deleted"):
        source.latestOffset({"a": {"0": 3, "1": 4}}, ReadAllAvailable())


def test_commit_goes_to_the_group_only_when_one_is_given() -> None:
    kafka = FakeKafka()
    reader(kafka).commit({"a": {"0": 3}})
    reader(kafka, groupIdPrefix="lag").commit({"a": {"0": 3}})
    reader(kafka, **{"kafka.group.id": "g"}).commit({"a": {"1": 4}})
    assert kafka.commits == [("lag", {A0: 3}), ("g", {A1: 4})]


def test_a_pickled_reader_carries_only_its_options() -> None:
    source = reader(FakeKafka(), maxOffsetsPerTrigger="3")
    copy = pickle.loads(pickle.dumps(source))
    assert copy.options == source.options
    assert copy._lookup is None
