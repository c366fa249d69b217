"""What a client knows about the cluster: brokers, topics, partition leaders.

:class:`ClusterMetadata` is a plain snapshot built from a MetadataResponse;
:class:`MetadataCache` holds the current snapshot, the topics the client
cares about, and when it must be refreshed: after ``metadata.max.age.ms``,
or at once when an operation found it stale (a NOT_LEADER_OR_FOLLOWER, an
unknown topic, a lost connection). Time is passed in, so the cache is tested
without sleeping.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs

from kafkette.errors import ApiError, error_for_code
from kafkette.protocol.messages import MetadataResponse


@attrs.frozen
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@attrs.frozen
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False
    error_code: int = 0

    @property
    def error(self) -> type[ApiError] | None:
        return error_for_code(self.error_code)


@attrs.frozen
class ClusterMetadata:
    """One snapshot of the cluster."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = attrs.Factory(dict)
    topics: dict[str, TopicInfo] = attrs.Factory(dict)

    @classmethod
    def from_response(cls, response: MetadataResponse) -> ClusterMetadata:
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics: dict[str, TopicInfo] = {}
        for t in response.topics:
            if t.name is None:
                continue
            partitions = tuple(
                sorted(
                    (
                        PartitionInfo(
                            t.name,
                            p.partition_index,
                            p.leader_id,
                            p.leader_epoch,
                            tuple(p.replica_nodes),
                            tuple(p.isr_nodes),
                            p.error_code,
                        )
                        for p in t.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            topics[t.name] = TopicInfo(t.name, t.topic_id, partitions, t.is_internal, t.error_code)
        return cls(response.cluster_id, response.controller_id, brokers, topics)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """Node id of the partition's leader, or None when unknown."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        leader = info.partitions[partition].leader
        return leader if leader >= 0 and leader in self.brokers else None

    def partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        if info is None or info.error_code != 0:
            return None
        return len(info.partitions)


class MetadataCache:
    """The current snapshot and the refresh policy."""

    def __init__(self, max_age_ms: int) -> None:
        self.max_age_ms = max_age_ms
        self.snapshot = ClusterMetadata()
        self.updated_ms: float | None = None
        self.wanted_topics: set[str] = set()
        self._stale = True

    def update(self, metadata: ClusterMetadata, now_ms: float, *, merge: bool = True) -> None:
        """Take a new snapshot; with ``merge``, topics it does not mention are kept."""
        topics = dict(self.snapshot.topics) if merge else {}
        topics.update(metadata.topics)
        self.snapshot = attrs.evolve(metadata, topics=topics)
        self.updated_ms = now_ms
        self._stale = False

    def request_update(self) -> None:
        """Mark the snapshot stale: the next check refreshes it."""
        self._stale = True

    def needs_update(self, now_ms: float) -> bool:
        if self._stale or self.updated_ms is None:
            return True
        return now_ms - self.updated_ms >= self.max_age_ms

    def apply_leader_hints(
        self, hints: Iterable[tuple[str, int, int, int]], endpoints: Iterable[BrokerInfo]
    ) -> set[tuple[str, int]]:
        """KIP-951: take the new leaders a broker named in a NOT_LEADER_OR_FOLLOWER (or
        FENCED_LEADER_EPOCH) answer, without waiting for a metadata refresh.

        ``hints`` are ``(topic, partition, leader id, leader epoch)``; ``endpoints``
        the brokers the answer describes (the new leaders among them). As in Java's
        client, a hint is ignored when it names no leader or no epoch (-1), a broker
        known from neither, a partition not in the snapshot, or an epoch no newer
        than the known one. Returns the partitions whose leader was taken.
        """
        snapshot = self.snapshot
        brokers = dict(snapshot.brokers)
        for endpoint in endpoints:
            brokers[endpoint.node_id] = endpoint
        topics = dict(snapshot.topics)
        taken: set[tuple[str, int]] = set()
        for topic, partition, leader, epoch in hints:
            info = topics.get(topic)
            if info is None or leader < 0 or epoch < 0 or leader not in brokers:
                continue
            if not 0 <= partition < len(info.partitions):
                continue
            old = info.partitions[partition]
            if epoch <= old.leader_epoch:
                continue
            partitions = list(info.partitions)
            partitions[partition] = attrs.evolve(
                old, leader=leader, leader_epoch=epoch, error_code=0
            )
            topics[topic] = attrs.evolve(info, partitions=tuple(partitions))
            taken.add((topic, partition))
        if taken:
            self.snapshot = attrs.evolve(snapshot, brokers=brokers, topics=topics)
        return taken

    def forget_topic(self, topic: str) -> None:
        if topic in self.snapshot.topics:
            topics = dict(self.snapshot.topics)
            del topics[topic]
            self.snapshot = attrs.evolve(self.snapshot, topics=topics)
