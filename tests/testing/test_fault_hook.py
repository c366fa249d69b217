"""The runtime fault hook's wire form (server/faults/hook.py) and the fault texts it
shares with ``kafkette serve --fault``: served by a memory:// cluster whose table is
opened to the network as ``--enable-fault-injection`` does, so no process is started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkette import AdminClient
from kafkette.admin import AlterConfigOp, AlterOp, ConfigResource, ResourceType
from kafkette.errors import (
    ERRORS,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    NotEnoughReplicasError,
)
from kafkette.protocol.messages import API_NAMES, ProduceRequest
from kafkette.server.faults.hook import ARMED
from kafkette.server.faults.table import (
    Fault,
    FaultSpec,
    FaultTable,
    RemoteControl,
    parse_fault_spec,
)
from kafkette.testing import MemoryCluster, RemoteFaults

PRODUCE, FETCH, FIND_COORDINATOR = 0, 1, 10
BROKER = ConfigResource(ResourceType.BROKER, "")


@pytest.mark.parametrize(
    ("text", "spec", "canonical"),
    [
        (
            "Produce:NOT_ENOUGH_REPLICAS:3",
            FaultSpec("fail", PRODUCE, 19, 3),
            "fail:Produce:NOT_ENOUGH_REPLICAS:3",
        ),
        (
            "fail:produce:19",
            FaultSpec("fail", PRODUCE, 19, 1),
            "fail:Produce:NOT_ENOUGH_REPLICAS:1",
        ),
        (
            "fail:Produce:NOT_ENOUGH_REPLICAS:always:orders:2",
            FaultSpec("fail", PRODUCE, 19, None, topic="orders", partition=2),
            None,
        ),
        ("drop_response:Produce:2", FaultSpec("drop_response", PRODUCE, times=2), None),
        ("drop_response:0", FaultSpec("drop_response", PRODUCE), "drop_response:Produce:1"),
        (
            "delay:Fetch:0.25",
            FaultSpec("delay", FETCH, times=None, seconds=0.25),
            "delay:Fetch:0.25:always",
        ),
        ("delay:Fetch:2:1", FaultSpec("delay", FETCH, times=1, seconds=2.0), "delay:Fetch:2.0:1"),
        ("disconnect", FaultSpec("disconnect", None), "disconnect:*:1"),
        ("disconnect:*:always", FaultSpec("disconnect", None, times=None), None),
        ("disconnect:FindCoordinator:2", FaultSpec("disconnect", FIND_COORDINATOR, times=2), None),
        ("throttle:250", FaultSpec("throttle", ms=250), None),
    ],
)
def test_fault_texts_and_their_canonical_form(
    text: str, spec: FaultSpec, canonical: str | None
) -> None:
    parsed = parse_fault_spec(text)
    assert parsed == spec
    assert str(parsed) == (canonical or text)
    assert parse_fault_spec(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Produce", "expected KIND:ARGS with KIND one of fail, drop_response"),
        ("fail:Produce", "expected fail:API:ERROR"),
        ("fail:Produce:19:1:t:0:9", "expected fail:API:ERROR"),
        ("fail:Produce:19:0", "TIMES is a whole number, at least 1, or 'always'"),
        ("fail:Produce:19:1:t:x", "PARTITION is a whole number"),
        ("fail:Heartbeat:15:1:t", "Heartbeat requests name no partitions"),
        ("fail:Metadata:3", "cannot answer Metadata"),
        ("drop_response:Produc", "'Produc' is not a Kafka API name"),
        ("drop_response", "expected drop_response:API"),
        ("delay:Fetch", "expected delay:API:SECONDS"),
        ("delay:Fetch:soon", "SECONDS is a number"),
        ("delay:Fetch:-1", "SECONDS is between 0 and 3600"),
        ("delay:Fetch:nan", "SECONDS is between 0 and 3600"),
        ("disconnect:Produce:1:2:3", "expected disconnect"),
        ("throttle:-5", "expected throttle:MS"),
        ("throttle:2147483648", "expected throttle:MS"),
        ("throttle::", "an empty field"),
    ],
)
def test_bad_fault_texts(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault_spec(text)


def test_a_spec_arms_what_the_table_method_arms() -> None:
    by_spec, by_method = FaultTable(), FaultTable()
    for text in ("fail:Produce:19:2:t:1", "drop_response:Produce", "delay:Fetch:0.5", "disconnect"):
        parse_fault_spec(text).arm(by_spec)
    by_method.fail("Produce", NotEnoughReplicasError, 2, "t", 1)
    by_method.drop_response("Produce")
    by_method.delay("Fetch", 0.5)
    by_method.disconnect()
    assert by_spec.armed() == by_method.armed()
    assert [FaultSpec.of(f).fault() for f in by_spec.armed()] == by_spec.armed()


@pytest.fixture
def open_cluster() -> Iterator[MemoryCluster]:
    """A memory:// cluster whose faults may be armed over the protocol."""
    with MemoryCluster() as cluster:
        cluster.faults.remote = RemoteControl()
        yield cluster


