"""Authorization: Kafka's ACL model and standard authorizer.

:mod:`kafkette.acl` holds bindings and filters (shared with the admin client),
:mod:`~kafkette.server.acl.authorizer` the decisions,
:mod:`~kafkette.server.acl.store` the file a broker with a data directory keeps
them in.
"""

from kafkette.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.server.acl.authorizer import AclAuthorizer

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
