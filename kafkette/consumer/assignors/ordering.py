"""The order members are dealt partitions in, as Java's assignors sort them.

Java sorts ``MemberInfo``: static members (with a group.instance.id) first,
ordered by instance id, then dynamic members ordered by member id. Java
compares strings by UTF-16 code unit, which differs from Python's code point
order past the Basic Multilingual Plane, so the keys compare UTF-16 bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkette.consumer.assignors.base import Subscription


def java_string_key(value: str) -> bytes:
    """A key that orders strings as Java's ``String.compareTo`` does."""
    return value.encode("utf-16-be", "surrogatepass")


def member_sort_key(member_id: str, sub: Subscription) -> tuple[int, bytes, bytes]:
    """Sort key of one member: static members first by instance id, then by member id."""
    if sub.group_instance_id is not None:
        return (0, java_string_key(sub.group_instance_id), java_string_key(member_id))
    return (1, b"", java_string_key(member_id))


def sorted_members(
    subscriptions: Mapping[str, Subscription], member_ids: Iterable[str] | None = None
) -> list[str]:
    """``member_ids`` (default: every member) in Java's ``MemberInfo`` order."""
    ids = subscriptions.keys() if member_ids is None else member_ids
    return sorted(ids, key=lambda m: member_sort_key(m, subscriptions[m]))
