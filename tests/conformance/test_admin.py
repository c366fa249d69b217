"""Topic and configuration administration as independent admin clients see it.

confluent-kafka (librdkafka), kafka-python and aiokafka each create a topic
with configs, describe all its configs, alter one, add partitions and delete
the topic against ``kafkette serve`` (memory and disk); then describe the
cluster and the log dirs where the client has the API.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpResourceType

from tests.brokers import BrokerProcess

ALL_TOPIC_CONFIGS = [
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
]
"""What a Kafka 3.9 broker lists for a topic (``kafka-configs --describe --all``), sorted."""


# ---- confluent-kafka


def test_confluent_kafka_topic_lifecycle(broker: BrokerProcess) -> None:
    """confluent-kafka: create with configs, describe all, alter, grow, describe cluster, delete."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics(
        [
            NewTopic(
                "ck-orders", 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}
            )
        ]
    )
    assert created["ck-orders"].result(10) is None

    resource = ConfigResource(ResourceType.TOPIC, "ck-orders")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert sorted(configs) == ALL_TOPIC_CONFIGS
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_default and not retention.is_read_only
    policy = configs["cleanup.policy"]
    assert policy.value == "compact"
    assert [(s.name, s.value, s.source) for s in policy.synonyms.values()] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG.value),
    ]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)
    assert segment.is_default
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["leader.replication.throttled.replicas"].value == ""

    altered = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                "ck-orders",
                incremental_configs=[
                    ConfigEntry(
                        "retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET
                    ),
                    ConfigEntry(
                        "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND
                    ),
                    ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
                ],
            )
        ]
    )
    assert [f.result(10) for f in altered.values()] == [None]
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact,delete"

    assert admin.create_partitions([NewPartitions("ck-orders", 5)])["ck-orders"].result(10) is None
    metadata = admin.list_topics("ck-orders", timeout=10)
    assert sorted(metadata.topics["ck-orders"].partitions) == [0, 1, 2, 3, 4]

    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert sorted(op.name for op in cluster.authorized_operations) == [
        "ALTER",
        "ALTER_CONFIGS",
        "CLUSTER_ACTION",
        "CREATE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]  # Kafka's cluster operations, as librdkafka's own admin test expects
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.port)]
    assert len(cluster.cluster_id) == 22

    assert admin.delete_topics(["ck-orders"])["ck-orders"].result(10) is None
    assert "ck-orders" not in admin.list_topics(timeout=10).topics


