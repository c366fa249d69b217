"""One of the broker's internal compacted topics: ``__consumer_offsets`` or
``__transaction_state``.

Its coordinator's store keeps records in it: the topic is created on first
use with the partition count and configuration Kafka gives it (by
:meth:`InternalTopic.ready` when FindCoordinator or a share group's first
heartbeat asks for it, its logs opened off the event loop as CreateTopics opens
them; by :meth:`InternalTopic.ensure` on the spot when a coordinator needs it
before that), a key goes to
partition ``Utils.abs(key.hashCode()) % partitions`` (Java's
``String.hashCode`` over UTF-16 code units; ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0), and each batch is appended at its partition's
leader epoch, after which the broker is told (high watermark, long polls).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafkette.server.topic_creation import open_topic

if TYPE_CHECKING:
    import anyio

    from kafkette.backends import Log
    from kafkette.server.cluster import Cluster, Partition, Topic


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16
    code units, as a signed 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of ``key`` (a group or transactional id): ``Utils.abs(hashCode) %
    partitions``.

    Kafka's ``Utils.abs`` is ``Math.abs`` except that ``Integer.MIN_VALUE``
    gives 0 (not a mask with ``0x7fffffff``: ``-5`` gives 5, not 2147483643).
    """
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic:
    """An internal topic of ``cluster``, made on first use, and the appends to it.

    ``partitions`` and ``configs`` are what the topic is created with (a topic
    that exists keeps its own count); ``clock`` gives the records' timestamps
    (ms); ``appended`` is called with each log appended to; ``logger`` notes the
    creation.
    """

    def __init__(
        self,
        cluster: Cluster,
        name: str,
        *,
        partitions: int,
        configs: Mapping[str, str],
        clock: Callable[[], int],
        appended: Callable[[Log], None],
        logger: logging.Logger,
    ) -> None:
        self.name = name
        self._cluster = cluster
        self._partitions = partitions
        self._configs = dict(configs)
        self.now_ms = clock
        self._appended = appended
        self._logger = logger

    def existing(self) -> Topic | None:
        """The topic, or ``None`` while nothing has made it."""
        return self._cluster.topics.get(self.name)

    @property
    def partition_count(self) -> int:
        """Partitions of the topic: those it has, else those it will be created with."""
        topic = self.existing()
        return self._partitions if topic is None else len(topic.partitions)

    def ensure(self) -> Topic:
        """The topic, created now if it does not exist yet (on disk, its logs are opened
        on the caller's thread: :meth:`ready` first keeps that off the event loop)."""
        topic = self.existing()
        if topic is None:
            topic = self._cluster.create_topic(self.name, self._partitions, dict(self._configs))
            assert topic is not None
            self._logger.info("created %s with %d partitions", self.name, len(topic.partitions))
        return topic

    async def ready(self, topic_changes: anyio.Lock) -> None:
        """Create the topic if it does not exist yet, as CreateTopics creates one: its
        logs opened in a worker thread on disk (50 directories and their files take
        tens of milliseconds), under ``topic_changes``, and the topics file written
        before this returns. A read-only cluster creates nothing."""
        if self.existing() is not None or self._cluster.read_only:
            return
        async with topic_changes:
            if self.existing() is not None:
                return
            plan = self._cluster.plan_topic(self.name, self._partitions, dict(self._configs))
            topic = await open_topic(self._cluster, plan)
            await self._cluster.save_topics()
            self._logger.info("created %s with %d partitions", self.name, len(topic.partitions))

    def partition(self, key: str) -> Partition:
        """The partition holding ``key``'s records (the topic made if needed)."""
        topic = self.ensure()
        return topic.partitions[partition_for(key, len(topic.partitions))]

    def append(self, partition: Partition, batch: bytes) -> None:
        """Append a batch the broker built (no CRC check) at the partition's leader epoch."""
        log = partition.log
        log.append(batch, leader_epoch=partition.leader_epoch, check_crc=False)
        self._appended(log)
