"""The single-node cluster's metadata: its identity, its topics and their partitions.

This node is the controller and the leader of every partition. Topic names,
ids, partition counts and configuration overrides live in memory and, when
the broker has a data directory, in ``<data_dir>/kafkette-topics.json``
(replaced atomically); the cluster id is generated once and kept in
``<data_dir>/meta.properties`` as Kafka does.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections.abc import Iterator

import attrs

from kafkette.backends import Log, LogConfig, Storage
from kafkette.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

TOPICS_FILE = "kafkette-topics.json"
META_FILE = "meta.properties"
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``name`` is a legal Kafka topic name."""
    if not name or name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'"
        )


def new_cluster_id() -> str:
    """A cluster id as Kafka makes them: a random UUID in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@attrs.define(eq=False)
class Partition:
    """One partition of a topic, with its log; this node leads it."""

    topic: str
    index: int
    log: Log
    leader_epoch: int = 0


@attrs.define(eq=False)
class Topic:
    """A topic: its id, partitions and configuration overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str] = attrs.Factory(dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class Cluster:
    """Topics of this node, backed by a :class:`Storage` for their logs."""

    def __init__(self, storage: Storage, defaults: LogConfig, data_dir: str | None) -> None:
        self.storage = storage
        self.defaults = defaults
        self.data_dir = data_dir
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.cluster_id = self._load_cluster_id()
        self._load_topics()

    # ---- identity

    def _load_cluster_id(self) -> str:
        if self.data_dir is None:
            return new_cluster_id()
        os.makedirs(self.data_dir, exist_ok=True)
        path = os.path.join(self.data_dir, META_FILE)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.strip().partition("=")
                    if key == "cluster.id" and value:
                        return value
        cluster_id = new_cluster_id()
        self._write_atomically(path, f"version=1\ncluster.id={cluster_id}\n")
        return cluster_id

    # ---- topics

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        """The log settings of a topic with these overrides."""
        return LogConfig.from_kafka(configs, base=self.defaults)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str] | None = None,
        *,
        replication_factor: int = 1,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> Topic | None:
        """Create a topic; with ``validate_only`` only check that it could be created."""
        validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if num_partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, got {num_partitions}"
            )
        if replication_factor not in (1, -1):
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the 1 available broker"
            )
        configs = dict(configs or {})
        log_config = self.log_config(configs)
        if validate_only:
            return None
        topic = Topic(name, topic_id or uuid.uuid4(), [], configs)
        for index in range(num_partitions):
            log = self.storage.open_log(name, index, log_config)
            topic.partitions.append(Partition(name, index, log))
        self.topics[name] = topic
        self.topics_by_id[topic.topic_id] = topic
        self._save_topics()
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.get_topic(name)
        del self.topics[name]
        del self.topics_by_id[topic.topic_id]
        for partition in topic.partitions:
            self.storage.delete_log(name, partition.index)
        self._save_topics()
        return topic

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        topic = self.get_topic(name)
        current = len(topic.partitions)
        if total <= current:
            raise InvalidPartitionsError(
                f"topic {name!r} has {current} partitions; "
                f"the new count must be larger, got {total}"
            )
        if validate_only:
            return
        config = self.log_config(topic.configs)
        for index in range(current, total):
            topic.partitions.append(
                Partition(name, index, self.storage.open_log(name, index, config))
            )
        self._save_topics()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides (validated) and apply them to its logs."""
        topic = self.get_topic(name)
        log_config = self.log_config(configs)
        topic.configs = dict(configs)
        for partition in topic.partitions:
            partition.log.update_config(log_config)
        self._save_topics()

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return topic

    def get_topic_by_id(self, topic_id: uuid.UUID) -> Topic:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise UnknownTopicIdError(f"no topic has id {topic_id}")
        return topic

    def get_partition(self, name: str, index: int) -> Partition:
        topic = self.get_topic(name)
        if not 0 <= index < len(topic.partitions):
            raise UnknownTopicOrPartitionError(f"topic {name!r} has no partition {index}")
        return topic.partitions[index]

    def partitions(self) -> Iterator[Partition]:
        for topic in self.topics.values():
            yield from topic.partitions

    # ---- persistence

    def _load_topics(self) -> None:
        if self.data_dir is None:
            return
        path = os.path.join(self.data_dir, TOPICS_FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        for entry in saved["topics"]:
            name = entry["name"]
            configs = dict(entry.get("configs", {}))
            log_config = self.log_config(configs)
            topic = Topic(name, uuid.UUID(entry["id"]), [], configs)
            for index in range(int(entry["partitions"])):
                log = self.storage.open_log(name, index, log_config)
                topic.partitions.append(Partition(name, index, log, int(entry.get("epoch", 0))))
            self.topics[name] = topic
            self.topics_by_id[topic.topic_id] = topic

    def _save_topics(self) -> None:
        if self.data_dir is None:
            return
        saved = {
            "version": 1,
            "topics": [
                {
                    "name": t.name,
                    "id": str(t.topic_id),
                    "partitions": len(t.partitions),
                    "configs": t.configs,
                }
                for t in self.topics.values()
            ],
        }
        self._write_atomically(
            os.path.join(self.data_dir, TOPICS_FILE), json.dumps(saved, indent=1, sort_keys=True)
        )

    @staticmethod
    def _write_atomically(path: str, text: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        self.storage.close()
