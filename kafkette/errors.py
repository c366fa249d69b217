"""Kafka's errors: one table of error codes, one exception class per code.

The wire protocol reports failures as int16 error codes. ``ERRORS`` is the
table of every code Apache Kafka defines (up to Kafka 4.4): its name, whether
Kafka considers it retriable, and Kafka's default description. Each code other
than 0 (``NO_ERROR``) has an exception class, named after the code in CamelCase with
``Error`` appended and a trailing ``_EXCEPTION`` or ``_ERROR`` dropped
(``NOT_LEADER_OR_FOLLOWER`` -> ``NotLeaderOrFollowerError``,
``KAFKA_STORAGE_ERROR`` -> ``KafkaStorageError``). A class states only its code;
its ``name``, ``description``, ``retriable`` flag and docstring come from the
table, and defining a class whose base disagrees with the table's retriable
flag fails at import.

Hierarchy::

    Exception
    └── KafkaError                      code, name, retriable, description, detail
        ├── RetriableError              a retry may succeed
        │   ├── KafkaTimeoutError       (client) an operation ran out of time
        │   │   └── BufferExhaustedError    (client) buffer.memory stayed full
        │   │                                   for max.block.ms
        │   └── KafkaConnectionError    (client) no usable connection to a broker
        ├── ApiError                    a Kafka error code; one subclass per code
        │   ├── RefreshRetriableError   (also RetriableError) refresh, then retry
        │   │   ├── InvalidMetadataError    the client's metadata is stale:
        │   │   │   │                       refresh it, then retry
        │   │   │   ├── NotLeaderOrFollowerError, UnknownTopicOrPartitionError,
        │   │   │   └── LeaderNotAvailableError, ... (13 codes)
        │   │   ├── CoordinatorNotAvailableError    find the coordinator again
        │   │   └── NotCoordinatorError
        │   ├── AuthorizationError      the principal lacks an ACL (5 codes)
        │   ├── AuthenticationError     SASL failures (3 codes), and
        │   │   └── SslAuthenticationError  (client) a failed TLS handshake
        │   ├── OffsetOutOfRangeError, CorruptMessageError, ... (one per code;
        │   │                           the retriable ones also subclass RetriableError)
        │   └── UnknownKafkaError       a code this version does not know
        ├── ConfigError                 (client, also ValueError) a bad or unknown
        │                               setting, named
        ├── IllegalStateError           (client) a call the current state forbids
        └── SerializationError          (client) a key or value that would not
                                        (de)serialize

``error_for_code`` maps a code to its class, ``make_error`` builds an instance
and ``raise_for_code`` raises it (doing nothing for ``NO_ERROR``). A code missing
from the table (a newer broker's) becomes an ``UnknownKafkaError`` carrying the
number, never a crash.

Malformed bytes are reported by the sans-I/O layer as
``kafkette.protocol.errors.ProtocolError``, which is not a ``KafkaError``: the
broker and the client translate those at their boundary (a bad record batch
becomes ``CORRUPT_MESSAGE``, an unknown API version ``UNSUPPORTED_VERSION``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import attrs

__all__ = [
    "ERRORS",
    "NO_ERROR",
    "ApiError",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "BufferExhaustedError",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "ConcurrentTransactionsError",
    "ConfigError",
    "ControllerIdNotRegisteredError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "ErrorInfo",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupDeletionFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidMetadataError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordListTooLargeError",
    "RefreshRetriableError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "RetriableError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "SerializationError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SnapshotNotFoundError",
    "SslAuthenticationError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyDescriptionUpdateFailedError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownKafkaError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "error_for_code",
    "make_error",
    "raise_for_code",
]


@attrs.frozen(slots=True)
class ErrorInfo:
    """One row of Kafka's error table."""

    code: int
    """The int16 carried in responses."""
    name: str
    """Kafka's name for the code, e.g. ``NOT_LEADER_OR_FOLLOWER``."""
    retriable: bool
    """Whether Kafka's clients treat the error as transient."""
    description: str
    """Kafka's default description (empty for ``NO_ERROR``)."""


