"""Request handlers, one module per API or group of APIs.

Importing this package registers every handler with the broker core.
"""

from kafkette.server.handlers import (
    acls,
    api_versions,
    cluster_info,
    configs,
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_records,
    fetch,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    reassignments,
    sasl,
    scram_users,
    telemetry,
    topics,
    transactions,
    write_txn_markers,
)

__all__ = [
    "acls",
    "api_versions",
    "cluster_info",
    "configs",
    "consumer_group_describe",
    "consumer_group_heartbeat",
    "delete_records",
    "fetch",
    "groups",
    "init_producer_id",
    "list_offsets",
    "metadata",
    "offset_for_leader_epoch",
    "produce",
    "reassignments",
    "sasl",
    "scram_users",
    "telemetry",
    "topics",
    "transactions",
    "write_txn_markers",
]
