"""Who is asking and what they may do: the connection's principal and Kafka's
standard authorizer.

:mod:`~kafkette.server.acl.principal` holds the authenticated principal of the
connection a request arrived on, :mod:`kafkette.acl` the bindings and filters
(shared with the admin client), :mod:`~kafkette.server.acl.authorizer` the
decisions, :mod:`~kafkette.server.acl.store` the file a broker with a data
directory keeps them in. Imports only ``kafkette.acl`` and ``errors``.
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