def _alter(servers: str, *ops: AlterConfigOp, validate_only: bool = False) -> KafkaError | None:
    # no KIP-714 request of its own, which could meet a fault armed by the alter
    with AdminClient(bootstrap_servers=servers, enable_metrics_push=False) as admin:
        results = admin.incremental_alter_configs(
            {BROKER: list(ops)}, validate_only=validate_only, timeout=10.0
        )
    return results[BROKER].error


def test_validate_only_checks_without_arming(open_cluster: MemoryCluster) -> None:
    op = AlterConfigOp("kafkette.fault.fail", "Produce:NOT_ENOUGH_REPLICAS:3")
    assert _alter(open_cluster.bootstrap_servers, op, validate_only=True) is None
    assert open_cluster.faults.armed() == []
    error = _alter(
        open_cluster.bootstrap_servers,
        AlterConfigOp("kafkette.fault.fail", "Produce:NOT_ENOUGH"),
        validate_only=True,
    )
    assert isinstance(error, InvalidConfigError)
    assert error.detail == (
        "kafkette.fault.fail=Produce:NOT_ENOUGH: 'NOT_ENOUGH' is not a Kafka error name "
        "(e.g. NOT_ENOUGH_REPLICAS)"
    )


def test_one_request_arms_several_kinds_all_or_none(open_cluster: MemoryCluster) -> None:
    servers = open_cluster.bootstrap_servers
    error = _alter(
        servers,
        AlterConfigOp("kafkette.fault.drop_response", "Produce:2"),
        AlterConfigOp("kafkette.fault.delay", "Fetch:oops"),
    )
    assert isinstance(error, InvalidConfigError)
    assert error.detail == "kafkette.fault.delay=Fetch:oops: SECONDS is a number, got 'oops'"
    assert open_cluster.faults.armed() == []  # the good one was not armed either
    assert (
        _alter(
            servers,
            AlterConfigOp("kafkette.fault.drop_response", "Produce:2"),
            AlterConfigOp("kafkette.fault.disconnect", ""),
            AlterConfigOp("kafkette.fault.throttle", "30"),
        )
        is None
    )
    assert open_cluster.faults.armed() == [Fault("drop", PRODUCE, 2), Fault("disconnect", None)]
    assert open_cluster.faults.throttle_ms == 30


@pytest.mark.parametrize(
    ("ops", "error", "detail"),
    [
        (
            [
                AlterConfigOp("kafkette.fault.fail", "Produce:19"),
                AlterConfigOp("log.retention.ms", "1"),
            ],
            InvalidRequestError,
            "log.retention.ms: a resource naming kafkette.fault.* faults names nothing else",
        ),
        (
            [AlterConfigOp("kafkette.fault.throttle", None, AlterOp.DELETE)],
            InvalidRequestError,
            "kafkette.fault.throttle: faults are armed with SET only",
        ),
        (
            [AlterConfigOp("kafkette.fault.explode", "now")],
            InvalidConfigError,
            "kafkette.fault.explode is not a fault (kafkette.fault.fail, ...)",
        ),
        (
            [AlterConfigOp("kafkette.fault.fail", None)],
            InvalidRequestError,
            "Null value not supported for : kafkette.fault.fail",
        ),
    ],
)
def test_malformed_hook_requests_get_kafka_errors(
    open_cluster: MemoryCluster, ops: list[AlterConfigOp], error: type[KafkaError], detail: str
) -> None:
    got = _alter(open_cluster.bootstrap_servers, *ops)
    assert type(got) is error
    assert got.detail == detail
    assert open_cluster.faults.armed() == []
    assert open_cluster.faults.throttle_ms == 0


def test_the_broker_id_resource_works_and_a_bad_name_is_refused(
    open_cluster: MemoryCluster,
) -> None:
    with AdminClient(bootstrap_servers=open_cluster.bootstrap_servers) as admin:
        own = ConfigResource(ResourceType.BROKER, "1")
        results = admin.incremental_alter_configs(
            {own: [AlterConfigOp("kafkette.fault.drop_response", "Produce")]}, timeout=10.0
        )
        assert results[own].error is None
        described = admin.describe_configs([own], timeout=10.0)[own].result()
    assert described[ARMED].value == "drop_response:Produce:1"
    assert described[ARMED].read_only
    # the broker's other configs are all still described
    assert "log.retention.ms" in described
    with RemoteFaults(open_cluster.bootstrap_servers) as faults:
        assert faults.armed() == [Fault("drop", PRODUCE, 1)]
    with AdminClient(bootstrap_servers=open_cluster.bootstrap_servers) as admin:
        bad = ConfigResource(ResourceType.BROKER, "x")
        results = admin.incremental_alter_configs(
            {bad: [AlterConfigOp("kafkette.fault.disconnect", "")]}, timeout=10.0
        )
    error = results[bad].error
    assert isinstance(error, InvalidRequestError)
    assert (
        error.detail == "Unexpected broker id, expected one of [1] or empty string, but received x"
    )
    assert open_cluster.faults.armed() == [Fault("drop", PRODUCE, 1)]


