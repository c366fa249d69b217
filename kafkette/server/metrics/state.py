"""Gauges read from the broker's state when Prometheus scrapes: nothing is kept for them.

Per partition: the log's size, start offset, end offset and high watermark. Per group:
its members (classic groups and groups of the consumer protocol, KIP-848), and per
partition it committed an offset for, that offset and the lag behind the partition's
high watermark (what ``kafka-consumer-groups --describe`` shows as LAG). The open
transactions (Ongoing, or preparing to commit or abort) by state. Read on the broker's
event loop, where the state lives, in steps: :meth:`BrokerState.families` yields None
between partitions and groups, where the caller may let other tasks run (a broker of
10,000 partitions took half a second to scrape in one go). The partitions and groups are
listed first; one deleted meanwhile is left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kafkette.errors import KafkaError
from kafkette.server.metrics.exposition import Family

if TYPE_CHECKING:
    from kafkette.server.cluster import Cluster
    from kafkette.server.groups.consumer_protocol import ConsumerGroupCoordinator
    from kafkette.server.groups.coordinator import GroupCoordinator
    from kafkette.server.txn.coordinator import TransactionCoordinator

_OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


class BrokerState:
    """The parts of the broker whose state the gauges show."""

    def __init__(
        self,
        cluster: Cluster,
        groups: GroupCoordinator,
        consumer_groups: ConsumerGroupCoordinator,
        transactions: TransactionCoordinator,
    ) -> None:
        self.cluster = cluster
        self.groups = groups
        self.consumer_groups = consumer_groups
        self.transactions = transactions

    def families(self) -> Iterator[Family | None]:
        """The gauges' families, their samples read now; None between steps."""
        yield from self._partitions()
        yield from self._groups()
        yield self._transactions()

    def _partitions(self) -> Iterator[Family | None]:
        size = Family("kafkette_log_size_bytes", "gauge", "Bytes in the partition's log.")
        start = Family("kafkette_log_start_offset", "gauge", "The partition's first offset.")
        end = Family("kafkette_log_end_offset", "gauge", "The offset the next record gets.")
        watermark = Family("kafkette_high_watermark", "gauge", "The partition's high watermark.")
        for partition in list(self.cluster.partitions()):
            log = partition.log
            labels = (("topic", partition.topic), ("partition", str(partition.index)))
            try:
                figures = (
                    log.size_in_bytes,
                    log.log_start_offset,
                    log.log_end_offset,
                    log.high_watermark,
                )
            except (KafkaError, OSError, ValueError):  # deleted (its log closed) meanwhile
                continue
            for family, figure in zip((size, start, end, watermark), figures, strict=True):
                family.add(labels, figure)
            yield None
        yield from (size, start, end, watermark)

    def _groups(self) -> Iterator[Family | None]:
        members = Family(
            "kafkette_consumer_group_members", "gauge", "Members of the group, by group type."
        )
        committed = Family(
            "kafkette_consumer_group_committed_offset",
            "gauge",
            "The offset the group committed for the partition.",
        )
        lag = Family(
            "kafkette_consumer_group_lag",
            "gauge",
            "Records between the group's committed offset and the partition's high watermark.",
        )
        consumer = self.consumer_groups.groups
        for group_id, group in sorted(consumer.items()):
            members.add((("group", group_id), ("type", "consumer")), len(group.members))
        topics = self.cluster.topics
        for group_id, classic in sorted(self.groups.engine.groups.items()):
            yield None
            if group_id not in consumer:
                members.add((("group", group_id), ("type", "classic")), len(classic.members))
            for (topic, index), offset in sorted(dict(classic.offsets).items()):
                labels = (("group", group_id), ("topic", topic), ("partition", str(index)))
                committed.add(labels, offset.offset)
                found = topics.get(topic)
                if found is not None and index < len(found.partitions):
                    watermark = found.partitions[index].log.high_watermark
                    lag.add(labels, max(watermark - offset.offset, 0))
        yield from (members, committed, lag)

    def _transactions(self) -> Family:
        family = Family(
            "kafkette_open_transactions",
            "gauge",
            "Transactions begun and not yet completed, by state.",
        )
        counts = dict.fromkeys(_OPEN_STATES, 0)
        for meta in self.transactions.transactions.values():
            name = meta.state.display_name
            if name in counts:
                counts[name] += 1
        for state, count in counts.items():
            family.add((("state", state),), count)
        return family
