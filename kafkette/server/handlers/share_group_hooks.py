"""What ListGroups, DescribeGroups and DeleteGroups do for share groups (KIP-932).

ListGroups lists them with type and protocol type ``share`` and their state (Empty or
Stable), under the same filters as the other groups; DescribeGroups, the classic
groups' API, reports a share group's id Dead, as it does a consumer group's; DeleteGroups
deletes an Empty share group with its share-partition state (tombstones in
``__share_group_state``) and refuses one with members (NON_EMPTY_GROUP).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkette.errors import NO_ERROR, ApiError
from kafkette.server.groups.queries import GroupOverview

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

SHARE_GROUP_TYPE = "share"


def is_share_group(broker: Broker, group_id: str) -> bool:
    """Whether ``group_id`` names a share group."""
    return group_id in broker.share_groups.groups


def list_groups(
    broker: Broker, listed: list[GroupOverview], states: Iterable[str], types: Iterable[str]
) -> list[GroupOverview]:
    """``listed`` and the share groups the filters (case-insensitive) let through."""
    wanted_types = {t.lower() for t in types}
    wanted_states = {s.lower() for s in states}
    if wanted_types and SHARE_GROUP_TYPE not in wanted_types:
        return listed
    return listed + [
        GroupOverview(group_id, SHARE_GROUP_TYPE, group.state.value, SHARE_GROUP_TYPE)
        for group_id, group in sorted(broker.share_groups.groups.items())
        if not wanted_states or group.state.value.lower() in wanted_states
    ]


def delete_groups(broker: Broker, group_ids: Iterable[str]) -> dict[str, int]:
    """DeleteGroups for the share groups among ``group_ids``: an error code for each."""
    errors: dict[str, int] = {}
    for group_id in group_ids:
        if not is_share_group(broker, group_id):
            continue
        try:
            broker.share_groups.delete_group(group_id)
        except ApiError as error:
            errors[group_id] = error.code
            continue
        errors[group_id] = NO_ERROR
    return errors