def test_armed_is_not_described_on_a_broker_that_did_not_opt_in() -> None:
    with (
        MemoryCluster() as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        described = admin.describe_configs([BROKER], timeout=10.0)[BROKER].result()
        assert ARMED not in described
        with (
            RemoteFaults(cluster.bootstrap_servers) as faults,
            pytest.raises(KafkaError) as refused,
        ):
            faults.armed()
        assert "lists no kafkette.fault.armed" in str(refused.value)


def test_remote_faults_checks_arguments_before_sending() -> None:
    faults = RemoteFaults("127.0.0.1:1")  # nothing listens: a check that sent would time out
    with pytest.raises(ValueError, match="'Produc' is not a Kafka API name"):
        faults.fail("Produc", NotEnoughReplicasError)
    with pytest.raises(ValueError, match="Heartbeat requests name no partitions"):
        faults.fail("Heartbeat", 15, topic="t")
    with pytest.raises(ValueError, match="times is a whole number, at least 1, or 'always', got 0"):
        faults.drop_response("Produce", times=0)
    with pytest.raises(ValueError, match="a delay is not negative"):
        faults.delay("Produce", -1)
    with pytest.raises(ValueError, match="a throttle time is not negative"):
        faults.throttle(-1)
    faults.close()


_TIMES = st.one_of(st.none(), st.integers(1, 10**6))
_FAILABLE_WITH_TOPIC = [PRODUCE, FETCH, 2, 8]  # Produce, Fetch, ListOffsets, OffsetCommit
_ERRORS = st.sampled_from(sorted(code for code in ERRORS if code > 0))
_TOPICS = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
_SPECS = st.one_of(
    st.builds(
        FaultSpec,
        kind=st.just("fail"),
        api_key=st.sampled_from(_FAILABLE_WITH_TOPIC),
        error_code=_ERRORS,
        times=_TIMES,
        topic=st.one_of(st.none(), _TOPICS),
    ),
    st.builds(
        FaultSpec,
        kind=st.just("fail"),
        api_key=st.sampled_from(_FAILABLE_WITH_TOPIC),
        error_code=_ERRORS,
        times=_TIMES,
        topic=_TOPICS,
        partition=st.integers(0, 2**31 - 1),
    ),
    st.builds(
        FaultSpec,
        kind=st.just("drop_response"),
        api_key=st.sampled_from(sorted(API_NAMES)),
        times=_TIMES,
    ),
    st.builds(
        FaultSpec,
        kind=st.just("delay"),
        api_key=st.sampled_from(sorted(API_NAMES)),
        times=_TIMES,
        seconds=st.floats(0, 3600, allow_nan=False),
    ),
    st.builds(
        FaultSpec,
        kind=st.just("disconnect"),
        api_key=st.one_of(st.none(), st.sampled_from(sorted(API_NAMES))),
        times=_TIMES,
    ),
    st.builds(FaultSpec, kind=st.just("throttle"), ms=st.integers(0, 2**31 - 1)),
)


@given(_SPECS)
def test_every_spec_survives_its_text_and_arms_the_same_fault(spec: FaultSpec) -> None:
    """What ``--fault`` and the hook read back is what was written, and a fault read
    out of a table (``armed()`` over the wire) arms the same fault again."""
    assert parse_fault_spec(str(spec)) == spec
    table = FaultTable()
    spec.arm(table)
    if spec.kind == "throttle":
        assert table.armed() == []
        assert table.throttle_ms == spec.ms
    else:
        [armed] = table.armed()
        assert armed == spec.fault()
        assert FaultSpec.of(armed) == spec


def test_a_disconnect_may_name_a_node() -> None:
    spec = parse_fault_spec("disconnect:Produce:always:2")
    assert (spec.kind, spec.api_key, spec.times, spec.node) == ("disconnect", 0, None, 2)
    assert str(spec) == "disconnect:Produce:always:2"
    assert parse_fault_spec(str(spec)) == spec
    table = FaultTable()
    spec.arm(table)
    assert table.plan(0, ProduceRequest(), node=1).disconnect is False
    assert table.plan(0, ProduceRequest(), node=2).disconnect is True
    with pytest.raises(ValueError, match="NODE is a node id"):
        parse_fault_spec("disconnect:Produce:1:two")
