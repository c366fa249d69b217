"""The single-node cluster's metadata: its identity, its topics and their partitions.

This node is the controller and the leader of every partition. Topic names,
ids, partition counts and configuration overrides live in memory and, when
the broker has a data directory, in ``<data_dir>/kafkette-topics.json``
(replaced atomically); the cluster id is generated once and kept in
``<data_dir>/meta.properties`` as Kafka does. Dynamic broker configurations
(set with AlterConfigs on the broker resource: for this node, or the
cluster-wide default) are kept in ``<data_dir>/kafkette-broker-configs.json``;
they override the static topic defaults of every topic without its own
override. A cluster made ``read_only`` reads those files and writes none (a
directory without a cluster id gets one in memory).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import uuid
from collections.abc import Generator, Iterator

import anyio
import attrs

from kafkette.backends import Log, LogConfig, Storage
from kafkette.backends.disk.checkpoint import write_atomically
from kafkette.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkette.server.collector import ServedCollector
from kafkette.server.config.catalog import (
    SYNONYM_OF,
    check_dynamic_broker_configs,
    validate_topic_configs,
)
from kafkette.server.connection_quotas import parse_overrides
from kafkette.server.kept_files.kept_file import KeptFile

logger = logging.getLogger("kafkette.server.cluster")

TOPICS_FILE = "kafkette-topics.json"
BROKER_CONFIGS_FILE = "kafkette-broker-configs.json"
META_FILE = "meta.properties"
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


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
    """One partition of a topic, with its log.

    ``replicas``, ``isr`` and ``leader_id`` are the nodes replicating it, those in
    sync and the one leading it when the broker core stands for several nodes
    (:class:`~kafkette.server.nodes.NodeTable`, None until chosen); a lone broker
    is every partition's one replica. The data is one log either way."""

    topic: str
    index: int
    log: Log
    leader_epoch: int = 0
    leader_id: int | None = None
    replicas: list[int] | None = None
    isr: list[int] | None = None


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


@attrs.define(eq=False)
class TopicPlan:
    """A topic checked for creation whose logs are not opened yet."""

    name: str
    num_partitions: int
    log_config: LogConfig
    configs: dict[str, str]
    topic_id: uuid.UUID
    replicas: list[list[int]] | None = None
    """Each partition's replicas (None: one, chosen by the nodes when first looked at)."""


def _saved_topic(topic: Topic) -> dict[str, object]:
    """A topic's entry in the topics file; the replicas of its partitions when placed on
    several simulated nodes (:class:`~kafkette.server.nodes.NodeTable`)."""
    entry: dict[str, object] = {
        "name": topic.name,
        "id": str(topic.topic_id),
        "partitions": len(topic.partitions),
        "configs": topic.configs,
    }
    if any(p.replicas is not None and len(p.replicas) > 1 for p in topic.partitions):
        entry["replicas"] = [p.replicas or [] for p in topic.partitions]
    return entry


