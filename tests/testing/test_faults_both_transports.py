"""The fault acceptance tests of #17, one body each, on both transports: a memory://
cluster (``MemoryCluster.faults``) and ``kafkette serve --enable-fault-injection``
over TCP (:class:`~kafkette.testing.RemoteFaults`, the runtime hook)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import anyio
import attrs
import pytest

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.errors import (
    CoordinatorNotAvailableError,
    InvalidConfigError,
    NotEnoughReplicasError,
)
from kafkette.protocol.messages import MetadataRequest
from kafkette.server.faults.table import Fault, FaultTable
from kafkette.testing import MemoryCluster, RemoteFaults
from kafkette.testing.pytest_plugin import ExternalKafka, ServeProcess
from tests.brokers import BrokerProcess

PRODUCE, FETCH, FIND_COORDINATOR = 0, 1, 10
TRANSPORTS = ["memory", "serve"]


@attrs.frozen
class Target:
    """Where a test's clients connect, and the faults of that broker."""

    servers: str
    faults: FaultTable | RemoteFaults


@pytest.fixture(scope="module")
def serve_broker() -> Iterator[BrokerProcess]:
    """One ``kafkette serve --enable-fault-injection`` for the module's TCP cases."""
    with BrokerProcess(args=("--enable-fault-injection",)) as broker:
        yield broker


