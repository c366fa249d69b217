"""ACL bindings and filters: Kafka's access-control list model, shared by the
admin client (``create_acls``, ``describe_acls``, ``delete_acls``) and the
broker's authorizer (:mod:`kafkette.server.acl`).

An :class:`AclBinding` says that a principal (``User:alice``, or ``User:*`` for
everyone) from a host (or ``*``) may (ALLOW) or may not (DENY) perform an
operation on the resources a pattern names: one resource (LITERAL), every
resource whose name starts with a prefix (PREFIXED), or every resource of the
type (LITERAL ``*``). An :class:`AclBindingFilter` selects bindings for
DescribeAcls and DeleteAcls; its ANY values match everything, and the pattern
type MATCH selects the bindings that apply to one resource name.

The numbers are the protocol's (Kafka's ``ResourceType``, ``PatternType``,
``AclOperation`` and ``AclPermissionType``), so requests convert without
tables.
"""

from __future__ import annotations

import enum
from typing import TypeVar

import attrs

WILDCARD = "*"
"""A LITERAL resource name matching every resource of its type, and the host
(and ``User:*`` principal) matching every host (principal)."""

WILDCARD_PRINCIPAL = "User:*"

CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=enum.IntEnum)


def _enum_value(kind: type[E], value: int) -> E:
    """The member of ``kind`` numbered ``value``; UNKNOWN for a number Kafka
    does not define (a newer client's), which validation then refuses."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


@attrs.frozen
class AclBinding:
    """One ACL: a resource pattern and an access-control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_wire(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """A binding from a request's numbers (unknown numbers become UNKNOWN)."""
        return cls(
            _enum_value(ResourceType, resource_type),
            resource_name,
            _enum_value(PatternType, pattern_type),
            principal,
            host,
            _enum_value(AclOperation, operation),
            _enum_value(AclPermissionType, permission),
        )

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


def new_binding_error(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be created (INVALID_REQUEST), or None: Kafka's
    checks of CreateAcls, in Kafka's order and words."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {binding.permission.name}"
    if not binding.resource_name:
        return "Invalid empty resource name"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    return principal_error(binding.principal)


def principal_error(principal: str) -> str | None:
    """Why ``principal`` is not ``Type:name`` (Kafka's ``KafkaPrincipal`` form)."""
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return f"Invalid principal {principal!r}: expected TYPE:NAME, e.g. User:alice"
    return None


@attrs.frozen
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes.

    None (a name, principal or host) and the ANY values match everything.
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def from_wire(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        """A filter from a request's numbers (unknown numbers become UNKNOWN)."""
        return cls(
            _enum_value(ResourceType, resource_type),
            resource_name,
            _enum_value(PatternType, pattern_type),
            principal,
            host,
            _enum_value(AclOperation, operation),
            _enum_value(AclPermissionType, permission),
        )

    def error(self) -> str | None:
        """Why this filter is refused (INVALID_REQUEST), or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` is one this filter selects."""
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            # The bindings that would apply to the named resource.
            if binding.pattern_type == PatternType.PREFIXED:
                return self.resource_name is None or self.resource_name.startswith(
                    binding.resource_name
                )
            return self.resource_name is None or binding.resource_name in (
                self.resource_name,
                WILDCARD,
            )
        if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name

    def _matches_entry(self, binding: AclBinding) -> bool:
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (AclOperation.ANY, binding.operation)
            and self.permission in (AclPermissionType.ANY, binding.permission)
        )