def test_confluent_kafka_errors(memory_broker: BrokerProcess) -> None:
    """confluent-kafka sees the exact error codes of bad creations and changes."""
    admin = AdminClient({"bootstrap.servers": memory_broker.bootstrap})
    admin.create_topics([NewTopic("dup", 1, 1)])["dup"].result(10)
    failures = admin.create_topics(
        [
            NewTopic("dup", 1, 1),
            NewTopic("bad-config", 1, 1, config={"no.such.config": "1"}),
            NewTopic("bad-value", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("three-replicas", 1, 3),
            NewTopic("bad/name", 1, 1),
        ]
    )
    codes = {}
    for name, future in failures.items():
        with pytest.raises(KafkaException) as info:
            future.result(10)
        codes[name] = info.value.args[0].code()
    assert codes == {
        "dup": 36,  # TOPIC_ALREADY_EXISTS
        "bad-config": 40,  # INVALID_CONFIG
        "bad-value": 40,
        "three-replicas": 38,  # INVALID_REPLICATION_FACTOR
        "bad/name": 17,  # INVALID_TOPIC_EXCEPTION
    }
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions("dup", 1)])["dup"].result(10)
    assert info.value.args[0].code() == 37  # INVALID_PARTITIONS
    with pytest.raises(KafkaException) as info:
        admin.delete_topics(["missing"])["missing"].result(10)
    assert info.value.args[0].code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    resource = ConfigResource(
        ResourceType.TOPIC,
        "dup",
        incremental_configs=[
            ConfigEntry("retention.ms", "-5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([resource])[resource].result(10)
    assert info.value.args[0].code() == 40  # INVALID_CONFIG


def test_confluent_kafka_broker_configs(memory_broker: BrokerProcess) -> None:
    """confluent-kafka: broker configs, a dynamic default reaching topics, read-only refused."""
    admin = AdminClient({"bootstrap.servers": memory_broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(10)
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source, hours.is_read_only) == (
        "168",
        ConfigSource.DEFAULT_CONFIG.value,
        True,
    )
    assert configs["log.retention.ms"].value is None
    assert not configs["log.retention.ms"].is_read_only
    assert configs["num.partitions"].value == "1"

    altered = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.BROKER,
                "1",
                incremental_configs=[
                    ConfigEntry(
                        "log.retention.ms", "60000", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )
    assert [f.result(10) for f in altered.values()] == [None]
    admin.create_topics([NewTopic("inherits", 1, 1)])["inherits"].result(10)
    topic = ConfigResource(ResourceType.TOPIC, "inherits")
    retention = admin.describe_configs([topic])[topic].result(10)["retention.ms"]
    assert (retention.value, retention.source) == (
        "60000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert [(s.name, s.value, s.source) for s in retention.synonyms.values()] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    readonly = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.BROKER,
                "1",
                incremental_configs=[
                    ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    )
    with pytest.raises(KafkaException) as info:
        next(iter(readonly.values())).result(10)
    assert info.value.args[0].code() == 42  # INVALID_REQUEST, as Kafka (KAFKA-13609)
    assert (
        info.value.args[0].str() == "Cannot update these configs dynamically: Set(num.partitions)"
    )


# ---- kafka-python


def test_kafka_python_topic_lifecycle(broker: BrokerProcess) -> None:
    """kafka-python: the lifecycle, both alter APIs, cluster and log dirs."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        created = admin.create_topics(
            {"kp-orders": {"num_partitions": 2, "configs": {"retention.ms": "5000"}}}
        )
        (topic,) = created["topics"]
        assert (topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (
            0,
            2,
            1,
        )
        assert sorted(topic["configs"]) == ALL_TOPIC_CONFIGS
        assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        resource = KpConfigResource(KpResourceType.TOPIC, "kp-orders")
        configs = admin.describe_configs([resource], config_filter="all")["topic"]["kp-orders"]
        assert sorted(configs) == ALL_TOPIC_CONFIGS
        assert configs["retention.ms"]["value"] == "5000"
        assert configs["segment.bytes"] == {
            "value": "1073741824",
            "read_only": False,
            "config_source": "DEFAULT_CONFIG",
            "is_sensitive": False,
            "synonyms": [],
            "config_type": "INT",
            "documentation": None,
        }

        # IncrementalAlterConfigs (SET), then the legacy AlterConfigs (replaces every override)
        admin.alter_configs(
            [KpConfigResource(KpResourceType.TOPIC, "kp-orders", configs={"segment.ms": "60000"})]
        )
        modified = admin.describe_configs([resource])["topic"]["kp-orders"]
        assert {k: v["value"] for k, v in modified.items()} == {
            "retention.ms": "5000",
            "segment.ms": "60000",
        }
        admin.alter_configs(
            [KpConfigResource(KpResourceType.TOPIC, "kp-orders", configs={"retention.ms": "9000"})],
            incremental=False,
            raise_on_unknown=False,
        )
        modified = admin.describe_configs([resource])["topic"]["kp-orders"]
        # kafka-python re-sends the other modified keys, as AlterConfigs replaces them all
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
            "retention.ms": ("9000", "DYNAMIC_TOPIC_CONFIG"),
            "segment.ms": ("60000", "DYNAMIC_TOPIC_CONFIG"),
        }

        admin.create_partitions({"kp-orders": 3})
        (described,) = admin.describe_topics(["kp-orders"])
        assert len(described["partitions"]) == 3

        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1
        assert cluster["brokers"] == [
            {"broker_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}
        ]

        (entry,) = admin.describe_log_dirs()
        assert entry["broker"] == 1
        (log_dir,) = entry["log_dirs"]
        expected_dir = (
            "(memory)"
            if broker.data_dir is None
            else os.path.abspath(os.path.join(broker.data_dir, "logs"))
        )
        assert log_dir["log_dir"] == expected_dir
        assert log_dir["topics"] == [
            {
                "name": "kp-orders",
                "partitions": [
                    {
                        "partition_index": i,
                        "partition_size": 0,
                        "offset_lag": 0,
                        "is_future_key": False,
                    }
                    for i in range(3)
                ],
            }
        ]
        if broker.data_dir is None:
            assert (log_dir["total_bytes"], log_dir["usable_bytes"]) == (-1, -1)
        else:
            assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0

        deleted = admin.delete_topics(["kp-orders"])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("kp-orders", 0)]
        assert "kp-orders" not in admin.list_topics()
    finally:
        admin.close()


# ---- aiokafka


def test_aiokafka_topic_lifecycle(broker: BrokerProcess) -> None:
    """aiokafka: the lifecycle with the legacy AlterConfigs replacing overrides."""

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            await admin.create_topics(
                [AioNewTopic("aio-orders", 1, 1, topic_configs={"cleanup.policy": "compact"})]
            )
            responses = await admin.describe_configs(
                [AioConfigResource(AioResourceType.TOPIC, "aio-orders")]
            )
            entries = {e[0]: (e[1], e[3]) for r in responses for res in r.resources for e in res[4]}
            assert sorted(entries) == ALL_TOPIC_CONFIGS
            assert entries["cleanup.policy"][0] == "compact"
            assert entries["retention.ms"][0] == "604800000"

            await admin.alter_configs(
                [
                    AioConfigResource(
                        AioResourceType.TOPIC, "aio-orders", configs={"retention.ms": "1234"}
                    )
                ]
            )
            # AlterConfigs replaces the whole set: the cleanup.policy override is gone
            responses = await admin.describe_configs(
                [
                    AioConfigResource(
                        AioResourceType.TOPIC,
                        "aio-orders",
                        configs={"retention.ms": None, "cleanup.policy": None},
                    )
                ]
            )
            entries = {e[0]: (e[1], e[3]) for r in responses for res in r.resources for e in res[4]}
            assert entries == {"retention.ms": ("1234", 1), "cleanup.policy": ("delete", 5)}

            await admin.create_partitions({"aio-orders": AioNewPartitions(total_count=2)})
            topics = await admin.describe_topics(["aio-orders"])
            assert len(topics[0]["partitions"]) == 2

            cluster = await admin.describe_cluster()
            assert cluster["controller_id"] == 1
            assert cluster["brokers"][0]["port"] == broker.port

            await admin.delete_topics(["aio-orders"])
            assert "aio-orders" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())
