"""The cluster's topics as the consumer-group coordinator sees them (its topic image)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkette.server.cluster import Cluster
from kafkette.server.groups.consumer_protocol import TopicInfo


class ClusterTopicImage:
    """A cached :data:`~kafkette.server.groups.consumer_protocol.topics.TopicImage` of
    ``cluster``'s topics without the internal ones.

    :meth:`refresh` is called before the coordinator is consulted (every heartbeat);
    it re-reads the topics only when :attr:`Cluster.topics_version` moved."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._version = cluster.topics_version
        self._image: dict[str, TopicInfo] = self._read()

    def __call__(self) -> Mapping[str, TopicInfo]:
        return self._image

    def refresh(self) -> bool:
        """Re-read the cluster's topics; whether any appeared, vanished or grew."""
        if self._cluster.topics_version == self._version:
            return False
        self._version = self._cluster.topics_version
        image = self._read()
        if image == self._image:
            return False
        self._image = image
        return True

    def _read(self) -> dict[str, TopicInfo]:
        return {
            name: TopicInfo(topic.topic_id, name, len(topic.partitions))
            for name, topic in self._cluster.topics.items()
            if not topic.is_internal
        }
