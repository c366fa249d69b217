"""ACLs on ``kafkette serve --authorizer`` over SASL: confluent-kafka's and our admin
clients manage them, and producers, consumers and committers get exactly what the
ACLs allow (checked against the log, not only the error)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.admin import NewTopic, OffsetSpec
from kafkette.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from kafkette.structs import OffsetAndMetadata
from tests.brokers import BrokerProcess

USERS = {"admin": "admin-pw", "alice": "alice-pw"}


def as_user(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def confluent(broker: BrokerProcess, user: str) -> dict[str, Any]:
    config = as_user(broker, user)
    config["sasl.mechanisms"] = config.pop("sasl.mechanism")
    return config


def allow(
    principal: str,
    operation: AclOperation,
    name: str,
    kind: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    args = ["--authorizer", "--set", "super.users=User:admin"]
    for user, password in USERS.items():
        args += ["--sasl-user", f"{user}:{password}"]
    process = BrokerProcess(tmp_path / "data", args=tuple(args))
    try:
        yield process.start()
    finally:
        process.close()


def end_offset(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.LATEST}, timeout=10).all()[tp].offset


def test_confluent_kafka_creates_describes_and_deletes_acls(broker: BrokerProcess) -> None:
    admin = ConfluentAdmin(confluent(broker, "admin"))
    write = CkBinding(
        CkResource.TOPIC,
        "orders",
        CkPattern.LITERAL,
        "User:alice",
        "*",
        CkOperation.WRITE,
        CkPermission.ALLOW,
    )
    read = CkBinding(
        CkResource.GROUP,
        "app-",
        CkPattern.PREFIXED,
        "User:alice",
        "*",
        CkOperation.READ,
        CkPermission.ALLOW,
    )
    for future in admin.create_acls([write, read], request_timeout=10).values():
        assert future.result() is None

    everything = CkFilter(
        CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
    )
    listed = admin.describe_acls(everything, request_timeout=10).result()
    assert sorted(map(str, listed)) == sorted(map(str, [write, read]))
    groups = CkFilter(
        CkResource.GROUP, "app-1", CkPattern.MATCH, None, None, CkOperation.ANY, CkPermission.ANY
    )
    assert [str(b) for b in admin.describe_acls(groups, request_timeout=10).result()] == [str(read)]

    deleted = admin.delete_acls([groups], request_timeout=10)
    assert [str(b) for b in next(iter(deleted.values())).result()] == [str(read)]
    assert [str(b) for b in admin.describe_acls(everything, request_timeout=10).result()] == [
        str(write)
    ]

    # alice may not manage ACLs (no ALTER on the cluster).
    alice = ConfluentAdmin(confluent(broker, "alice"))
    denied = alice.create_acls([read], request_timeout=10)
    with pytest.raises(KafkaException) as raised:
        next(iter(denied.values())).result()
    assert raised.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"


def test_a_principal_without_write_produces_nothing(broker: BrokerProcess) -> None:
    with AdminClient(as_user(broker, "admin")) as admin:
        admin.create_topics([NewTopic("orders", 1)], timeout=10).all()
        refused = Producer(as_user(broker, "alice"))
        with refused, pytest.raises(TopicAuthorizationFailedError):
            refused.send("orders", b"refused").result(10)
        ck_errors: list[str] = []
        ck = ConfluentProducer(confluent(broker, "alice"))
        ck.produce(
            "orders", b"refused too", on_delivery=lambda err, _: ck_errors.append(err.name())
        )
        ck.flush(10)
        assert ck_errors == ["TOPIC_AUTHORIZATION_FAILED"]
        assert end_offset(admin, "orders") == 0

        admin.create_acls(
            [allow("User:alice", AclOperation.WRITE, "ord", pattern=PatternType.PREFIXED)],
            timeout=10,
        ).all()
        with Producer(as_user(broker, "alice")) as producer:
            metadata = producer.send("orders", b"allowed").result(10)
        assert (metadata.partition, metadata.offset) == (0, 0)
        assert end_offset(admin, "orders") == 1


def test_committing_needs_read_on_the_group(broker: BrokerProcess) -> None:
    with AdminClient(as_user(broker, "admin")) as admin:
        admin.create_topics([NewTopic("orders", 1)], timeout=10).all()
        admin.create_acls([allow("User:alice", AclOperation.READ, "orders")], timeout=10).all()
        tp = TopicPartition("orders", 0)
        with Consumer(
            as_user(broker, "alice"), group_id="billing", enable_auto_commit=False
        ) as consumer:
            consumer.assign([tp])
            with pytest.raises(GroupAuthorizationFailedError):
                consumer.commit({tp: OffsetAndMetadata(5, "")})
        assert admin.list_consumer_group_offsets("billing", timeout=10).all() == {}

        admin.create_acls(
            [allow("User:alice", AclOperation.READ, "billing", ResourceType.GROUP)], timeout=10
        ).all()
        with Consumer(
            as_user(broker, "alice"), group_id="billing", enable_auto_commit=False
        ) as consumer:
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(5, "")})
        assert admin.list_consumer_group_offsets("billing", timeout=10).all()[tp].offset == 5


def test_our_admin_client_manages_acls_and_they_survive_a_restart(tmp_path: Path) -> None:
    args = ["--authorizer", "--set", "super.users=User:admin"]
    for user, password in USERS.items():
        args += ["--sasl-user", f"{user}:{password}"]
    process = BrokerProcess(tmp_path / "data", args=tuple(args))
    bindings = [
        allow("User:alice", AclOperation.READ, "orders"),
        allow("User:alice", AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER),
    ]
    try:
        process.start()
        with AdminClient(as_user(process, "admin")) as admin:
            assert admin.create_acls(bindings, timeout=10).all() == dict.fromkeys(bindings)
        with AdminClient(as_user(process, "alice")) as admin:
            with pytest.raises(ClusterAuthorizationFailedError):
                admin.create_acls([allow("User:alice", AclOperation.ALL, "*")], timeout=10).all()
            assert admin.describe_acls(timeout=10) == bindings  # DESCRIBE on the cluster
        process.stop()
        process.start()
        with AdminClient(as_user(process, "admin")) as admin:
            assert (
                admin.describe_acls(AclBindingFilter(resource_type=ResourceType.TOPIC), timeout=10)
                == bindings[:1]
            )
            removed = admin.delete_acls(
                [AclBindingFilter(principal="User:alice")], timeout=10
            ).all()
            assert list(removed.values()) == [bindings]
            assert admin.describe_acls(timeout=10) == []
    finally:
        process.close()


def test_describe_cluster_lists_the_principals_cluster_operations(broker: BrokerProcess) -> None:
    admin = ConfluentAdmin(confluent(broker, "admin"))
    described = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=10
    ).result()
    assert sorted(op.name for op in described.authorized_operations) == sorted(
        [
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
        ]
    )
    granted = admin.create_acls(
        [
            CkBinding(
                CkResource.BROKER,
                "kafka-cluster",
                CkPattern.LITERAL,
                "User:alice",
                "*",
                CkOperation.ALTER,
                CkPermission.ALLOW,
            )
        ],
        request_timeout=10,
    )
    for future in granted.values():
        assert future.result() is None
    alice = ConfluentAdmin(confluent(broker, "alice"))
    mine = alice.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
    # ALTER implies DESCRIBE, and DescribeCluster lists operations only with DESCRIBE.
    assert sorted(op.name for op in mine.authorized_operations) == ["ALTER", "DESCRIBE"]