# (code, name, retriable, description), as defined by Apache Kafka's
# org.apache.kafka.common.protocol.Errors; "retriable" is whether Kafka's
# exception for the code is a RetriableException.
# fmt: off
_ROWS: tuple[tuple[int, str, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False,
        "The server experienced an unexpected error when processing the request."),
    (0, "NONE", False, ""),
    (1, "OFFSET_OUT_OF_RANGE", False,
        "The requested offset is not within the range of offsets maintained by the server."),
    (2, "CORRUPT_MESSAGE", True,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, "The requested fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", True,
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election."),
    (6, "NOT_LEADER_OR_FOLLOWER", True,
        "For requests intended only for the leader, this error indicates that the broker is not "
        "the current leader. For requests intended for any replica, this error indicates that "
        "the broker is not a replica of the topic partition."),
    (7, "REQUEST_TIMED_OUT", True, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True,
        "The replica is not available for the requested topic-partition. Produce/Fetch requests "
        "and other requests intended only for the leader or follower return "
        "NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."),
    (10, "MESSAGE_TOO_LARGE", False,
        "The request included a message larger than the max message size the server will accept."),
    (11, "STALE_CONTROLLER_EPOCH", False, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", False,
        "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", True, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True,
        "The coordinator is loading and hence can't process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False,
        "The request attempted to perform an operation on an invalid topic."),
    (18, "RECORD_LIST_TOO_LARGE", False,
        "The request included message batch larger than the configured segment size on the "
        "server."),
    (19, "NOT_ENOUGH_REPLICAS", True,
        "Messages are rejected since there are fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True,
        "Messages are written to the log, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", False,
        "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", False, "Specified group generation id is not valid."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False,
        "The group member's supported protocols are incompatible with those of existing members "
        "or first group member tried to join with empty protocol type or empty protocol list."),
    (24, "INVALID_GROUP_ID", False, "The group id is invalid."),
    (25, "UNKNOWN_MEMBER_ID", False, "The coordinator is not aware of this member."),
    (26, "INVALID_SESSION_TIMEOUT", False,
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    (27, "REBALANCE_IN_PROGRESS", False, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", False, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False,
        "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, "Number of partitions is below 1."),
    (38, "INVALID_REPLICATION_FACTOR", False,
        "Replication factor is below 1 or larger than the number of available brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", False, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", True, "This is not the correct controller for this cluster."),
    (42, "INVALID_REQUEST", False,
        "This most likely occurs because of a request being malformed by the client library or "
        "the message was sent to an incompatible broker. See the broker logs for more details."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False,
        "The message format version on the broker does not support the request."),
    (44, "POLICY_VIOLATION", False, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False,
        "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", False, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", False,
        "The producer attempted a transactional operation in an invalid state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False,
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."),
    (51, "CONCURRENT_TRANSACTIONS", True,
        "The producer attempted to update a transaction while another concurrent operation on "
        "the same transaction was ongoing."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False,
        "The broker did not attempt to execute this operation. This may happen for batched RPCs "
        "where some operations in the batch failed, causing the broker to respond without trying "
        "the rest."),
    (56, "KAFKA_STORAGE_ERROR", True, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", False,
        "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL Authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False,
        "This exception is raised by the broker if it could not locate the producer metadata "
        "associated with the producerId in question. This could happen if, for instance, the "
        "producer's records were deleted because their retention time had elapsed. Once the last "
        "records of the producerId are removed, the producer's metadata is removed from the "
        "broker, and future appends by the producer will return this exception."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False,
        "Specified Principal is not valid Owner/Renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False,
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
        "delegation token authenticated channels."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, "The fetch session epoch is invalid."),
    (72, "LISTENER_NOT_FOUND", True,
        "There is no listener on the leader broker that matches the listener on which metadata "
        "request was processed."),
    (73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True,
        "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", True,
        "The leader epoch in the request is newer than the epoch on the broker."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False,
        "The requesting client does not support the compression type of given partition."),
    (77, "STALE_BROKER_EPOCH", False, "Broker epoch has changed."),
    (78, "OFFSET_NOT_AVAILABLE", True,
        "The leader high watermark has not caught up from a recent leader election so the "
        "offsets cannot be guaranteed to be monotonically increasing."),
    (79, "MEMBER_ID_REQUIRED", False,
        "The group member needs to have a valid member id before actually entering a consumer "
        "group."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, "The group has reached its maximum size."),
    (82, "FENCED_INSTANCE_ID", False,
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True,
        "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", True, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False,
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it."),
    (87, "INVALID_RECORD", False,
        "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False,
        "There is a newer producer with the same transactionalId which fences the current one."),
    (91, "RESOURCE_NOT_FOUND", False,
        "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False,
        "Requested credential would not meet criteria for acceptability."),
    (94, "INCONSISTENT_VOTER_SET", False,
        "Indicates that the either the sender or recipient of a voter-only request is not one of "
        "the expected voters."),
    (95, "INVALID_UPDATE_VERSION", False, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", False,
        "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False,
        "Request principal deserialization failed during forwarding. This indicates an internal "
        "error on the broker cluster security setup."),
    (98, "SNAPSHOT_NOT_FOUND", False, "Requested snapshot was not found."),
    (99, "POSITION_OUT_OF_RANGE", False,
        "Requested position is not greater than or equal to zero, and less than the size of the "
        "snapshot."),
    (100, "UNKNOWN_TOPIC_ID", True, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", False, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True,
        "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", False,
        "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True,
        "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", False, "The new ISR contains at least one ineligible replica."),
    (108, "NEW_LEADER_ELECTED", False,
        "The AlterPartition request successfully updated the partition state but the leader has "
        "changed."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False,
        "The requested offset is moved to tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", False,
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin."),
    (111, "UNRELEASED_INSTANCE_ID", False,
        "The instance ID is still used by another member in the consumer group. That member must "
        "leave first."),
    (112, "UNSUPPORTED_ASSIGNOR", False,
        "The assignor or its version range is not supported by the consumer group."),
    (113, "STALE_MEMBER_EPOCH", False,
        "The member epoch is stale. The member must retry after receiving its updated member "
        "epoch via the ConsumerGroupHeartbeat API."),
    (114, "MISMATCHED_ENDPOINT_TYPE", False,
        "The request was sent to an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, "This endpoint type is not supported yet."),
    (116, "UNKNOWN_CONTROLLER_ID", False, "This controller ID is not known."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False,
        "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (118, "TELEMETRY_TOO_LARGE", False,
        "Client sent a push telemetry request larger than the maximum size the broker will "
        "accept."),
    (119, "INVALID_REGISTRATION", False,
        "The controller has considered the broker registration to be invalid."),
    (120, "TRANSACTION_ABORTABLE", False,
        "The server encountered an error with the transaction. The client can abort the "
        "transaction to continue using this transactional ID."),
    (121, "INVALID_RECORD_STATE", False,
        "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (122, "SHARE_SESSION_NOT_FOUND", True, "The share session was not found."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, "The share session epoch is invalid."),
    (124, "FENCED_STATE_EPOCH", False,
        "The coordinator rejected the request because the state epoch did not match."),
    (125, "INVALID_VOTER_KEY", False, "The voter key doesn't match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", False, "The voter is already part of the set of voters."),
    (127, "VOTER_NOT_FOUND", False, "The voter is not part of the set of voters."),
    (128, "INVALID_REGULAR_EXPRESSION", False, "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", False,
        "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (130, "STREAMS_INVALID_TOPOLOGY", False, "The supplied topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False, "The supplied topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", False, "The supplied topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", True, "The limit of share sessions has been reached."),
    (134, "GROUP_DELETION_FAILED", False,
        "DeleteGroups could not complete; see the error message on the per-group result for "
        "details."),
    (135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", False,
        "The broker could not process the topology description update; see the error message for "
        "details."),
    (136, "CONTROLLER_ID_NOT_REGISTERED", False, "The given controller ID was not registered."),
)
# fmt: on

ERRORS: Mapping[int, ErrorInfo] = MappingProxyType({row[0]: ErrorInfo(*row) for row in _ROWS})
"""Every Kafka error code, ``NO_ERROR`` (0) included, keyed by code."""

NO_ERROR = 0
"""The error code of a successful response (Kafka's ``NONE``)."""

_BY_CODE: dict[int, type[ApiError]] = {}


# -- bases ------------------------------------------------------------------


class KafkaError(Exception):
    """Base of every kafkette error that carries Kafka semantics.

    ``code`` is the Kafka error code, or None for errors raised by the client
    itself. ``detail`` is the context given when the error was raised (a broker's
    error message, the topic-partition concerned...).
    """

    code: int | None = None
    name: str = "KAFKA_ERROR"
    retriable: bool = False
    description: str = "A Kafka error."

    def __init__(self, detail: str | None = None) -> None:
        if detail is None:
            super().__init__()
        else:
            super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        if self.code is None:
            return self.detail if self.detail is not None else self.description
        text = f"{self.name} ({self.code}): {self.description}"
        return text if self.detail is None else f"{text} ({self.detail})"


class RetriableError(KafkaError):
    """A transient error: the same operation may succeed if retried."""

    retriable = True


class ApiError(KafkaError):
    """An error that has a Kafka error code; each code has a subclass."""

    code: int

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return  # a grouping class, with no code of its own
        code = cls.code
        info = ERRORS.get(code)
        if info is None or code == NO_ERROR:
            raise TypeError(f"{cls.__name__}: {code} is not an error code in ERRORS")
        if issubclass(cls, RetriableError) != info.retriable:
            raise TypeError(f"{cls.__name__}: RetriableError base disagrees with {info.name}")
        if code in _BY_CODE:
            raise TypeError(f"{cls.__name__}: code {code} already has {_BY_CODE[code].__name__}")
        cls.name = info.name
        cls.description = info.description
        cls.retriable = info.retriable
        if cls.__doc__ is None:
            cls.__doc__ = f"{info.name} ({code}): {info.description}"
        _BY_CODE[code] = cls


class RefreshRetriableError(ApiError, RetriableError):
    """Retriable once the client refreshes what it knows (metadata, coordinator)."""


class InvalidMetadataError(RefreshRetriableError):
    """The client's metadata is stale: refresh it, then retry (Java's InvalidMetadataException)."""


class AuthorizationError(ApiError):
    """The authenticated principal is not allowed to perform the operation."""


class AuthenticationError(ApiError):
    """The client could not authenticate (SASL)."""


class UnknownKafkaError(ApiError):
    """An error code missing from ``ERRORS`` (a newer broker's, say); not retriable.

    Unlike the other classes it needs the code, as a keyword argument.
    """

    name = "UNKNOWN_ERROR_CODE"

    def __init__(self, detail: str | None = None, *, code: int) -> None:
        super().__init__(detail)
        self.code = code
        self.description = f"Error code {code} is not known to this version of kafkette."

    def __repr__(self) -> str:
        return f"UnknownKafkaError({self.detail!r}, code={self.code})"

    def __reduce__(self) -> tuple[Callable[[int, str | None], ApiError], tuple[int, str | None]]:
        return (make_error, (self.code, self.detail))


# -- one class per error code -------------------------------------------------


class UnknownServerError(ApiError):
    code = -1


class OffsetOutOfRangeError(ApiError):
    code = 1


class CorruptMessageError(ApiError, RetriableError):
    code = 2


class UnknownTopicOrPartitionError(InvalidMetadataError):
    code = 3


class InvalidFetchSizeError(ApiError):
    code = 4


class LeaderNotAvailableError(InvalidMetadataError):
    code = 5


class NotLeaderOrFollowerError(InvalidMetadataError):
    code = 6


class RequestTimedOutError(ApiError, RetriableError):
    code = 7


class BrokerNotAvailableError(ApiError):
    code = 8


class ReplicaNotAvailableError(InvalidMetadataError):
    code = 9


class MessageTooLargeError(ApiError):
    code = 10


class StaleControllerEpochError(ApiError):
    code = 11


class OffsetMetadataTooLargeError(ApiError):
    code = 12


class NetworkError(InvalidMetadataError):
    code = 13


class CoordinatorLoadInProgressError(ApiError, RetriableError):
    code = 14


class CoordinatorNotAvailableError(RefreshRetriableError):
    code = 15


class NotCoordinatorError(RefreshRetriableError):
    code = 16


class InvalidTopicError(ApiError):
    code = 17


class RecordListTooLargeError(ApiError):
    code = 18


class NotEnoughReplicasError(ApiError, RetriableError):
    code = 19


class NotEnoughReplicasAfterAppendError(ApiError, RetriableError):
    code = 20


class InvalidRequiredAcksError(ApiError):
    code = 21


class IllegalGenerationError(ApiError):
    code = 22


class InconsistentGroupProtocolError(ApiError):
    code = 23


class InvalidGroupIdError(ApiError):
    code = 24


class UnknownMemberIdError(ApiError):
    code = 25


class InvalidSessionTimeoutError(ApiError):
    code = 26


class RebalanceInProgressError(ApiError):
    code = 27


class InvalidCommitOffsetSizeError(ApiError):
    code = 28


class TopicAuthorizationFailedError(AuthorizationError):
    code = 29


class GroupAuthorizationFailedError(AuthorizationError):
    code = 30


class ClusterAuthorizationFailedError(AuthorizationError):
    code = 31


class InvalidTimestampError(ApiError):
    code = 32


class UnsupportedSaslMechanismError(AuthenticationError):
    code = 33


class IllegalSaslStateError(AuthenticationError):
    code = 34


class UnsupportedVersionError(ApiError):
    code = 35


class TopicAlreadyExistsError(ApiError):
    code = 36


class InvalidPartitionsError(ApiError):
    code = 37


class InvalidReplicationFactorError(ApiError):
    code = 38


class InvalidReplicaAssignmentError(ApiError):
    code = 39


class InvalidConfigError(ApiError):
    code = 40


class NotControllerError(ApiError, RetriableError):
    code = 41


class InvalidRequestError(ApiError):
    code = 42


class UnsupportedForMessageFormatError(ApiError):
    code = 43


class PolicyViolationError(ApiError):
    code = 44


class OutOfOrderSequenceNumberError(ApiError):
    code = 45


class DuplicateSequenceNumberError(ApiError):
    code = 46


class InvalidProducerEpochError(ApiError):
    code = 47


class InvalidTxnStateError(ApiError):
    code = 48


class InvalidProducerIdMappingError(ApiError):
    code = 49


class InvalidTransactionTimeoutError(ApiError):
    code = 50


class ConcurrentTransactionsError(ApiError, RetriableError):
    code = 51


class TransactionCoordinatorFencedError(ApiError):
    code = 52


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    code = 53


class SecurityDisabledError(ApiError):
    code = 54


class OperationNotAttemptedError(ApiError):
    code = 55


class KafkaStorageError(InvalidMetadataError):
    code = 56


class LogDirNotFoundError(ApiError):
    code = 57


class SaslAuthenticationFailedError(AuthenticationError):
    code = 58


class UnknownProducerIdError(ApiError):
    code = 59


class ReassignmentInProgressError(ApiError):
    code = 60


class DelegationTokenAuthDisabledError(ApiError):
    code = 61


class DelegationTokenNotFoundError(ApiError):
    code = 62


class DelegationTokenOwnerMismatchError(ApiError):
    code = 63


class DelegationTokenRequestNotAllowedError(ApiError):
    code = 64


class DelegationTokenAuthorizationFailedError(AuthorizationError):
    code = 65


class DelegationTokenExpiredError(ApiError):
    code = 66


class InvalidPrincipalTypeError(ApiError):
    code = 67


class NonEmptyGroupError(ApiError):
    code = 68


class GroupIdNotFoundError(ApiError):
    code = 69


class FetchSessionIdNotFoundError(ApiError, RetriableError):
    code = 70


class InvalidFetchSessionEpochError(ApiError, RetriableError):
    code = 71


class ListenerNotFoundError(InvalidMetadataError):
    code = 72


class TopicDeletionDisabledError(ApiError):
    code = 73


class FencedLeaderEpochError(InvalidMetadataError):
    code = 74


class UnknownLeaderEpochError(ApiError, RetriableError):
    code = 75


class UnsupportedCompressionTypeError(ApiError):
    code = 76


class StaleBrokerEpochError(ApiError):
    code = 77


class OffsetNotAvailableError(ApiError, RetriableError):
    code = 78


class MemberIdRequiredError(ApiError):
    code = 79


class PreferredLeaderNotAvailableError(InvalidMetadataError):
    code = 80


class GroupMaxSizeReachedError(ApiError):
    code = 81


class FencedInstanceIdError(ApiError):
    code = 82


class EligibleLeadersNotAvailableError(InvalidMetadataError):
    code = 83


class ElectionNotNeededError(InvalidMetadataError):
    code = 84


class NoReassignmentInProgressError(ApiError):
    code = 85


class GroupSubscribedToTopicError(ApiError):
    code = 86


class InvalidRecordError(ApiError):
    code = 87


class UnstableOffsetCommitError(ApiError, RetriableError):
    code = 88


class ThrottlingQuotaExceededError(ApiError, RetriableError):
    code = 89


class ProducerFencedError(ApiError):
    code = 90


class ResourceNotFoundError(ApiError):
    code = 91


class DuplicateResourceError(ApiError):
    code = 92


class UnacceptableCredentialError(ApiError):
    code = 93


class InconsistentVoterSetError(ApiError):
    code = 94


class InvalidUpdateVersionError(ApiError):
    code = 95


class FeatureUpdateFailedError(ApiError):
    code = 96


class PrincipalDeserializationFailureError(ApiError):
    code = 97


class SnapshotNotFoundError(ApiError):
    code = 98


class PositionOutOfRangeError(ApiError):
    code = 99


class UnknownTopicIdError(InvalidMetadataError):
    code = 100


class DuplicateBrokerRegistrationError(ApiError):
    code = 101


class BrokerIdNotRegisteredError(ApiError):
    code = 102


class InconsistentTopicIdError(InvalidMetadataError):
    code = 103


class InconsistentClusterIdError(ApiError):
    code = 104


class TransactionalIdNotFoundError(ApiError):
    code = 105


class FetchSessionTopicIdError(ApiError, RetriableError):
    code = 106


class IneligibleReplicaError(ApiError):
    code = 107


class NewLeaderElectedError(ApiError):
    code = 108


class OffsetMovedToTieredStorageError(ApiError):
    code = 109


class FencedMemberEpochError(ApiError):
    code = 110


class UnreleasedInstanceIdError(ApiError):
    code = 111


class UnsupportedAssignorError(ApiError):
    code = 112


class StaleMemberEpochError(ApiError):
    code = 113


class MismatchedEndpointTypeError(ApiError):
    code = 114


class UnsupportedEndpointTypeError(ApiError):
    code = 115


class UnknownControllerIdError(ApiError):
    code = 116


class UnknownSubscriptionIdError(ApiError):
    code = 117


class TelemetryTooLargeError(ApiError):
    code = 118


class InvalidRegistrationError(ApiError):
    code = 119


class TransactionAbortableError(ApiError):
    code = 120


class InvalidRecordStateError(ApiError):
    code = 121


class ShareSessionNotFoundError(ApiError, RetriableError):
    code = 122


class InvalidShareSessionEpochError(ApiError, RetriableError):
    code = 123


class FencedStateEpochError(ApiError):
    code = 124


class InvalidVoterKeyError(ApiError):
    code = 125


class DuplicateVoterError(ApiError):
    code = 126


class VoterNotFoundError(ApiError):
    code = 127


class InvalidRegularExpressionError(ApiError):
    code = 128


class RebootstrapRequiredError(ApiError):
    code = 129


class StreamsInvalidTopologyError(ApiError):
    code = 130


class StreamsInvalidTopologyEpochError(ApiError):
    code = 131


class StreamsTopologyFencedError(ApiError):
    code = 132


class ShareSessionLimitReachedError(ApiError, RetriableError):
    code = 133


class GroupDeletionFailedError(ApiError):
    code = 134


class StreamsTopologyDescriptionUpdateFailedError(ApiError):
    code = 135


class ControllerIdNotRegisteredError(ApiError):
    code = 136


# -- raised by the client, not carried on the wire -------------------------------


class KafkaTimeoutError(RetriableError):
    """An operation did not complete within its timeout (Java's TimeoutException)."""

    name = "TIMEOUT"
    description = "The operation did not complete within its timeout."


class BufferExhaustedError(KafkaTimeoutError):
    """The producer's ``buffer.memory`` stayed full for longer than ``max.block.ms``."""

    name = "BUFFER_EXHAUSTED"
    description = "The producer's buffer stayed full for longer than max.block.ms."


class KafkaConnectionError(RetriableError):
    """A connection to a broker could not be established, or was lost."""

    name = "CONNECTION"
    description = "Could not connect to the broker, or the connection was lost."


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed (Java's SslAuthenticationException): a
    certificate that does not verify, or a listener that does not speak TLS while the
    client does (or the other way round). Not retriable: the configuration must change."""

    name = "SSL_AUTHENTICATION"
    description = "The TLS handshake with the broker failed."


class ConfigError(KafkaError, ValueError):
    """A configuration setting that is unknown, missing or invalid; ``setting`` names it."""

    name = "CONFIG"
    description = "A configuration setting is unknown, missing or invalid."

    def __init__(self, setting: str, reason: str) -> None:
        super().__init__(f"configuration setting {setting!r}: {reason}")
        self.args = (setting, reason)
        self.setting = setting
        self.reason = reason


class CommitFailedError(KafkaError):
    """The group rebalanced (or fenced this member) before the commit could complete
    (Java's CommitFailedException): the partitions may now belong to another member."""

    name = "COMMIT_FAILED"
    description = (
        "The commit cannot be completed since the group has already rebalanced "
        "and assigned the partitions to another member."
    )


class IllegalStateError(KafkaError):
    """A call that the object's current state does not allow (a closed client, say)."""

    name = "ILLEGAL_STATE"
    description = "The operation is not allowed in the current state."


class SerializationError(KafkaError):
    """A key, value or header that could not be serialized or deserialized."""

    name = "SERIALIZATION"
    description = "A key, value or header could not be serialized or deserialized."


# -- lookup ------------------------------------------------------------------


def error_for_code(code: int) -> type[ApiError] | None:
    """Return the exception class for ``code``: None for ``NO_ERROR`` (0), and
    ``UnknownKafkaError`` for a code missing from ``ERRORS``.

    ``make_error`` builds the instance whatever the code.
    """
    if code == NO_ERROR:
        return None
    return _BY_CODE.get(code, UnknownKafkaError)


def make_error(code: int, detail: str | None = None) -> ApiError:
    """Build the exception for a non-zero error ``code``, with an optional ``detail``.

    Raises ``ValueError`` for ``NO_ERROR`` (0), which is not an error.
    """
    if code == NO_ERROR:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownKafkaError(detail, code=code)
    return cls(detail)


def raise_for_code(code: int, detail: str | None = None) -> None:
    """Raise the exception for ``code`` unless it is ``NO_ERROR`` (0)."""
    if code != NO_ERROR:
        raise make_error(code, detail)
