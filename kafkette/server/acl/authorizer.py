"""Kafka's standard authorizer: who may do what, decided from ACL bindings.

:meth:`AclAuthorizer.authorize` answers one question: may ``principal``,
connected from ``host``, perform ``operation`` on the resource ``name`` of
``resource_type``? The rules are those of Kafka's ``StandardAuthorizer``:

- a super user (``super.users``) may do anything;
- the bindings that apply are those whose pattern covers the resource (the
  literal name, the literal ``*``, or a prefix of the name), whose principal is
  the caller's or ``User:*``, and whose host is the caller's or ``*``;
- a DENY that applies wins over any ALLOW;
- an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW
  of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies nothing);
- ALL stands for every operation;
- with no binding at all on the resource (for anyone),
  ``allow.everyone.if.no.acl.found`` decides (false by default: denied); with
  bindings on the resource but none for this caller, denied.

The authorizer keeps the bindings in memory and does no I/O; the broker
persists them (:mod:`kafkette.server.acl.store`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from kafkette.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

_Pattern = tuple[ResourceType, PatternType, str]


def _pattern(binding: AclBinding) -> _Pattern:
    return (binding.resource_type, binding.pattern_type, binding.resource_name)


class AclAuthorizer:
    """The ACL bindings of one cluster and the decisions they give."""

    def __init__(
        self,
        super_users: Iterable[str] = (),
        *,
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # A dict keeps creation order (DescribeAcls lists in it) and makes a
        # binding created twice one binding, as in Kafka.
        self._bindings: dict[AclBinding, None] = {}
        # The same bindings by resource pattern, so that a decision reads only
        # the patterns that can cover one name: the literal name, the literal
        # "*", and the name's prefixes of the lengths some PREFIXED pattern of
        # that resource type has (counted, to forget a length no longer used).
        self._by_pattern: dict[_Pattern, dict[AclBinding, None]] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}

    @property
    def bindings(self) -> list[AclBinding]:
        """Every binding, in creation order."""
        return list(self._bindings)

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """Add ``bindings`` (already validated); an existing one stays as it is."""
        for binding in bindings:
            if binding in self._bindings:
                continue
            self._bindings[binding] = None
            self._by_pattern.setdefault(_pattern(binding), {})[binding] = None
            if binding.pattern_type == PatternType.PREFIXED:
                lengths = self._prefix_lengths.setdefault(binding.resource_type, Counter())
                lengths[len(binding.resource_name)] += 1

    def delete(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the bindings it removed
        (a binding two filters match is reported under both, as Kafka does)."""
        matched = [self.describe(f) for f in filters]
        for bindings in matched:
            for binding in bindings:
                if binding in self._bindings:
                    self._forget(binding)
        return matched

    def _forget(self, binding: AclBinding) -> None:
        del self._bindings[binding]
        pattern = _pattern(binding)
        same_pattern = self._by_pattern[pattern]
        del same_pattern[binding]
        if not same_pattern:
            del self._by_pattern[pattern]
        if binding.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[binding.resource_type]
            lengths[len(binding.resource_name)] -= 1
            if not lengths[len(binding.resource_name)]:
                del lengths[len(binding.resource_name)]

    def _covering(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """The bindings whose pattern covers the resource ``name`` (a resource named
        ``*`` meets its literal bindings twice, which changes no decision)."""
        patterns = [
            (resource_type, PatternType.LITERAL, name),
            (resource_type, PatternType.LITERAL, WILDCARD),
        ]
        patterns.extend(
            (resource_type, PatternType.PREFIXED, name[:length])
            for length in self._prefix_lengths.get(resource_type, ())
            if length <= len(name)
        )
        for pattern in patterns:
            yield from self._by_pattern.get(pattern, ())

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``acl_filter`` selects, in creation order."""
        return [b for b in self._bindings if acl_filter.matches(b)]

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether the caller may perform ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        allowed = False
        resource_has_acls = False
        for binding in self._covering(resource_type, name):
            resource_has_acls = True
            if binding.principal not in principals or binding.host not in (WILDCARD, host):
                continue
            if not _grants(binding, operation):
                continue
            if binding.permission == AclPermissionType.DENY:
                return False
            allowed = True
        if allowed:
            return True
        return not resource_has_acls and self.allow_everyone_if_no_acl_found

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        operations: Iterable[AclOperation],
    ) -> int:
        """The protocol's bit field (bit N for operation N) of the
        ``operations`` the caller may perform on the resource."""
        field = 0
        for operation in operations:
            if self.authorize(principal, host, operation, resource_type, name):
                field |= 1 << operation
        return field

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the caller may perform ``operation`` on some resource of
        ``resource_type`` (Kafka's ``authorizeByResourceType``): an ALLOW that
        no DENY of the same operation covers. Kafka asks this of a producer
        without a transactional id that lacks IDEMPOTENT_WRITE on the cluster:
        WRITE on any topic is then enough."""
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        mine = [
            b
            for b in self._bindings
            if b.resource_type == resource_type
            and b.principal in principals
            and b.host in (WILDCARD, host)
            and b.operation in (operation, AclOperation.ALL)
        ]
        denies = [b for b in mine if b.permission == AclPermissionType.DENY]
        if any(_is_wildcard(deny) for deny in denies):
            return False
        for allow in mine:
            if allow.permission != AclPermissionType.ALLOW:
                continue
            if not any(_covers(deny, allow) for deny in denies):
                return True
        if self.allow_everyone_if_no_acl_found:
            return not any(b.resource_type == resource_type for b in self._bindings)
        return False


def _grants(binding: AclBinding, operation: AclOperation) -> bool:
    """Whether ``binding``'s operation stands for ``operation`` (ALL always;
    an ALLOW's implied DESCRIBE and DESCRIBE_CONFIGS)."""
    if binding.operation in (AclOperation.ALL, operation):
        return True
    if binding.permission != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return binding.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return binding.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether every resource ``allow`` names is also denied by ``deny``."""
    if _is_wildcard(deny):
        return True
    if _is_wildcard(allow):
        return False
    if deny.pattern_type == PatternType.LITERAL:
        literal = allow.pattern_type == PatternType.LITERAL
        return literal and allow.resource_name == deny.resource_name
    return allow.resource_name.startswith(deny.resource_name)


def _is_wildcard(binding: AclBinding) -> bool:
    return binding.pattern_type == PatternType.LITERAL and binding.resource_name == WILDCARD
