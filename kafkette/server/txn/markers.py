"""Transaction markers: the control batch that ends a transaction in each of its partitions.

Each partition of the transaction gets one control batch holding a COMMIT
or ABORT marker with the producer's id and epoch and the coordinator epoch,
appended through the partition's log like any batch (the log's producer
state closes the transaction, moves the last stable offset on and, for an
abort, adds the transaction to the aborted-transaction index), then
:class:`MarkerWriter`'s ``appended`` callback (the broker's) wakes the
fetches waiting on it. A COMMIT to a ``__consumer_offsets`` partition also
hands the group coordinator the offsets the transaction committed there (read
back from the log just before the marker). Partitions of topics deleted meanwhile are
skipped, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kafkette.protocol.records import ControlRecordType, build_control_batch
from kafkette.server.groups.log_store import OFFSETS_TOPIC
from kafkette.server.groups.store import CommittedOffset, PartitionKey

if TYPE_CHECKING:
    from kafkette.backends import Log
    from kafkette.server.cluster import Cluster
    from kafkette.server.groups.coordinator import GroupCoordinator
    from kafkette.server.groups.log_store import LogGroupStore


class MarkerWriter:
    """Appends transaction markers to the partitions of ``cluster``.

    ``offsets`` is the store of ``__consumer_offsets``, whose transactional
    offsets a COMMIT hands to ``groups``; ``clock`` stamps the markers (ms);
    ``appended`` is called with each log a marker went to.
    """

    def __init__(
        self,
        cluster: Cluster,
        offsets: LogGroupStore,
        groups: GroupCoordinator,
        *,
        clock: Callable[[], int],
        appended: Callable[[Log], None],
    ) -> None:
        self._cluster = cluster
        self._offsets = offsets
        self._groups = groups
        self._clock = clock
        self._appended = appended

    def write(
        self,
        partitions: Iterable[PartitionKey],
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> None:
        """Append the marker to every partition (in topic, partition order)."""
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        topics = self._cluster.topics
        for topic_name, index in sorted(partitions):
            topic = topics.get(topic_name)
            if topic is None or not 0 <= index < len(topic.partitions):
                continue
            offsets: dict[str, dict[PartitionKey, CommittedOffset]] = {}
            if commit and topic_name == OFFSETS_TOPIC:
                offsets = self._offsets.transactional_offsets(index, producer_id)
            partition = topic.partitions[index]
            marker = build_control_batch(
                control,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                timestamp=self._clock(),
            )
            partition.log.append(marker, leader_epoch=partition.leader_epoch, check_crc=False)
            self._appended(partition.log)
            for group_id, committed in offsets.items():
                self._groups.apply_transactional_offsets(group_id, committed)
