"""Which answers ask the client to hold back its requests (KIP-219).

A broker over a quota sets ``throttle_time_ms`` in its answers. Before
KIP-219 it also held the answer back that long itself; since, for the
versions below, it answers at once and mutes the connection, and expects the
client to send nothing more on it until the time has passed (Java's
``AbstractResponse.shouldClientThrottle``; Java's client then treats the
node as not ready). For older versions, and APIs not listed, the client only
reports the value.
"""

from __future__ import annotations

from kafkette.protocol.messages import API_NAMES
from kafkette.protocol.schema import Response

_CLIENT_THROTTLES_FROM_BY_NAME = {
    "Produce": 6,
    "Fetch": 8,
    "ListOffsets": 3,
    "Metadata": 6,
    "OffsetCommit": 4,
    "OffsetFetch": 4,
    "FindCoordinator": 2,
    "JoinGroup": 3,
    "Heartbeat": 2,
    "LeaveGroup": 2,
    "SyncGroup": 2,
    "DescribeGroups": 2,
    "ListGroups": 2,
    "ApiVersions": 2,
    "CreateTopics": 3,
    "DeleteTopics": 2,
    "DeleteRecords": 1,
    "InitProducerId": 1,
    "AddPartitionsToTxn": 1,
    "AddOffsetsToTxn": 1,
    "EndTxn": 1,
    "TxnOffsetCommit": 1,
    "DescribeAcls": 1,
    "CreateAcls": 1,
    "DeleteAcls": 1,
    "DescribeConfigs": 2,
    "AlterConfigs": 1,
    "AlterReplicaLogDirs": 1,
    "DescribeLogDirs": 1,
    "CreatePartitions": 1,
    "CreateDelegationToken": 1,
    "RenewDelegationToken": 1,
    "ExpireDelegationToken": 1,
    "DescribeDelegationToken": 1,
    "DeleteGroups": 1,
    "ElectLeaders": 0,
    "IncrementalAlterConfigs": 0,
    "AlterPartitionReassignments": 0,
    "ListPartitionReassignments": 0,
    "OffsetDelete": 0,
    "DescribeUserScramCredentials": 0,
    "AlterUserScramCredentials": 0,
    "DescribeTopicPartitions": 0,
}
# By name, not by the request classes: reading 43 classes' API_KEY imported their
# generated modules (125 ms of every client's import, measured with -X importtime).
CLIENT_THROTTLES_FROM: dict[int, int] = {
    key: _CLIENT_THROTTLES_FROM_BY_NAME[name]
    for key, name in API_NAMES.items()
    if name in _CLIENT_THROTTLES_FROM_BY_NAME
}
"""API key: the first version whose answer's throttle the client must observe."""


def client_throttle_ms(api_key: int, version: int, response: Response) -> int:
    """How long the client must send nothing more on the connection after ``response``
    (an answer to ``api_key`` at ``version``): its ``throttle_time_ms`` where KIP-219
    asks the client to hold back, else 0."""
    throttle: int = getattr(response, "throttle_time_ms", 0)
    if throttle <= 0 or version < CLIENT_THROTTLES_FROM.get(api_key, 1 << 15):
        return 0
    return throttle
