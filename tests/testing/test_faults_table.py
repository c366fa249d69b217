"""The fault table alone: what it plans for each request, and how counts are used up."""

from __future__ import annotations

import pytest

from kafkette.errors import CoordinatorNotAvailableError, NotEnoughReplicasError
from kafkette.protocol.messages import (
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    ProduceRequest,
)
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.server.faults.table import NO_FAULT, FaultPlan, FaultTable, api_key, error_response


def produce(topic: str, *partitions: int) -> ProduceRequest:
    data = [PartitionProduceData(index=p) for p in partitions]
    return ProduceRequest(acks=-1, topic_data=[TopicProduceData(name=topic, partition_data=data)])


def test_api_names_and_keys() -> None:
    assert api_key("Produce") == 0
    assert api_key("findcoordinator") == 10
    assert api_key("ProduceRequest") == 0
    assert api_key(12) == 12
    with pytest.raises(ValueError, match="'Produc' is not a Kafka API name"):
        api_key("Produc")


def test_fail_times_then_nothing() -> None:
    table = FaultTable()
    assert not table.active
    table.fail("Produce", NotEnoughReplicasError, times=2)
    assert table.active
    request = produce("t", 0)
    assert table.plan(1, FetchRequest()) == NO_FAULT  # another API: untouched
    assert table.plan(0, request) == FaultPlan(error_code=19)
    assert table.plan(0, request) == FaultPlan(error_code=19)
    assert table.plan(0, request) == NO_FAULT
    assert not table.active


def test_fail_matches_topic_and_partition() -> None:
    table = FaultTable()
    table.fail("Produce", 19, times=None, topic="t", partition=1)
    assert table.plan(0, produce("t", 0)) == NO_FAULT
    assert table.plan(0, produce("u", 1)) == NO_FAULT
    assert table.plan(0, produce("t", 0, 1)) == FaultPlan(error_code=19)
    assert table.plan(0, produce("t", 1)) == FaultPlan(error_code=19)  # times=None: always
    table.clear()
    assert table.plan(0, produce("t", 1)) == NO_FAULT


def test_fetch_by_topic_id_matches_by_name() -> None:
    import uuid

    topic_id = uuid.uuid4()
    table = FaultTable(lambda tid: "t" if tid == topic_id else None)
    table.fail("Fetch", NotEnoughReplicasError, topic="t")
    request = FetchRequest(
        topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition=0)])]
    )
    assert table.plan(1, request) == FaultPlan(error_code=19)


def test_disconnect_first_and_alone() -> None:
    table = FaultTable()
    table.fail("Heartbeat", 15)
    table.disconnect()
    assert table.plan(12, HeartbeatRequest()) == FaultPlan(disconnect=True)
    assert table.plan(12, HeartbeatRequest()) == FaultPlan(error_code=15)


def test_delay_drop_and_throttle_combine() -> None:
    table = FaultTable()
    table.delay("Produce", 0.25, times=1)
    table.drop_response("Produce")
    table.throttle(40)
    assert table.plan(0, produce("t", 0)) == FaultPlan(
        delay_s=0.25, drop_response=True, throttle_ms=40
    )
    assert table.plan(0, produce("t", 0)) == FaultPlan(throttle_ms=40)
    table.throttle(0)
    assert not table.active


def test_always_is_spelled_as_on_the_command_line() -> None:
    """``times="always"`` (any case) arms a fault until cleared, as ``--fault
    fail:Produce:NOT_ENOUGH_REPLICAS:always`` does; None means the same."""
    table = FaultTable()
    table.fail("Produce", NotEnoughReplicasError, times="always")
    request = produce("t", 0)
    for _ in range(5):
        assert table.plan(0, request) == FaultPlan(error_code=19)
    table.clear()
    table.disconnect("Produce", times="ALWAYS")  # type: ignore[arg-type]
    table.delay("Fetch", 0.5)
    assert [(f.kind, f.api_key, f.remaining) for f in table.armed()] == [
        ("disconnect", 0, None),
        ("delay", 1, None),
    ]


def test_bad_arguments_are_refused() -> None:
    table = FaultTable()
    with pytest.raises(ValueError, match="Heartbeat requests name no partitions"):
        table.fail("Heartbeat", 15, topic="t")
    with pytest.raises(ValueError, match="has no Kafka error code"):
        table.fail("Produce", 0)
    with pytest.raises(ValueError, match="times is a whole number, at least 1, or 'always', got 0"):
        table.drop_response("Produce", times=0)
    with pytest.raises(ValueError, match="got 'forever'"):
        table.fail("Produce", 19, times="forever")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a partition needs its topic"):
        table.fail("Produce", 19, partition=0)
    assert table.armed() == []


def test_error_responses_name_each_partition() -> None:
    response = error_response(produce("t", 0, 2), NotEnoughReplicasError.code)
    partitions = response.responses[0].partition_responses  # type: ignore[attr-defined]
    assert [(p.index, p.error_code, p.base_offset) for p in partitions] == [
        (0, 19, -1),
        (2, 19, -1),
    ]
    found = error_response(
        FindCoordinatorRequest(coordinator_keys=["g"]), CoordinatorNotAvailableError.code
    )
    assert found.error_code == 15  # type: ignore[attr-defined]
    assert [(c.key, c.error_code) for c in found.coordinators] == [("g", 15)]  # type: ignore[attr-defined]
    assert error_response(HeartbeatRequest(), 27).error_code == 27  # type: ignore[attr-defined]