@pytest.fixture(params=TRANSPORTS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """A fresh memory:// cluster, or the module's broker over TCP (faults cleared after)."""
    if request.param == "memory":
        with MemoryCluster() as cluster:
            yield Target(cluster.bootstrap_servers, cluster.faults)
        return
    broker: BrokerProcess = request.getfixturevalue("serve_broker")
    with RemoteFaults(broker.bootstrap) as faults:
        try:
            yield Target(broker.bootstrap, faults)
        finally:
            faults.clear()


def _topic(servers: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with AdminClient(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(name, 1)], timeout=10.0).all()
    return name


def _read(servers: str, topic: str, count: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the partition's records, once ``count`` arrived; the end
    offset must be ``count`` (nothing more was written)."""
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        got: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            got += [(r.offset, r.value) for r in consumer.poll(timeout=0.2).get(tp, [])]
        assert consumer.end_offsets([tp], timeout=10.0) == {tp: count}
    return got


def test_an_idempotent_producer_writes_each_record_once_when_answers_are_lost(
    target: Target,
) -> None:
    topic = _topic(target.servers)
    target.faults.drop_response("Produce", times=2)
    assert target.faults.armed() == [Fault("drop", PRODUCE, 2)]
    with Producer(bootstrap_servers=target.servers, enable_idempotence=True) as producer:
        futures = [producer.send(topic, b"v%d" % i, partition=0) for i in range(5)]
        offsets = [f.result(20).offset for f in futures]
    assert offsets == [0, 1, 2, 3, 4]
    assert _read(target.servers, topic, 5) == [(i, b"v%d" % i) for i in range(5)]
    assert target.faults.armed() == []  # both lost answers happened


def test_not_enough_replicas_three_times_is_retried(target: Target) -> None:
    topic = _topic(target.servers)
    target.faults.fail("Produce", NotEnoughReplicasError, times=3)
    assert target.faults.armed() == [Fault("fail", PRODUCE, 3, NotEnoughReplicasError.code)]
    with Producer(bootstrap_servers=target.servers) as producer:
        assert producer.send(topic, b"v", partition=0).result(20).offset == 0
    assert target.faults.armed() == []
    assert _read(target.servers, topic, 1) == [(0, b"v")]


def test_coordinator_not_available_is_retried_by_a_group_consumer(target: Target) -> None:
    topic = _topic(target.servers)
    with Producer(bootstrap_servers=target.servers) as producer:
        for value in (b"a", b"b", b"c"):
            producer.send(topic, value, partition=0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    target.faults.fail("FindCoordinator", CoordinatorNotAvailableError, times=2)
    code = CoordinatorNotAvailableError.code
    assert target.faults.armed() == [Fault("fail", FIND_COORDINATOR, 2, code)]
    tp = TopicPartition(topic, 0)
    with Consumer(
        bootstrap_servers=target.servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(timeout=0.2).get(tp, [])]
        consumer.commit(timeout=10.0)
    assert values == [b"a", b"b", b"c"]
    assert target.faults.armed() == []
    with AdminClient(bootstrap_servers=target.servers) as admin:
        committed = admin.list_consumer_group_offsets(group, timeout=10.0).all()
    assert {p: o.offset for p, o in committed.items() if o is not None} == {tp: 3}


def test_a_delay_holds_the_request_at_least_that_long(target: Target) -> None:
    topic = _topic(target.servers)
    with Producer(bootstrap_servers=target.servers) as producer:
        assert producer.send(topic, b"warm", partition=0).result(20).offset == 0
        target.faults.delay("Produce", 0.5, times=1)
        started = time.monotonic()
        assert producer.send(topic, b"held", partition=0).result(20).offset == 1
        held = time.monotonic() - started
        started = time.monotonic()
        assert producer.send(topic, b"free", partition=0).result(20).offset == 2
        free = time.monotonic() - started
    assert held >= 0.5
    assert free < 0.5
    assert target.faults.armed() == []


def test_a_disconnect_closes_the_connection_and_the_client_reconnects(target: Target) -> None:
    topic = _topic(target.servers)
    with Producer(bootstrap_servers=target.servers, enable_idempotence=True) as producer:
        assert producer.send(topic, b"before", partition=0).result(20).offset == 0
        target.faults.disconnect("Produce", times=2)
        assert target.faults.armed() == [Fault("disconnect", PRODUCE, 2)]
        assert producer.send(topic, b"after", partition=0).result(20).offset == 1
    assert target.faults.armed() == []  # two connections were closed unserved
    assert _read(target.servers, topic, 2) == [(0, b"before"), (1, b"after")]


async def _metadata_throttle(servers: str) -> int:
    async with KafkaClient(AdminConfig.from_user(bootstrap_servers=servers)) as client:
        await client.bootstrap()
        node = await client.any_node()
        response = await client.send(node, MetadataRequest(topics=[]))
    return int(response.throttle_time_ms)  # type: ignore[union-attr]


def test_a_throttle_appears_in_the_answers(target: Target) -> None:
    target.faults.throttle(250)
    assert anyio.run(_metadata_throttle, target.servers) == 250
    target.faults.throttle(0)
    assert anyio.run(_metadata_throttle, target.servers) == 0


def test_clear_ends_every_fault(target: Target) -> None:
    topic = _topic(target.servers)
    target.faults.fail("Produce", NotEnoughReplicasError, times=None)
    target.faults.delay("Fetch", 5.0)
    target.faults.disconnect("Fetch", times=None)
    target.faults.drop_response("Produce", times=3)
    target.faults.throttle(100)
    assert target.faults.armed() == [
        Fault("fail", PRODUCE, None, NotEnoughReplicasError.code),
        Fault("delay", FETCH, None, delay_s=5.0),
        Fault("disconnect", FETCH, None),
        Fault("drop", PRODUCE, 3),
    ]
    target.faults.clear()
    assert target.faults.armed() == []
    assert anyio.run(_metadata_throttle, target.servers) == 0
    started = time.monotonic()
    with Producer(
        bootstrap_servers=target.servers, retries=0, enable_idempotence=False
    ) as producer:
        assert producer.send(topic, b"v", partition=0).result(20).offset == 0
    assert _read(target.servers, topic, 1) == [(0, b"v")]
    assert time.monotonic() - started < 5.0  # no 5 s fetch delay left


@pytest.fixture(params=TRANSPORTS)
def closed_hook(request: pytest.FixtureRequest) -> Iterator[tuple[str, FaultTable | None]]:
    """A broker that did not opt in: a memory:// cluster (whose faults are armed in
    process only), or ``kafkette serve`` without ``--enable-fault-injection``; with the
    in-process table where there is one."""
    if request.param == "memory":
        with MemoryCluster() as cluster:
            yield cluster.bootstrap_servers, cluster.faults
        return
    with BrokerProcess() as broker:
        yield broker.bootstrap, None


def test_the_hook_is_refused_on_a_broker_that_did_not_opt_in(
    closed_hook: tuple[str, FaultTable | None],
) -> None:
    servers, table = closed_hook
    topic = _topic(servers)
    with RemoteFaults(servers) as faults:
        with pytest.raises(InvalidConfigError) as refused:
            faults.fail("Produce", NotEnoughReplicasError, times=3)
        assert refused.value.detail == (
            "kafkette.fault.fail: fault injection is off on this broker "
            "(start kafkette serve with --enable-fault-injection)"
        )
        with pytest.raises(InvalidConfigError) as refused:
            faults.clear()
        assert refused.value.detail is not None
        assert refused.value.detail.startswith("kafkette.fault.clear: fault injection is off")
    if table is not None:
        assert table.armed() == []
    # nothing was armed: a producer without retries is served at once
    with Producer(bootstrap_servers=servers, retries=0, enable_idempotence=False) as producer:
        assert producer.send(topic, b"v", partition=0).result(20).offset == 0


def test_the_kafka_broker_fixture_arms_faults_on_its_broker(kafka_broker: ServeProcess) -> None:
    """The plugin's session broker runs with --enable-fault-injection: ``.faults`` arms
    there (and the test clears what it armed: the broker is shared)."""
    servers = kafka_broker.bootstrap_servers
    topic = _topic(servers)
    kafka_broker.faults.fail("Produce", NotEnoughReplicasError)
    try:
        assert kafka_broker.faults.armed() == [
            Fault("fail", PRODUCE, 1, NotEnoughReplicasError.code)
        ]
        with Producer(bootstrap_servers=servers, retries=0, enable_idempotence=False) as producer:
            with pytest.raises(NotEnoughReplicasError):
                producer.send(topic, b"refused", partition=0).result(20)
            assert producer.send(topic, b"stored", partition=0).result(20).offset == 0
    finally:
        kafka_broker.faults.clear()


def test_kafka_bootstrap_at_a_kafkette_serve_has_faults_too(serve_broker: BrokerProcess) -> None:
    """What ``kafka_broker`` is under ``--kafka-bootstrap``: its ``.faults`` reach the
    servers given, when they are a kafkette serve --enable-fault-injection."""
    external = ExternalKafka(serve_broker.bootstrap)
    try:
        external.faults.throttle(40)
        assert anyio.run(_metadata_throttle, serve_broker.bootstrap) == 40
        external.faults.clear()
        assert anyio.run(_metadata_throttle, serve_broker.bootstrap) == 0
    finally:
        external._close_faults()


def test_clear_gets_through_whatever_is_armed(target: Target) -> None:
    """The hook's own requests are never faulted: a test that closes every connection
    and holds every config change can still clear, and the broker serves again."""
    topic = _topic(target.servers)
    target.faults.delay("IncrementalAlterConfigs", 60.0)
    target.faults.drop_response("IncrementalAlterConfigs", times=None)
    target.faults.disconnect(times=None)
    started = time.monotonic()
    target.faults.clear()
    assert time.monotonic() - started < 5.0
    assert target.faults.armed() == []
    with Producer(bootstrap_servers=target.servers) as producer:
        assert producer.send(topic, b"v", partition=0).result(20).offset == 0
