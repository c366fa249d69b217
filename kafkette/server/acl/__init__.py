"""Authorization: Kafka's ACL model and standard authorizer.

:mod:`~kafkette.server.acl.model` holds bindings and filters,
:mod:`~kafkette.server.acl.authorizer` the decisions,
:mod:`~kafkette.server.acl.store` the file a broker with a data directory keeps
them in.
"""

from kafkette.server.acl.authorizer import AclAuthorizer
from kafkette.server.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "CLUSTER_NAME",
    "AclAuthorizer",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
]
