"""Turn the reader's options into concrete partitions and offsets, as Spark's connector does.

:func:`resolve_limit` takes an :class:`OffsetLookup` (the Kafka side: which
partitions exist, their earliest and latest offsets, offsets by timestamp) and
applies Spark's rules for ``earliest`` / ``latest`` / offset JSON / timestamps.
:class:`KafkaLookup` is the lookup backed by a kafkette :class:`AdminClient`,
opened on first use (the driver's; executors never resolve anything).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from kafkette.admin import AdminClient
from kafkette.admin.types import OffsetSpec
from kafkette.client.config import AdminConfig
from kafkette.consumer import OffsetAndMetadata
from kafkette.spark_integration.options import (
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    LatestOffsets,
    OffsetLimit,
    ReaderOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Strategy,
    Subscribe,
)
from kafkette.structs import TopicPartition


class OffsetLookup(Protocol):
    """What resolving offsets needs from Kafka."""

    def partitions(self) -> set[TopicPartition]:
        """The partitions the strategy (assign / subscribe / pattern) names now."""
        ...

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets; the last stable offsets with read_committed."""
        ...

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp; -1 where no record is that late."""
        ...


def resolve_limit(
    limit: OffsetLimit,
    partitions: set[TopicPartition],
    lookup: OffsetLookup,
    *,
    is_start: bool,
) -> dict[TopicPartition, int]:
    """Concrete offsets of ``partitions`` for one end of a range."""
    if isinstance(limit, EarliestOffsets):
        return lookup.earliest(partitions)
    if isinstance(limit, LatestOffsets):
        return lookup.latest(partitions)
    if isinstance(limit, SpecificOffsets):
        if set(limit.offsets) != partitions:
            raise ValueError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka "
                "start offsets don't match what are assigned. Maybe topic partitions are created "
                "or deleted while the query is running. Use -1 for latest, -2 for earliest. "
                f"Specified: {_set(limit.offsets)} Assigned: {_set(partitions)}"
            )
        return _replace_edges(dict(limit.offsets), lookup)
    if isinstance(limit, SpecificTimestamps):
        if set(limit.timestamps) != partitions:
            position = "starting" if is_start else "ending"
            raise ValueError(
                "[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka "
                f"timestamp based {position} offsets don't match what are assigned. Maybe topic "
                "partitions are created or deleted while the query is running, or you didn't "
                f"specify all the partitions. Specified: {_set(limit.timestamps)} "
                f"Assigned: {_set(partitions)}"
            )
        timestamps = dict(limit.timestamps)
    else:
        timestamps = dict.fromkeys(partitions, limit.timestamp)
    found = lookup.for_timestamps(timestamps)
    offsets = {}
    for tp, offset in found.items():
        if offset < 0:
            if is_start and not limit.latest_on_no_match:
                raise ValueError(
                    f"No offset matched from request of topic-partition {tp} and timestamp "
                    f"{timestamps[tp]}."
                )
            offset = LATEST
        offsets[tp] = offset
    return _replace_edges(offsets, lookup)


def _replace_edges(
    offsets: dict[TopicPartition, int], lookup: OffsetLookup
) -> dict[TopicPartition, int]:
    """Offsets with -2 / -1 replaced by the partition's earliest / latest offset."""
    earliest = [tp for tp, o in offsets.items() if o == EARLIEST]
    latest = [tp for tp, o in offsets.items() if o == LATEST]
    if earliest:
        offsets.update(lookup.earliest(earliest))
    if latest:
        offsets.update(lookup.latest(latest))
    return offsets


def _set(partitions: Iterable[TopicPartition]) -> str:
    return "Set(" + ", ".join(str(tp) for tp in sorted(partitions)) + ")"


def matching_topics(strategy: Strategy, topics: Iterable[str]) -> list[str]:
    """The topics a subscribe or pattern strategy reads among ``topics`` (the pattern must
    match the whole name, as Java's ``Pattern.matcher().matches()``)."""
    if isinstance(strategy, Subscribe):
        return [t for t in strategy.topics if t in set(topics)]
    if isinstance(strategy, Assign):
        return sorted({tp.topic for tp in strategy.partitions})
    pattern = re.compile(strategy.pattern)
    return sorted(t for t in topics if pattern.fullmatch(t))


def admin_settings(client: Mapping[str, str]) -> dict[str, str]:
    """The client settings an admin client takes (the consumer-only ones left out)."""
    known = AdminConfig.kafka_names()
    return {k: v for k, v in client.items() if k in known}


class KafkaLookup:
    """:class:`OffsetLookup` backed by a kafkette :class:`AdminClient`, opened lazily."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(admin_settings(self.options.client))
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()

    def partitions(self) -> set[TopicPartition]:
        strategy = self.options.strategy
        if isinstance(strategy, Assign):
            return set(strategy.partitions)
        topics = matching_topics(strategy, self.admin.list_topics())
        if not topics:
            return set()
        described = self.admin.describe_topics(topics)
        return {
            TopicPartition(name, p.partition)
            for name, outcome in described.items()
            if outcome.ok and outcome.value is not None
            for p in outcome.value.partitions
        }

    def _list(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        isolation = "read_committed" if self.options.read_committed else "read_uncommitted"
        found = self.admin.list_offsets(specs, isolation_level=isolation).all()
        return {tp: info.offset for tp, info in found.items()}

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(partitions, OffsetSpec.EARLIEST))

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(partitions, OffsetSpec.LATEST))

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._list(timestamps)

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Store ``offsets`` as ``group``'s committed offsets (for lag monitoring)."""
        if offsets:
            self.admin.alter_consumer_group_offsets(
                group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}
            ).all()
