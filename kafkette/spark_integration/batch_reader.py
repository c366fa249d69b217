"""The batch reader: offsets resolved on the driver, one task per (split) partition range."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafkette.spark_integration.options import ReaderOptions
from kafkette.spark_integration.partition_reader import KafkaInputPartition, read_partition
from kafkette.spark_integration.planning import OffsetRange, offset_ranges, split_ranges
from kafkette.spark_integration.resolve import KafkaLookup, resolve_limit


def check_resolved(ranges: Sequence[OffsetRange]) -> None:
    """Spark's RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET."""
    for r in ranges:
        if r.start > r.end:
            raise ValueError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset "
                f"{r.start} is greater than the resolved end offset {r.end} for topic "
                f"{r.tp.topic} partition {r.tp.partition}. There may be multiple reasons: "
                "1. Start offset is set to too big a value that after resolution, end offset "
                "is smaller than it. 2. The Kafka topic partition is broken."
            )


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("kafkette")``: the records between the starting and ending limits."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        lookup = KafkaLookup(self.options)
        try:
            tps = lookup.partitions()
            start = resolve_limit(self.options.starting, tps, lookup, is_start=True)
            end = resolve_limit(self.options.ending, tps, lookup, is_start=False)
        finally:
            lookup.close()
        ranges = offset_ranges(start, end)
        check_resolved(ranges)
        split = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [KafkaInputPartition(r) for r in split]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, partition)
