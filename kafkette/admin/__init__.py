"""The admin client: topics, partitions, configs, records and offsets."""

from kafkette.admin.client import AsyncAdminClient
from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import (
    AlterConfigOp,
    AlterOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    CreatedTopic,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    Outcome,
    PartitionDescription,
    ResourceType,
    Results,
    TopicDescription,
)

__all__ = [
    "AdminClient",
    "AlterConfigOp",
    "AlterOp",
    "AsyncAdminClient",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "CreatedTopic",
    "ListOffsetsResultInfo",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "Outcome",
    "PartitionDescription",
    "ResourceType",
    "Results",
    "TopicDescription",
]