class Cluster:
    """Topics of this node, backed by a :class:`Storage` for their logs.

    Creating a topic or adding partitions opens one log per partition, which
    on disk makes a directory and a file each: :meth:`plan_topic` and
    :meth:`open_partitions` let a request handler do that work in steps or in a
    worker thread (see :mod:`kafkette.server.topic_creation`) while other
    connections are served, and :meth:`create_topic` / :meth:`add_partitions`
    do it at once.
    """

    def __init__(
        self,
        storage: Storage,
        defaults: LogConfig,
        data_dir: str | None,
        *,
        read_only: bool = False,
    ) -> None:
        self.storage = storage
        self.read_only = read_only
        self.static_defaults = defaults
        """Topic defaults from the static broker configuration."""
        self.defaults = defaults
        """Topic defaults in force: the static ones under the dynamic broker configs."""
        self.data_dir = data_dir
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.creating: set[str] = set()
        """Names of topics whose logs are being opened (not yet in :attr:`topics`)."""
        self.topics_version = 0
        """Bumped whenever a topic is added, deleted or grown: readers that cache the
        topics (the consumer-group coordinator's image) re-read them only then."""
        self.dynamic_broker_configs: dict[str, str] = {}
        """Dynamic configs of this broker (resource name: its node id)."""
        self.dynamic_default_configs: dict[str, str] = {}
        """Dynamic configs of every broker (resource name: empty)."""
        self.group_configs: dict[str, dict[str, str]] = {}
        """Group configs (config resource type 32) by group id, checked by
        :mod:`kafkette.server.config.group_configs`; kept with the dynamic broker configs.
        Changed in place, so that the consumer group coordinator can read this dict."""
        self.client_metrics_configs: dict[str, dict[str, str]] = {}
        """Client metrics subscriptions (config resource type 16, KIP-714) by name, as set
        (checked by :mod:`kafkette.server.metrics.client_metrics`); kept with the dynamic
        broker configs."""
        self.collector: ServedCollector | None = None
        """A served broker's collector policy, told of every partition opened."""
        self.kept_files: list[KeptFile] = []
        """The data directory's files written off the loop while :meth:`keep_files_written`
        runs (see :mod:`kafkette.server.data_dir.kept_file`)."""
        self.topics_file = self.kept_file(TOPICS_FILE)
        self.configs_file = self.kept_file(BROKER_CONFIGS_FILE)
        self.cluster_id = self._load_cluster_id()
        self._load_broker_configs()
        self._load_topics()

    # ---- identity

    def _load_cluster_id(self) -> str:
        if self.data_dir is None:
            return new_cluster_id()
        if not self.read_only:
            os.makedirs(self.data_dir, exist_ok=True)
        path = os.path.join(self.data_dir, META_FILE)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.strip().partition("=")
                    if key == "cluster.id" and value:
                        return value
        cluster_id = new_cluster_id()
        if not self.read_only:
            write_atomically(path, f"version=1\ncluster.id={cluster_id}\n".encode())
        return cluster_id

    # ---- topics

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        """The log settings of a topic with these overrides (raises InvalidConfigError)."""
        return validate_topic_configs(configs, base=self.defaults)[0]

    def check_collision(self, name: str) -> None:
        """Raise InvalidTopicError if ``name`` differs from an existing topic only in '.'/'_'.

        Kafka refuses such names in CreateTopics (their metric names collide).
        """
        if "." in name or "_" in name:
            key = name.replace(".", "_")
            for other in (*self.topics, *self.creating):
                if other != name and other.replace(".", "_") == key:
                    raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")

    def plan_topic(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str] | None = None,
        *,
        replication_factor: int = 1,
        topic_id: uuid.UUID | None = None,
        replicas: list[list[int]] | None = None,
    ) -> TopicPlan:
        """Check that a topic could be created; raises the ApiError Kafka would answer.

        ``replicas``: each partition's, placed by the nodes
        (:meth:`~kafkette.server.nodes.NodeTable.place`); without them a replication
        factor above 1 is refused, as by a lone broker."""
        validate_topic_name(name)
        if name in self.topics or name in self.creating:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise InvalidPartitionsError(
                "Number of partitions was set to an invalid non-positive value."
            )
        if replication_factor == 0 or replication_factor < -1:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
        if replication_factor > 1 and replicas is None:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                "1 broker(s) are registered."
            )
        log_config, normalised = validate_topic_configs(configs or {}, base=self.defaults)
        return TopicPlan(
            name, num_partitions, log_config, normalised, topic_id or uuid.uuid4(), replicas
        )

    def register_topic(self, plan: TopicPlan, partitions: list[Partition]) -> Topic:
        """Add a planned topic whose logs :meth:`open_partitions` opened."""
        if len(partitions) != plan.num_partitions:
            raise AssertionError(f"{len(partitions)} of {plan.num_partitions} partitions opened")
        if plan.replicas is not None:
            for partition, replicas in zip(partitions, plan.replicas, strict=True):
                partition.replicas = list(replicas)
        topic = Topic(plan.name, plan.topic_id, partitions, plan.configs)
        self.topics[plan.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        self.topics_version += 1
        self._save_topics()
        return topic

    def open_partitions(
        self, name: str, start: int, stop: int, config: LogConfig, opened: list[Partition]
    ) -> Generator[None, None, None]:
        """Open the logs of partitions ``start`` to ``stop - 1`` of ``name`` into
        ``opened``, one partition per step.

        Unless run to its end (an error, or the generator closed early), the logs
        it opened are deleted again and ``opened`` emptied, so that a failed
        creation leaves no directory or open file behind.
        """
        complete = False
        try:
            for index in range(start, stop):
                opened.append(Partition(name, index, self.storage.open_log(name, index, config)))
                if self.collector is not None:
                    self.collector.partitions_changed()
                yield
            complete = True
        finally:
            if not complete:
                for partition in opened:
                    self.storage.delete_log(name, partition.index)
                opened.clear()

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
        plan = self.plan_topic(
            name,
            num_partitions,
            configs,
            replication_factor=replication_factor,
            topic_id=topic_id,
        )
        if validate_only:
            return None
        opened: list[Partition] = []
        for _ in self.open_partitions(name, 0, num_partitions, plan.log_config, opened):
            pass
        return self.register_topic(plan, opened)

    def delete_topic(self, name: str) -> Topic:
        topic = self.get_topic(name)
        for _ in self.remove_topic(topic):
            pass
        return topic

    def remove_topic(self, topic: Topic) -> Generator[None, None, None]:
        """Delete ``topic``: gone from :attr:`topics` and the topics file at once, then
        its logs one per step.

        The topics file is the commit point: a crash after it leaves logs that no topic
        names, which the next start deletes (:meth:`_load_topics`), so a deleted topic
        never comes back, not even in part. If the caller stops early (cancelled), the
        remaining logs are deleted at once.
        """
        self.detach_topic(topic)
        self.write_topics_now()
        return self.delete_logs(topic)

    def detach_topic(self, topic: Topic) -> None:
        """Take ``topic`` out of :attr:`topics` (and the topics file, see
        :meth:`save_topics`); its logs stay until :meth:`delete_logs`, which must
        wait until the topics file no longer names it."""
        del self.topics[topic.name]
        del self.topics_by_id[topic.topic_id]
        self.topics_version += 1
        self._save_topics()

    def delete_logs(self, topic: Topic) -> Generator[None, None, None]:
        """Delete the logs of a :meth:`detach_topic`-ed topic, one per step; closed
        early (cancelled), the rest at once."""
        remaining = list(topic.partitions)
        try:
            while remaining:
                self.storage.delete_log(topic.name, remaining.pop().index)
                yield
        finally:
            for partition in remaining:
                self.storage.delete_log(topic.name, partition.index)

    def check_new_partition_count(self, name: str, total: int) -> Topic:
        """The topic, if ``total`` partitions would be an increase (else InvalidPartitionsError)."""
        topic = self.get_topic(name)
        current = len(topic.partitions)
        if total == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        if total < current:
            raise InvalidPartitionsError(
                f"The topic {name} currently has {current} partition(s); "
                f"{total} would not be an increase."
            )
        return topic

    def extend_topic(self, topic: Topic, opened: list[Partition]) -> None:
        """Add the partitions :meth:`open_partitions` opened to ``topic``."""
        if not opened or opened[0].index != len(topic.partitions):
            raise AssertionError(f"partitions opened for {topic.name} do not follow its last")
        topic.partitions.extend(opened)
        self.topics_version += 1
        self._save_topics()

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        topic = self.check_new_partition_count(name, total)
        if validate_only:
            return
        opened: list[Partition] = []
        config = self.log_config(topic.configs)
        for _ in self.open_partitions(name, len(topic.partitions), total, config, opened):
            pass
        self.extend_topic(topic, opened)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides (validated) and apply them to its logs."""
        topic = self.get_topic(name)
        log_config, normalised = validate_topic_configs(configs, base=self.defaults)
        topic.configs = normalised
        for partition in topic.partitions:
            partition.log.update_config(log_config)
        self._save_topics()

    # ---- dynamic broker configs

    def validate_dynamic_broker_configs(
        self, per_broker: dict[str, str] | None = None, default: dict[str, str] | None = None
    ) -> tuple[dict[str, str], dict[str, str], LogConfig, dict[str, LogConfig]]:
        """Check replacement dynamic configs (None: unchanged); raises InvalidConfigError.

        Returns the new per-broker and default sets, the topic defaults they make
        and the log settings of every topic under them.
        """
        new_broker = dict(self.dynamic_broker_configs if per_broker is None else per_broker)
        new_default = dict(self.dynamic_default_configs if default is None else default)
        defaults = self._dynamic_defaults(new_default, new_broker)
        logs = {name: self._topic_log_config(t, defaults) for name, t in self.topics.items()}
        return new_broker, new_default, defaults, logs

    def set_dynamic_broker_configs(
        self, per_broker: dict[str, str] | None = None, default: dict[str, str] | None = None
    ) -> None:
        """Replace this broker's and/or the cluster-wide dynamic configs, then apply them.

        Kafka's dynamic broker configs are accepted (per broker or cluster-wide as
        Kafka allows, see :func:`check_dynamic_broker_configs`); a topic default's
        value is checked as the topic setting it is the default of. Raises
        InvalidConfigError (unknown name) or InvalidRequestError (as Kafka).
        """
        new_broker, new_default, defaults, logs = self.validate_dynamic_broker_configs(
            per_broker, default
        )
        self.dynamic_broker_configs, self.dynamic_default_configs = new_broker, new_default
        self.defaults = defaults
        for name, topic in self.topics.items():
            for partition in topic.partitions:
                partition.log.update_config(logs[name])
        self._save_broker_configs()

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace one group's configs (already checked; empty: none), kept on disk."""
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        self._save_broker_configs()

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace one client metrics subscription's configs (empty: none), kept on disk."""
        if configs:
            self.client_metrics_configs[name] = dict(configs)
        else:
            self.client_metrics_configs.pop(name, None)
        self._save_broker_configs()

    def _dynamic_defaults(self, default: dict[str, str], per_broker: dict[str, str]) -> LogConfig:
        """The topic defaults under these dynamic configs, after Kafka's checks of them.

        Only the broker synonyms of topic configurations act on anything; the other
        dynamic names are inert (checked by type and kept).
        """
        check_dynamic_broker_configs(default, per_broker=False)
        check_dynamic_broker_configs(per_broker, per_broker=True)
        for level in (default, per_broker):
            overrides = level.get("max.connections.per.ip.overrides")
            if overrides is not None:
                try:
                    parse_overrides(overrides)
                except ValueError as exc:
                    raise InvalidRequestError(
                        f"Invalid value {overrides} for configuration "
                        f"max.connections.per.ip.overrides: {exc}"
                    ) from None
        result = self.static_defaults
        for level in (default, per_broker):
            topic_values: dict[str, str] = {}
            for name, value in level.items():
                target = SYNONYM_OF.get(name)
                if target is None:
                    continue
                topic_name, _ = target
                try:
                    validate_topic_configs({topic_name: value})
                except InvalidConfigError as exc:
                    # Kafka answers a broker config's bad value with INVALID_REQUEST
                    raise InvalidRequestError(
                        f"Invalid value {value} for configuration {name}: {exc.detail}"
                    ) from None
                topic_values[topic_name] = value
            result = validate_topic_configs(topic_values, base=result)[0]
        return result

    @staticmethod
    def _topic_log_config(topic: Topic, defaults: LogConfig) -> LogConfig:
        return validate_topic_configs(topic.configs, base=defaults)[0]

    def _load_broker_configs(self) -> None:
        if self.data_dir is None:
            return
        path = os.path.join(self.data_dir, BROKER_CONFIGS_FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        broker = {str(k): str(v) for k, v in saved.get("broker", {}).items()}
        default = {str(k): str(v) for k, v in saved.get("default", {}).items()}
        self.defaults = self._dynamic_defaults(default, broker)
        self.dynamic_broker_configs, self.dynamic_default_configs = broker, default
        for group_id, configs in saved.get("groups", {}).items():
            self.group_configs[str(group_id)] = {str(k): str(v) for k, v in configs.items()}
        for name, configs in saved.get("client_metrics", {}).items():
            self.client_metrics_configs[str(name)] = {str(k): str(v) for k, v in configs.items()}

    def _save_broker_configs(self) -> None:
        if self.data_dir is None:
            return
        saved = {
            "version": 1,
            "broker": self.dynamic_broker_configs,
            "default": self.dynamic_default_configs,
            "groups": self.group_configs,
            "client_metrics": self.client_metrics_configs,
        }
        if self.configs_file is not None:
            self.configs_file.change(json.dumps(saved, indent=1, sort_keys=True))

    # ---- lookups

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic: {name}")
        return topic

    def get_topic_by_id(self, topic_id: uuid.UUID) -> Topic:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise UnknownTopicIdError(f"This server does not host a topic with id {topic_id}")
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
        wanted: list[tuple[str, int, LogConfig | None]] = []
        for entry in saved["topics"]:
            log_config = self.log_config(dict(entry.get("configs", {})))
            wanted += [(entry["name"], i, log_config) for i in range(int(entry["partitions"]))]
        # Every topic's logs at once: a disk storage opens them in a pool of threads and
        # syncs once for all (many small topics would otherwise sync once each).
        opened = iter(self.storage.open_many(wanted))
        for entry in saved["topics"]:
            name = entry["name"]
            configs = dict(entry.get("configs", {}))
            topic = Topic(name, uuid.UUID(entry["id"]), [], configs)
            count = int(entry["partitions"])
            logs = [next(opened) for _ in range(count)]
            replicas = entry.get("replicas") or []
            for index, log in enumerate(logs):
                partition = Partition(name, index, log, int(entry.get("epoch", 0)))
                if index < len(replicas) and replicas[index]:
                    partition.replicas = [int(n) for n in replicas[index]]
                topic.partitions.append(partition)
            self.topics[name] = topic
            self.topics_by_id[topic.topic_id] = topic
        if not self.read_only:
            # Logs no topic names: a deletion or creation a crash interrupted after (or
            # before) the topics file was written. Kept, they would come back with a
            # new topic of that name.
            for name, index in self.storage.list_partitions():
                known = self.topics.get(name)
                if known is None or index >= len(known.partitions):
                    self.storage.delete_log(name, index)

    def _save_topics(self) -> None:
        if self.topics_file is None:
            return
        saved = {"version": 1, "topics": [_saved_topic(t) for t in self.topics.values()]}
        self.topics_file.change(json.dumps(saved, indent=1, sort_keys=True))

    def write_topics_now(self) -> None:
        """Write the topics file's pending change, if any, on this thread (blocking)."""
        if self.topics_file is not None:
            self.topics_file.write_now()

    async def save_topics(self) -> None:
        """Return once the topics file holds every change made before the call (written
        in a worker thread if still pending): a topic's creation is answered, and a
        deleted topic's logs deleted, only after this returns."""
        if self.topics_file is not None:
            await self.topics_file.saved()

    async def files_saved(self) -> None:
        """Return once every kept file (topics, configs, and those of :meth:`kept_file`)
        holds every change made before the call."""
        for kept in self.kept_files:
            await kept.saved()

    def kept_file(self, name: str) -> KeptFile | None:
        """The data directory's file ``name``, written off the loop while
        :meth:`keep_files_written` runs; None without a data directory."""
        if self.data_dir is None:
            return None
        kept = KeptFile(os.path.join(self.data_dir, name), read_only=self.read_only)
        self.kept_files.append(kept)
        return kept

    async def keep_files_written(self) -> None:
        """Write the kept files in worker threads after each change, until cancelled
        (then at once, if a change is pending), so that no fsync of theirs runs on the
        event loop, also for a change whose caller does not wait for it."""
        async with anyio.create_task_group() as tasks:
            for kept in self.kept_files:
                tasks.start_soon(kept.keep_written)

    def close(self) -> None:
        for kept in self.kept_files:
            kept.write_now()
        self.storage.close()
