"""``kafkette serve --fault``: the fault table of MemoryCluster.faults, armed at start on
a broker over TCP; and what only TCP has of the runtime hook (``--enable-fault-injection``):
SASL super users, start-up refusals, a Kafka admin client nobody here wrote arming a fault.
The fault tests that run on both transports are in test_faults_both_transports.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.errors import ClusterAuthorizationFailedError, NotEnoughReplicasError
from kafkette.server.faults.table import FailSpec, Fault, FaultTable, parse_fail_spec
from kafkette.testing import RemoteFaults
from tests.brokers import BrokerProcess
from tests.security.servers import STORAGES, ListenerBroker, Pki, storage_args

PRODUCE, FIND_COORDINATOR = 0, 10
FAULT = ("--fault", "Produce:NOT_ENOUGH_REPLICAS:3")
BAD_FAULT = ("--fault", "Produce:NOT_ENOUGH")


def test_fault_specs() -> None:
    assert parse_fail_spec("Produce:NOT_ENOUGH_REPLICAS:3") == FailSpec(PRODUCE, 19, 3)
    assert parse_fail_spec("produce:not_enough_replicas") == FailSpec(PRODUCE, 19, 1)
    assert parse_fail_spec("FindCoordinator:15") == FailSpec(FIND_COORDINATOR, 15, 1)
    assert parse_fail_spec("0:19:2") == FailSpec(PRODUCE, 19, 2)
    assert str(parse_fail_spec("Produce:19:3")) == "Produce:NOT_ENOUGH_REPLICAS:3"
    table = FaultTable()
    parse_fail_spec("Produce:NOT_ENOUGH_REPLICAS:3").arm(table)
    [armed] = table.armed()
    assert (armed.kind, armed.api_key, armed.error_code, armed.remaining) == ("fail", 0, 19, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Produce", "expected API:ERROR"),
        ("Produce:19:3:4", "expected API:ERROR"),
        ("Produce::3", "expected API:ERROR"),
        ("Produc:19", "'Produc' is not a Kafka API name"),
        ("Produce:NOT_ENOUGH", "'NOT_ENOUGH' is not a Kafka error name"),
        ("Produce:9999", "9999 is not a Kafka error code"),
        ("Produce:NONE", "has no Kafka error code"),
        ("Produce:19:0", "TIMES is a whole number, at least 1"),
        ("Produce:19:x", "TIMES is a whole number"),
        ("Metadata:3", "cannot answer Metadata"),
    ],
)
def test_bad_fault_specs(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fail_spec(text)


def test_serve_refuses_a_bad_fault_with_status_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", *BAD_FAULT],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "--fault" in result.stderr
    assert "'NOT_ENOUGH' is not a Kafka error name" in result.stderr


def _create(bootstrap: str, topic: str) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=10.0).all()


def _values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        values: list[bytes] = []
        for _ in range(50):
            for record in consumer.poll(timeout=0.2).get(tp, []):
                assert record.value is not None
                values.append(record.value)
            if len(values) >= count:
                break
        assert consumer.end_offsets([tp], timeout=10.0) == {tp: count}
    return values


def test_a_producer_survives_not_enough_replicas_over_tcp() -> None:
    with BrokerProcess(args=FAULT) as broker:
        assert "fault armed: fail:Produce:NOT_ENOUGH_REPLICAS:3" in broker.log()
        _create(broker.bootstrap, "t")
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            futures = [producer.send("t", b"v%d" % i, partition=0) for i in range(5)]
            offsets = [f.result(20).offset for f in futures]
        assert offsets == [0, 1, 2, 3, 4]
        # the retries used up all three faulty answers: a producer without retries is served
        with Producer(
            bootstrap_servers=broker.bootstrap, retries=0, enable_idempotence=False
        ) as producer:
            assert producer.send("t", b"after", partition=0).result(20).offset == 5
        values = _values(broker.bootstrap, "t", 6)
        assert values == [b"v0", b"v1", b"v2", b"v3", b"v4", b"after"]


def test_the_fault_answers_exactly_times_requests_over_tcp() -> None:
    """Without retries the three faulty answers reach the application; the fourth
    request is served."""
    with BrokerProcess(args=FAULT) as broker:
        _create(broker.bootstrap, "t")
        with Producer(
            bootstrap_servers=broker.bootstrap, retries=0, enable_idempotence=False
        ) as producer:
            for _ in range(3):
                with pytest.raises(NotEnoughReplicasError):
                    producer.send("t", b"refused", partition=0).result(20)
            assert producer.send("t", b"stored", partition=0).result(20).offset == 0
        assert _values(broker.bootstrap, "t", 1) == [b"stored"]


def test_drop_response_armed_at_start_and_an_idempotent_producer() -> None:
    """``--fault drop_response:Produce:2``: the first two Produce answers are lost;
    the idempotent producer's retries store each record once."""
    with BrokerProcess(args=("--fault", "drop_response:Produce:2")) as broker:
        assert "fault armed: drop_response:Produce:2" in broker.log()
        _create(broker.bootstrap, "t")
        with Producer(bootstrap_servers=broker.bootstrap, enable_idempotence=True) as producer:
            futures = [producer.send("t", b"v%d" % i, partition=0) for i in range(3)]
            assert [f.result(20).offset for f in futures] == [0, 1, 2]
        assert _values(broker.bootstrap, "t", 3) == [b"v0", b"v1", b"v2"]
        assert broker.log().count("answer dropped") == 2


SASL_ARGS = (
    "--enable-fault-injection",
    "--sasl-user",
    "admin:admin-secret",
    "--sasl-user",
    "alice:alice-secret",
    "--set",
    "super.users=User:admin",
)


