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

from kafkette.protocol import messages as m
from kafkette.protocol.schema import Response

CLIENT_THROTTLES_FROM: dict[int, int] = {
    request.API_KEY: version
    for request, version in (
        (m.ProduceRequest, 6),
        (m.FetchRequest, 8),
        (m.ListOffsetsRequest, 3),
        (m.MetadataRequest, 6),
        (m.OffsetCommitRequest, 4),
        (m.OffsetFetchRequest, 4),
        (m.FindCoordinatorRequest, 2),
        (m.JoinGroupRequest, 3),
        (m.HeartbeatRequest, 2),
        (m.LeaveGroupRequest, 2),
        (m.SyncGroupRequest, 2),
        (m.DescribeGroupsRequest, 2),
        (m.ListGroupsRequest, 2),
        (m.ApiVersionsRequest, 2),
        (m.CreateTopicsRequest, 3),
        (m.DeleteTopicsRequest, 2),
        (m.DeleteRecordsRequest, 1),
        (m.InitProducerIdRequest, 1),
        (m.AddPartitionsToTxnRequest, 1),
        (m.AddOffsetsToTxnRequest, 1),
        (m.EndTxnRequest, 1),
        (m.TxnOffsetCommitRequest, 1),
        (m.DescribeAclsRequest, 1),
        (m.CreateAclsRequest, 1),
        (m.DeleteAclsRequest, 1),
        (m.DescribeConfigsRequest, 2),
        (m.AlterConfigsRequest, 1),
        (m.AlterReplicaLogDirsRequest, 1),
        (m.DescribeLogDirsRequest, 1),
        (m.CreatePartitionsRequest, 1),
        (m.CreateDelegationTokenRequest, 1),
        (m.RenewDelegationTokenRequest, 1),
        (m.ExpireDelegationTokenRequest, 1),
        (m.DescribeDelegationTokenRequest, 1),
        (m.DeleteGroupsRequest, 1),
        (m.ElectLeadersRequest, 0),
        (m.IncrementalAlterConfigsRequest, 0),
        (m.AlterPartitionReassignmentsRequest, 0),
        (m.ListPartitionReassignmentsRequest, 0),
        (m.OffsetDeleteRequest, 0),
        (m.DescribeUserScramCredentialsRequest, 0),
        (m.AlterUserScramCredentialsRequest, 0),
        (m.DescribeTopicPartitionsRequest, 0),
    )
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
