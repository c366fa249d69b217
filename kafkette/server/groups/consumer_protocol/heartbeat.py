"""A ConsumerGroupHeartbeat request and response as the coordinator reads and writes them,
and the request checks Kafka makes before touching any group.

A heartbeat is *full* when it carries every field (a member joining with epoch 0 must
send one); otherwise a field left out (None, or -1 for the rebalance timeout) means
"unchanged since my last heartbeat".
"""

from __future__ import annotations

from collections.abc import Collection

import attrs

from kafkette.errors import InvalidRequestError, UnsupportedAssignorError
from kafkette.server.groups.consumer_protocol.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
)
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.regex import compile_regex

CLIENT_MEMBER_ID_VERSION = 1
"""From this ConsumerGroupHeartbeat version the member picks its own id (KIP-1082)."""


@attrs.frozen(kw_only=True)
class HeartbeatRequest:
    """The fields of one ConsumerGroupHeartbeat, with the client's id and address."""

    group_id: str
    member_id: str = ""
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    """The partitions the member holds (TopicPartitions), None when left out."""
    client_id: str = ""
    client_host: str = ""
    api_version: int = CLIENT_MEMBER_ID_VERSION

    @property
    def is_full(self) -> bool:
        """Whether every field a full heartbeat carries is there (Kafka's rule)."""
        return self.member_epoch == JOIN_EPOCH or (
            self.rebalance_timeout_ms != -1
            and (self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None)
            and self.owned is not None
        )


@attrs.frozen
class HeartbeatResponse:
    """The answer to a heartbeat that succeeded (errors are raised as Kafka's exceptions)."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None
    """The member's assigned partitions, when a full request asked or they changed."""


def validate(request: HeartbeatRequest, assignors: Collection[str]) -> None:
    """Raise INVALID_REQUEST, UNSUPPORTED_ASSIGNOR or INVALID_REGULAR_EXPRESSION for a
    request Kafka refuses before looking at the group."""
    if not request.group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if request.instance_id == "":
        raise InvalidRequestError("InstanceId can't be empty.")
    if request.rack_id == "":
        raise InvalidRequestError("RackId can't be empty.")
    if request.rebalance_timeout_ms < -1:
        raise InvalidRequestError(
            f"RebalanceTimeoutMs must be -1 or a time in ms, got {request.rebalance_timeout_ms}."
        )
    if request.api_version >= CLIENT_MEMBER_ID_VERSION and not request.member_id:
        raise InvalidRequestError("MemberId can't be empty.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
    elif epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise InvalidRequestError(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                "when (re-)joining."
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if request.instance_id is None:
            raise InvalidRequestError("InstanceId can't be null.")
    else:
        raise InvalidRequestError(f"MemberEpoch {epoch} is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise UnsupportedAssignorError(
            f"ServerAssignor {request.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}."
        )
    if request.subscribed_topic_regex:
        compile_regex(request.subscribed_topic_regex)
