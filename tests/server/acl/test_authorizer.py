"""The standard authorizer's decisions, rule by rule (Kafka's StandardAuthorizer)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkette.acl import new_binding_error
from kafkette.server.acl import (
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
Op = AclOperation


def acl(
    name: str,
    op: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    kind: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, permission)


def may(
    authorizer: AclAuthorizer,
    op: AclOperation,
    name: str,
    *,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    kind: ResourceType = TOPIC,
) -> bool:
    return authorizer.authorize(principal, host, op, kind, name)


def with_acls(*bindings: AclBinding, **kwargs: bool) -> AclAuthorizer:
    authorizer = AclAuthorizer(["User:admin"], **kwargs)
    authorizer.create(bindings)
    return authorizer


def test_no_acl_denies_unless_allow_everyone_and_the_resource_has_none() -> None:
    assert not may(with_acls(), Op.READ, "orders")
    everyone = with_acls(
        acl("orders", Op.READ, principal="User:bob"), allow_everyone_if_no_acl_found=True
    )
    assert may(everyone, Op.WRITE, "payments")
    # orders has an ACL (for bob): alice gets nothing there, even with allow-everyone.
    assert not may(everyone, Op.READ, "orders")
    assert may(everyone, Op.READ, "orders", principal="User:bob")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    authorizer = with_acls(
        acl("orders", Op.READ),
        acl("pay-", Op.WRITE, pattern=PREFIXED),
        acl("*", Op.DESCRIBE, kind=GROUP),
    )
    assert may(authorizer, Op.READ, "orders")
    assert not may(authorizer, Op.READ, "orders2")
    assert may(authorizer, Op.WRITE, "pay-eu")
    assert may(authorizer, Op.WRITE, "pay-")
    assert not may(authorizer, Op.WRITE, "pay")
    assert may(authorizer, Op.DESCRIBE, "any-group", kind=GROUP)
    assert not may(authorizer, Op.READ, "any-group", kind=GROUP)
    # A literal ACL named like a prefix is not a prefix.
    assert not may(with_acls(acl("pay-", Op.WRITE)), Op.WRITE, "pay-eu")


def test_deny_overrides_allow_whatever_the_pattern() -> None:
    authorizer = with_acls(
        acl("*", Op.ALL),
        acl("secret-", Op.READ, DENY, pattern=PREFIXED),
        acl("orders", Op.WRITE, DENY, principal="User:*"),
    )
    assert may(authorizer, Op.READ, "orders")
    assert not may(authorizer, Op.WRITE, "orders")
    assert not may(authorizer, Op.READ, "secret-plans")
    assert may(authorizer, Op.WRITE, "secret-plans")


def test_allow_implies_describe_and_describe_configs_but_deny_implies_nothing() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert may(with_acls(acl("t", op)), Op.DESCRIBE, "t"), op
    for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not may(with_acls(acl("t", op)), Op.DESCRIBE, "t"), op
    assert may(with_acls(acl("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "t")
    assert not may(with_acls(acl("t", Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS, "t")
    assert not may(with_acls(acl("t", Op.READ)), Op.WRITE, "t")
    deny_read = with_acls(acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY))
    assert may(deny_read, Op.DESCRIBE, "t")
    assert not may(deny_read, Op.READ, "t")
    assert not may(with_acls(acl("t", Op.ALL), acl("t", Op.ALL, DENY)), Op.DESCRIBE, "t")


def test_principal_and_host_must_match() -> None:
    authorizer = with_acls(
        acl("t", Op.READ, principal="User:bob", host="10.0.0.2"),
        acl("u", Op.READ, principal="User:*"),
    )
    assert may(authorizer, Op.READ, "t", principal="User:bob", host="10.0.0.2")
    assert not may(authorizer, Op.READ, "t", principal="User:bob", host="10.0.0.1")
    assert not may(authorizer, Op.READ, "t", principal="User:carol", host="10.0.0.2")
    assert may(authorizer, Op.READ, "u", principal="User:ANONYMOUS")


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    authorizer = with_acls(acl("*", Op.ALL, DENY, principal="User:*"))
    assert may(authorizer, Op.DELETE, "t", principal="User:admin")
    assert not may(authorizer, Op.DESCRIBE, "t")


def test_authorized_operations_bit_field() -> None:
    authorizer = with_acls(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    ops = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]
    field = authorizer.authorized_operations("User:alice", "h", TOPIC, "t", ops)
    assert field == (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)


def test_authorize_any_topic_write() -> None:
    assert with_acls(acl("t", Op.WRITE)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not with_acls(acl("t", Op.READ)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    denied = with_acls(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY))
    assert not denied.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    prefix_denied = with_acls(acl("t-1", Op.WRITE), acl("t-", Op.WRITE, DENY, pattern=PREFIXED))
    assert not prefix_denied.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    partly = with_acls(acl("t-", Op.WRITE, pattern=PREFIXED), acl("t-1", Op.WRITE, DENY))
    assert partly.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    wildcard_denied = with_acls(acl("t", Op.WRITE), acl("*", Op.ALL, DENY))
    assert not wildcard_denied.authorize_any("User:alice", "h", Op.WRITE, TOPIC)


def test_filters_select_as_kafka_does() -> None:
    literal = acl("orders", Op.READ)
    wildcard = acl("*", Op.READ)
    prefix = acl("ord", Op.WRITE, DENY, pattern=PREFIXED)
    other = acl("orders", Op.READ, kind=GROUP, principal="User:bob")
    authorizer = with_acls(literal, wildcard, prefix, other)

    def describe(**kwargs: object) -> list[AclBinding]:
        return authorizer.describe(AclBindingFilter(**kwargs))  # type: ignore[arg-type]

    assert describe() == [literal, wildcard, prefix, other]
    assert describe(resource_type=TOPIC, resource_name="orders") == [literal]
    assert describe(
        resource_type=TOPIC, resource_name="orders", pattern_type=PatternType.MATCH
    ) == [
        literal,
        wildcard,
        prefix,
    ]
    assert describe(pattern_type=PREFIXED) == [prefix]
    assert describe(principal="User:bob") == [other]
    assert describe(permission=DENY) == [prefix]
    assert describe(operation=Op.READ, resource_type=TOPIC) == [literal, wildcard]
    assert describe(host="10.0.0.1") == []

    removed = authorizer.delete(
        [AclBindingFilter(operation=Op.READ), AclBindingFilter(resource_type=GROUP)]
    )
    assert removed == [[literal, wildcard, other], [other]]
    assert authorizer.bindings == [prefix]


def test_creating_a_binding_twice_keeps_one() -> None:
    authorizer = with_acls(acl("t", Op.READ), acl("t", Op.READ))
    assert authorizer.bindings == [acl("t", Op.READ)]


def test_new_binding_errors_use_kafkas_words() -> None:
    assert new_binding_error(acl("t", Op.READ)) is None
    assert new_binding_error(acl("t", Op.ANY)) == "Invalid operation ANY"
    assert (
        new_binding_error(acl("t", Op.READ, AclPermissionType.ANY)) == "Invalid permissionType ANY"
    )
    assert new_binding_error(acl("t", Op.READ, kind=ResourceType.ANY)) == "Invalid resourceType ANY"
    assert (
        new_binding_error(acl("t", Op.READ, pattern=PatternType.MATCH))
        == "Invalid patternType MATCH"
    )
    assert new_binding_error(acl("", Op.READ)) == "Invalid empty resource name"
    assert (
        new_binding_error(acl("c", Op.ALTER, kind=ResourceType.CLUSTER))
        == "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert new_binding_error(acl("t", Op.READ, principal="alice")) is not None
    wire = AclBinding.from_wire(99, "t", 3, "User:a", "*", 3, 3)
    assert wire.resource_type == ResourceType.UNKNOWN
    assert new_binding_error(wire) == "Invalid resourceType UNKNOWN"


# (prefixes of several lengths, and "*": the literal name every resource matches)
names = st.sampled_from(["a", "ab", "abc", "abcd", "b", "ba", "*"])
bindings = st.builds(
    AclBinding,
    st.sampled_from([TOPIC, GROUP]),
    names,
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]),
    st.sampled_from([ALLOW, DENY]),
)
questions = st.tuples(
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]),
    st.sampled_from([TOPIC, GROUP]),
    names,
)


@given(st.lists(bindings, max_size=8), questions)
def test_a_matching_deny_always_wins(existing: list[AclBinding], question: tuple) -> None:  # type: ignore[type-arg]
    principal, host, op, kind, name = question
    authorizer = with_acls(*existing, allow_everyone_if_no_acl_found=True)
    authorizer.create([AclBinding(kind, name, LITERAL, principal, host, op, DENY)])
    assert not authorizer.authorize(principal, host, op, kind, name)
    assert authorizer.authorize("User:admin", host, op, kind, name)


@given(st.lists(bindings, max_size=8), questions)
def test_an_allow_only_adds_unless_denied(existing: list[AclBinding], question: tuple) -> None:  # type: ignore[type-arg]
    principal, host, op, kind, name = question
    authorizer = with_acls(*existing)
    before = authorizer.authorize(principal, host, op, kind, name)
    authorizer.create([AclBinding(kind, name, LITERAL, principal, host, op, ALLOW)])
    after = authorizer.authorize(principal, host, op, kind, name)
    denied = any(
        b.permission == DENY
        and b.applies_to(kind, name)
        and b.principal in (principal, "User:*")
        and b.host in ("*", host)
        and b.operation in (op, Op.ALL)
        for b in existing
    )
    assert after == (not denied)
    assert before <= after


@given(st.lists(bindings, max_size=10), st.lists(bindings, max_size=3))
def test_delete_removes_exactly_what_describe_shows(
    existing: list[AclBinding], probes: list[AclBinding]
) -> None:
    authorizer = with_acls(*existing)
    filters = [
        AclBindingFilter(
            resource_type=p.resource_type, resource_name=p.resource_name, principal=p.principal
        )
        for p in probes
    ]
    expected = [authorizer.describe(f) for f in filters]
    assert authorizer.delete(filters) == expected
    gone = {b for group in expected for b in group}
    assert authorizer.bindings == [b for b in dict.fromkeys(existing) if b not in gone]


def decided_by_the_rules(
    existing: list[AclBinding],
    question: tuple,
    allow_everyone: bool,  # type: ignore[type-arg]
) -> bool:
    """The module docstring's rules applied to every binding in turn: the
    reference the authorizer's index by pattern must agree with."""
    principal, host, op, kind, name = question
    covering = [b for b in existing if b.applies_to(kind, name)]
    callers = [
        b for b in covering if b.principal in (principal, "User:*") and b.host in ("*", host)
    ]
    implied = {
        Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
    }
    if any(b.permission == DENY and b.operation in (op, Op.ALL) for b in callers):
        return False
    if any(
        b.operation in (op, Op.ALL) or b.operation in implied.get(op, ())
        for b in callers
        if b.permission == ALLOW
    ):
        return True
    return not covering and allow_everyone


@given(
    st.lists(bindings, max_size=20),
    st.lists(bindings, max_size=4),
    st.lists(questions, min_size=1, max_size=10),
    st.booleans(),
)
def test_decisions_follow_the_rules_over_every_binding_after_creates_and_deletes(
    existing: list[AclBinding],
    deleted: list[AclBinding],
    questions_asked: list[tuple],  # type: ignore[type-arg]
    allow_everyone: bool,
) -> None:
    authorizer = with_acls(*existing, allow_everyone_if_no_acl_found=allow_everyone)
    authorizer.delete(
        AclBindingFilter(
            resource_type=d.resource_type,
            resource_name=d.resource_name,
            pattern_type=d.pattern_type,
            principal=d.principal,
        )
        for d in deleted
    )
    left = authorizer.bindings
    for question in questions_asked:
        assert authorizer.authorize(*question) == decided_by_the_rules(
            left, question, allow_everyone
        ), question
    authorizer.create(existing)  # the deleted ones come back, the others stay single
    assert authorizer.bindings == left + [b for b in dict.fromkeys(existing) if b not in left]
    for question in questions_asked:
        assert authorizer.authorize(*question) == decided_by_the_rules(
            existing, question, allow_everyone
        ), question
