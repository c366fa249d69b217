"""The streaming reader: micro-batches of offsets, Spark's Kafka source's rules.

Offsets are Spark's offset JSON (``{"topic": {"0": 23}}``). The driver keeps
one long-lived reader (it holds the admin client and the trigger delay's
clock); Spark pickles it for ``read`` in executors, where only the options
travel (:meth:`KafkaStreamReader.__getstate__`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kafkette.spark_integration.options import ReaderOptions, offsets_from_json, offsets_json
from kafkette.spark_integration.partition_reader import (
    KafkaInputPartition,
    data_loss,
    read_partition,
)
from kafkette.spark_integration.planning import (
    OffsetRange,
    TriggerDelay,
    available,
    rate_limit,
    split_ranges,
)
from kafkette.spark_integration.resolve import KafkaLookup, OffsetLookup, resolve_limit
from kafkette.structs import TopicPartition

Offsets = dict[TopicPartition, int]


class CommittingLookup(OffsetLookup, Protocol):
    """An offset lookup that can also commit a group's offsets and be closed."""

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None: ...

    def close(self) -> None: ...


def _set(partitions: Iterator[TopicPartition] | set[TopicPartition]) -> str:
    return "Set(" + ", ".join(str(tp) for tp in sorted(partitions)) + ")"


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafkette")``.

    ``lookup`` and ``clock`` (milliseconds) are for tests; by default a
    :class:`~kafkette.spark_integration.resolve.KafkaLookup` is opened on
    first use and the clock is the wall clock.
    """

    def __init__(
        self,
        options: ReaderOptions,
        *,
        lookup: CommittingLookup | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.options = options
        self._lookup = lookup
        self._clock = clock or (lambda: time.time() * 1000)
        self._delay: TriggerDelay | None = None
        if options.min_offsets_per_trigger is not None:
            self._delay = TriggerDelay(
                options.min_offsets_per_trigger, options.max_trigger_delay_ms
            )
        self._available_now: Offsets | None = None

    # ---- pickling: executors get the options only

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    @property
    def lookup(self) -> CommittingLookup:
        if self._lookup is None:
            self._lookup = KafkaLookup(self.options)
        return self._lookup

    # ---- offsets

    def initialOffset(self) -> dict[str, Any]:
        partitions = self.lookup.partitions()
        return offsets_json(
            resolve_limit(self.options.starting, partitions, self.lookup, is_start=True)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.lookup.latest(self.lookup.partitions())

    def _latest(self) -> Offsets:
        if self._available_now is not None:
            return dict(self._available_now)
        return self.lookup.latest(self.lookup.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._latest()
        begin.update(self._new_partitions(begin, latest))
        gone = set(begin) - set(latest)
        if gone:
            data_loss(f"Partitions {_set(gone)} have been deleted.", self.options.fail_on_data_loss)
        if isinstance(limit, ReadAllAvailable):
            return offsets_json(latest)
        max_rows = self.options.max_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        delay = self._delay
        if isinstance(limit, ReadMinRows) and delay is None:
            delay = self._delay = TriggerDelay(limit.min_rows, self.options.max_trigger_delay_ms)
        # AvailableNow must end: it never waits for more data
        if (
            delay is not None
            and self._available_now is None
            and delay.should_wait(available(begin, latest), self._clock())
        ):
            return start
        if max_rows is None:
            return offsets_json(latest)
        return offsets_json(rate_limit(max_rows, begin, latest))

    def _new_partitions(self, begin: Offsets, latest: Offsets) -> Offsets:
        """Earliest offsets of partitions in ``latest`` not yet in ``begin``."""
        new = [tp for tp in latest if tp not in begin]
        if not new:
            return {}
        earliest = self.lookup.earliest(new)
        for tp in sorted(earliest):
            if earliest[tp] != 0:
                data_loss(
                    f"Added partition {tp} starts from {earliest[tp]} instead of 0.",
                    self.options.fail_on_data_loss,
                )
        return earliest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        begin.update(self._new_partitions(begin, until))
        ranges = []
        for tp in sorted(until):
            first, last = begin[tp], until[tp]
            if last < first:
                data_loss(
                    f"Partition {tp} offset was changed from {first} to {last}.",
                    self.options.fail_on_data_loss,
                )
                continue
            ranges.append(OffsetRange(tp, first, last))
        split = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [KafkaInputPartition(r) for r in split]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Commit the processed offsets to ``kafka.group.id`` / ``groupIdPrefix``, if given,
        so that the query's lag shows in Kafka monitoring (Spark's connector never does).

        Spark calls this for a micro-batch when it plans the next one, so the group's
        offsets trail the query by one batch (the last batch of a stopped query is
        not committed to the group; the checkpoint has it).
        """
        group = self.options.commit_group
        if group is not None:
            self.lookup.commit(group, offsets_from_json(end))

    def stop(self) -> None:
        if self._lookup is not None:
            lookup, self._lookup = self._lookup, None
            lookup.close()