def _sasl(user: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": user,
        "sasl_password": f"{user}-secret",
    }


def test_with_sasl_only_super_users_arm_faults() -> None:
    with BrokerProcess(args=SASL_ARGS) as broker:
        assert "fault injection enabled for User:admin" in broker.log()
        with RemoteFaults(broker.bootstrap, **_sasl("alice")) as alice:
            with pytest.raises(ClusterAuthorizationFailedError) as refused:
                alice.fail("Produce", NotEnoughReplicasError)
            assert refused.value.detail == (
                "User:alice may not arm faults: only the broker's super.users may"
            )
            with pytest.raises(ClusterAuthorizationFailedError):
                alice.clear()
        with RemoteFaults(broker.bootstrap, **_sasl("admin")) as admin:
            assert admin.armed() == []  # alice armed nothing
            admin.fail("Produce", NotEnoughReplicasError, times=2)
            assert admin.armed() == [Fault("fail", PRODUCE, 2, NotEnoughReplicasError.code)]
            admin.clear()
            assert admin.armed() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--enable-fault-injection", "--sasl-user", "admin:pw"),
            "setting '--enable-fault-injection': with SASL users, name the principals "
            "that may arm faults in the super.users property",
        ),
        (
            ("--set", "super.users=admin"),
            "setting 'super.users': expected TYPE:NAME;TYPE:NAME, got 'admin'",
        ),
    ],
)
def test_serve_refuses_fault_injection_it_cannot_restrict(
    args: tuple[str, ...], message: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_a_kafka_admin_client_nobody_here_wrote_arms_a_fault() -> None:
    """confluent-kafka (librdkafka) arms a fault with its own incremental_alter_configs,
    on the broker resource by id, and reads what is armed with describe_configs."""
    from confluent_kafka.admin import (
        AdminClient as ConfluentAdmin,
    )
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    with BrokerProcess(args=("--enable-fault-injection",)) as broker:
        _create(broker.bootstrap, "t")
        admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(
            ConfigResource.Type.BROKER,
            "1",
            incremental_configs=[
                ConfigEntry(
                    "kafkette.fault.fail",
                    "Produce:NOT_ENOUGH_REPLICAS:1",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(20)
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
        [entries] = [f.result(20) for f in described.values()]
        assert entries["kafkette.fault.armed"].value == "fail:Produce:NOT_ENOUGH_REPLICAS:1"
        with Producer(
            bootstrap_servers=broker.bootstrap, retries=0, enable_idempotence=False
        ) as producer:
            with pytest.raises(NotEnoughReplicasError):
                producer.send("t", b"refused", partition=0).result(20)
            assert producer.send("t", b"stored", partition=0).result(20).offset == 0


def test_kafka_python_arms_a_fault_with_alter_configs() -> None:
    """kafka-python's alter_configs (IncrementalAlterConfigs against this broker) arms
    one too; it checks names against the broker's dynamic configs unless told not to."""
    from kafka.admin import ConfigResource as KafkaPythonResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    with BrokerProcess(args=("--enable-fault-injection",)) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            resource = KafkaPythonResource(
                ConfigResourceType.BROKER,
                "1",
                configs={"kafkette.fault.drop_response": "Produce:2"},
            )
            assert admin.alter_configs([resource], raise_on_unknown=False) == {
                "broker": {"1": "OK"}
            }
        finally:
            admin.close()
        with RemoteFaults(broker.bootstrap) as faults:
            assert faults.armed() == [Fault("drop", PRODUCE, 2)]


def test_super_users_without_sasl_refuse_unauthenticated_clients() -> None:
    args = ("--enable-fault-injection", "--set", "super.users=User:admin")
    with BrokerProcess(args=args) as broker, RemoteFaults(broker.bootstrap) as faults:
        with pytest.raises(ClusterAuthorizationFailedError) as refused:
            faults.throttle(10)
        assert refused.value.detail == (
            "User:ANONYMOUS may not arm faults: only the broker's super.users may"
        )
        assert faults.armed() == []  # describing what is armed needs no super user


@pytest.mark.parametrize("storage", STORAGES)
def test_a_tls_client_certificate_in_super_users_arms_faults(tmp_path: Path, storage: str) -> None:
    """The principal of a TLS client certificate counts as Kafka's does
    (``User:CN=...``): the admin's certificate arms, another's is refused."""
    pki = Pki(tmp_path)
    admin_cert, admin_key = pki.client("admin")
    other_cert, other_key = pki.client("alice")
    admin_dn = "User:CN=admin,OU=clients,O=kafkette tests"
    server = ListenerBroker(
        *storage_args(storage, tmp_path),
        "--listener",
        "SSL://127.0.0.1:0",
        *pki.server_properties("required"),
        "--enable-fault-injection",
        "--set",
        f"super.users={admin_dn}",
    ).start()
    try:

        def tls(cert: str, key: str) -> dict[str, str]:
            return {
                "security_protocol": "SSL",
                "ssl_cafile": pki.ca_file,
                "ssl_certfile": cert,
                "ssl_keyfile": key,
            }

        with RemoteFaults(server.bootstrap("SSL"), **tls(other_cert, other_key)) as alice:
            with pytest.raises(ClusterAuthorizationFailedError) as refused:
                alice.drop_response("Produce")
            assert refused.value.detail == (
                "User:CN=alice,OU=clients,O=kafkette tests may not arm faults: "
                "only the broker's super.users may"
            )
        with RemoteFaults(server.bootstrap("SSL"), **tls(admin_cert, admin_key)) as admin:
            admin.drop_response("Produce")
            assert admin.armed() == [Fault("drop", PRODUCE, 1)]
    finally:
        server.close()
