"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), version 0 (every
version Kafka defines): the broker's SCRAM users (:mod:`kafkette.server.sasl.users`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.errors import ClusterAuthorizationFailedError
from kafkette.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkette.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from kafkette.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.sasl.users import Deletion, Upsertion

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(DescribeUserScramCredentialsRequest)
async def handle_describe_user_scram_credentials(
    broker: Broker, ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.allows(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ClusterAuthorizationFailedError()
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=refused.code, error_message=refused.description
        )
    names = None if request.users is None else [user.name for user in request.users]
    results = broker.scram_users.describe(names)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        results=[
            DescribeUserScramCredentialsResult(
                user=result.user,
                error_code=0 if result.error is None else result.error.code,
                error_message=None if result.error is None else result.error.detail,
                credential_infos=[
                    CredentialInfo(mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in result.mechanisms
                ],
            )
            for result in results
        ],
    )


@handler(AlterUserScramCredentialsRequest)
async def handle_alter_user_scram_credentials(
    broker: Broker, ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not ctx.allows(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ClusterAuthorizationFailedError()
        users = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                AlterUserScramCredentialsResult(user, refused.code, refused.description)
                for user in users
            ],
        )
    results = broker.scram_users.alter(
        [Deletion(d.name, d.mechanism) for d in request.deletions],
        [
            Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
            for u in request.upsertions
        ],
    )
    await broker.cluster.files_saved()  # the credentials are on disk before the answer
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(
                user=result.user,
                error_code=0 if result.error is None else result.error.code,
                error_message=None if result.error is None else result.error.detail,
            )
            for result in results
        ],
    )
