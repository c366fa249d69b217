"""DescribeCluster (60) and DescribeLogDirs (35).

The cluster is the nodes the broker core stands for (one by default, its own
controller; with ``--nodes`` the live ones, the first of them controller),
with their ``broker.rack``. Its log directory is
``<data dir>/logs`` on disk; in memory there is none, so DescribeLogDirs
reports the pseudo directory :data:`MEMORY_LOG_DIR` with the partitions'
sizes and no total/usable bytes (-1).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import ClusterAuthorizationFailedError, UnsupportedEndpointTypeError
from kafkette.protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafkette.protocol.messages.describe_cluster_response import DescribeClusterBroker
from kafkette.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.handlers.metadata import cluster_operations, listed_brokers

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

BROKERS_ENDPOINT = 1
MEMORY_LOG_DIR = "(memory)"
"""The log directory name a broker storing topics in memory reports."""


@handler(DescribeClusterRequest)
async def handle_describe_cluster(
    broker: Broker, ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    endpoint_type = request.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT
    if endpoint_type != BROKERS_ENDPOINT:
        error = UnsupportedEndpointTypeError(
            "This broker serves the brokers endpoint type only (1)."
        )
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=error.code,
            error_message=error.detail,
            endpoint_type=endpoint_type,
            cluster_id=broker.cluster_id,
        )
    listed, controller = listed_brokers(broker)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=controller,
        brokers=[DescribeClusterBroker(n, host, port, rack) for n, host, port, rack in listed],
        cluster_authorized_operations=cluster_operations(
            ctx, request.include_cluster_authorized_operations
        ),
    )


def log_dir(broker: Broker) -> str:
    """The log directory this broker reports."""
    if broker.config.data_dir is None:
        return MEMORY_LOG_DIR
    return os.path.abspath(os.path.join(broker.config.data_dir, "logs"))


@handler(DescribeLogDirsRequest)
async def handle_describe_log_dirs(
    broker: Broker, ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not ctx.allows(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ClusterAuthorizationFailedError.code, results=[]
        )
    cluster = broker.cluster
    wanted: dict[str, set[int] | None]
    if request.topics is None:
        wanted = dict.fromkeys(cluster.topics)
    else:
        wanted = {}
        for entry in request.topics:
            previous = wanted.get(entry.topic)
            wanted[entry.topic] = (previous or set()) | set(entry.partitions)
    topics = []
    for name, partitions in wanted.items():
        topic = cluster.topics.get(name)
        if topic is None:
            continue  # Kafka leaves out what this broker does not host
        described = [
            DescribeLogDirsPartition(
                partition_index=p.index,
                partition_size=p.log.size_in_bytes,
                offset_lag=0,
                is_future_key=False,
            )
            for p in topic.partitions
            if partitions is None or p.index in partitions
        ]
        if described:
            topics.append(DescribeLogDirsTopic(name=name, partitions=described))
    path = log_dir(broker)
    total = usable = -1
    if broker.config.data_dir is not None and os.path.isdir(path):
        usage = shutil.disk_usage(path)
        total, usable = usage.total, usage.free
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=0,
        results=[
            DescribeLogDirsResult(
                error_code=0, log_dir=path, topics=topics, total_bytes=total, usable_bytes=usable
            )
        ],
    )
