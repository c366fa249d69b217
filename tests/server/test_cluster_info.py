"""DescribeCluster and DescribeLogDirs in process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkette.protocol.messages import DescribeClusterRequest, DescribeLogDirsRequest
from kafkette.protocol.messages.describe_log_dirs_request import DescribableLogDirTopic
from kafkette.server import Broker, BrokerConfig
from kafkette.server.handlers.metadata import CLUSTER_OPERATIONS
from tests.server.dataplane import FakeClock, batch, call, make_broker

pytestmark = pytest.mark.anyio

UNSUPPORTED_ENDPOINT_TYPE = 115


async def test_describe_cluster_v0_and_v1() -> None:
    """One broker, its own controller, at the advertised address; only the brokers endpoint."""
    broker = Broker(BrokerConfig(node_id=4, advertised_host="kafka.local", advertised_port=9999))
    response = await call(broker, DescribeClusterRequest(), 0)
    assert (response.error_code, response.cluster_id, response.controller_id) == (
        0,
        broker.cluster_id,
        4,
    )
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (4, "kafka.local", 9999, None)
    ]
    assert response.cluster_authorized_operations == -(2**31)

    response = await call(
        broker, DescribeClusterRequest(include_cluster_authorized_operations=True), 1
    )
    assert (response.endpoint_type, response.cluster_authorized_operations) == (
        1,
        CLUSTER_OPERATIONS,
    )
    # Kafka's cluster operations: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
    # ALTER_CONFIGS, IDEMPOTENT_WRITE
    bits = response.cluster_authorized_operations
    assert [op for op in range(32) if bits >> op & 1] == [5, 7, 8, 9, 10, 11, 12]
    response = await call(broker, DescribeClusterRequest(endpoint_type=2), 1)
    assert (response.error_code, response.brokers) == (UNSUPPORTED_ENDPOINT_TYPE, [])


async def test_describe_log_dirs_memory() -> None:
    """The memory pseudo dir lists partition sizes, filtered by the request."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("a", 2)
    broker.cluster.create_topic("b", 1)
    broker.cluster.topics["a"].partitions[1].log.append(batch([(b"k", b"value")]))
    size = broker.cluster.topics["a"].partitions[1].log.size_in_bytes
    assert size > 0

    response = await call(broker, DescribeLogDirsRequest(topics=None), 4)
    (result,) = response.results
    assert (result.error_code, result.log_dir, result.total_bytes, result.usable_bytes) == (
        0,
        "(memory)",
        -1,
        -1,
    )
    assert [
        (
            t.name,
            [
                (p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                for p in t.partitions
            ],
        )
        for t in result.topics
    ] == [("a", [(0, 0, 0, False), (1, size, 0, False)]), ("b", [(0, 0, 0, False)])]

    wanted = [DescribableLogDirTopic("a", [1, 5]), DescribableLogDirTopic("missing", [0])]
    response = await call(broker, DescribeLogDirsRequest(topics=wanted), 0)
    (result,) = response.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
        ("a", [1])
    ]
    response = await call(broker, DescribeLogDirsRequest(topics=[]), 1)
    assert response.results[0].topics == []


async def test_describe_log_dirs_disk(tmp_path: Path) -> None:
    """On disk the log dir is <data dir>/logs with its filesystem totals."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    try:
        broker.cluster.create_topic("t", 1)
        response = await call(broker, DescribeLogDirsRequest(topics=None), 4)
        (result,) = response.results
        assert result.log_dir == os.path.join(str(tmp_path), "logs")
        assert result.total_bytes >= result.usable_bytes > 0
        assert [t.name for t in result.topics] == ["t"]
    finally:
        broker.close()
