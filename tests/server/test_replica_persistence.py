"""A disk broker standing for several nodes keeps each partition's replicas across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    MetadataRequest,
    MetadataResponse,
)
from kafkette.protocol.messages.create_partitions_request import CreatePartitionsTopic
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.server import Broker, BrokerConfig
from kafkette.server.nodes import numbered_nodes
from tests.server.dataplane import call

pytestmark = pytest.mark.anyio


def three_nodes(data_dir: str, count: int = 3) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir))
    broker.nodes = numbered_nodes([("127.0.0.1", 9000 + i) for i in range(count)])
    return broker


async def described(broker: Broker) -> list[tuple[int, list[int], list[int]]]:
    answer = await call(broker, MetadataRequest(topics=[MetadataRequestTopic(name="orders")]), 12)
    assert isinstance(answer, MetadataResponse)
    return [(p.leader_id, p.replica_nodes, p.isr_nodes) for p in answer.topics[0].partitions]


async def test_replicas_survive_a_restart(tmp_path: Path) -> None:
    broker = three_nodes(str(tmp_path))
    created = await call(
        broker,
        CreateTopicsRequest(topics=[CreatableTopic("orders", 2, 3)], timeout_ms=5000),
        7,
    )
    assert created.topics[0].error_code == 0
    grown = await call(
        broker,
        CreatePartitionsRequest(topics=[CreatePartitionsTopic("orders", 3, None)], timeout_ms=5000),
        3,
    )
    assert grown.results[0].error_code == 0
    before = await described(broker)
    assert before == [
        (3, [3, 1, 2], [3, 1, 2]),
        (1, [1, 2, 3], [1, 2, 3]),
        (2, [2, 3, 1], [2, 3, 1]),
    ]
    await broker.cluster.save_topics()
    broker.close()

    reopened = three_nodes(str(tmp_path))
    try:
        assert await described(reopened) == before
    finally:
        reopened.close()
    # Fewer nodes than the replicas name: the missing ones are left out.
    fewer = three_nodes(str(tmp_path), count=2)
    try:
        assert await described(fewer) == [
            (1, [1, 2], [1, 2]),
            (1, [1, 2], [1, 2]),
            (2, [2, 1], [2, 1]),
        ]
    finally:
        fewer.close()
