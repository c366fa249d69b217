"""What ListGroups, DescribeGroups and DeleteGroups read and do to the classic groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from kafkette.errors import NO_ERROR, GroupIdNotFoundError, NonEmptyGroupError
from kafkette.server.groups.group import ClassicGroupState, Group
from kafkette.server.groups.offsets import GroupOffsets

CLASSIC_GROUP_TYPE = "classic"


@attrs.frozen
class GroupOverview:
    """One group as ListGroups reports it."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


@attrs.frozen
class MemberSummary:
    """One member as DescribeGroups reports it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@attrs.frozen
class GroupSummary:
    """One group as DescribeGroups reports it."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


DEAD_GROUP = GroupSummary(ClassicGroupState.DEAD.value, "", "", ())


class GroupQueries:
    """The admin side of the groups in ``groups``: list, describe, delete."""

    def __init__(self, groups: Mapping[str, Group], offsets: GroupOffsets) -> None:
        self.groups = groups
        self.offsets = offsets

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        """ListGroups, filtered by state and by type (case-insensitive; empty: no filter)."""
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return []
        wanted_states = {s.lower() for s in states}
        return [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not wanted_states or g.state.value.lower() in wanted_states
        ]

    def describe(self, group_id: str) -> GroupSummary:
        """DescribeGroups: an unknown group is reported Dead (with no error, as Kafka does)."""
        group = self.groups.get(group_id)
        if group is None:
            return DEAD_GROUP
        stable = group.is_in(ClassicGroupState.STABLE) and group.protocol_name is not None
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupSummary(
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def delete_groups(self, now_ms: int, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups: an error code per group (only groups without members go)."""
        errors: dict[str, int] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.is_in(ClassicGroupState.DEAD):
                errors[group_id] = GroupIdNotFoundError.code
            elif not group.is_in(ClassicGroupState.EMPTY):
                errors[group_id] = NonEmptyGroupError.code
            else:
                group.transition_to(ClassicGroupState.DEAD, now_ms)
                removed = dict(group.offsets)
                group.offsets.clear()
                self.offsets.cleanup(group, removed, now_ms)
                errors[group_id] = NO_ERROR
        return errors
