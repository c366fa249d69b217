"""What the classic group APIs do for a group id held by a consumer-type group (KIP-848).

OffsetCommit and OffsetFetch check the member epoch; the offsets themselves stay in the
classic offsets store, which keeps them under the group id in an Empty classic group
(Kafka's "simple" group). That holder is hidden while the consumer group exists:
ListGroups lists the consumer group, DescribeGroups reports the id Dead (Kafka's
``classicGroup`` lookup fails for it), DeleteGroups deletes both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkette.errors import NO_ERROR, ApiError
from kafkette.server.groups.consumer_protocol import offsets
from kafkette.server.groups.migration import GroupMigration
from kafkette.server.groups.queries import GroupOverview

if TYPE_CHECKING:
    from kafkette.server.broker import Broker

CONSUMER_GROUP_TYPE = "consumer"


def attach(broker: Broker) -> GroupMigration:
    """The broker's classic and consumer groups sharing group ids (routing and online
    migration, :mod:`kafkette.server.groups.migration`); made on the first group request."""
    migration = broker.groups.migration
    if migration is None or migration.consumer is not broker.consumer_groups:
        migration = broker.groups.attach(broker.consumer_groups)
    return migration


def is_consumer_group(broker: Broker, group_id: str) -> bool:
    """Whether ``group_id`` names a consumer-type group."""
    return group_id in broker.consumer_groups.groups


def offset_commit_error(
    broker: Broker, group_id: str, member_id: str, member_epoch: int, api_version: int
) -> int | None:
    """For a consumer-type group: the error code for the whole OffsetCommit (0 when it
    may be stored). None when ``group_id`` is not a consumer-type group."""
    group = broker.consumer_groups.groups.get(group_id)
    if group is None:
        return None
    try:
        offsets.validate_offset_commit(group, member_id, member_epoch, api_version=api_version)
    except ApiError as error:
        return error.code
    return NO_ERROR


def offset_fetch_error(
    broker: Broker, group_id: str, member_id: str | None, member_epoch: int
) -> int:
    """OffsetFetch v9+'s group error for a consumer-type group (0 otherwise)."""
    group = broker.consumer_groups.groups.get(group_id)
    if group is None:
        return NO_ERROR
    try:
        offsets.validate_offset_fetch(group, member_id, member_epoch)
    except ApiError as error:
        return error.code
    return NO_ERROR


def list_groups(
    broker: Broker, classic: list[GroupOverview], states: Iterable[str], types: Iterable[str]
) -> list[GroupOverview]:
    """ListGroups: the classic overviews without the consumer groups' offset holders,
    then the consumer-type groups the filters (case-insensitive) let through."""
    consumer = broker.consumer_groups.list_groups()
    ids = {group_id for group_id, _ in consumer}
    listed = [g for g in classic if g.group_id not in ids]
    wanted_types = {t.lower() for t in types}
    wanted_states = {s.lower() for s in states}
    if wanted_types and CONSUMER_GROUP_TYPE not in wanted_types:
        return listed
    listed += (
        GroupOverview(group_id, CONSUMER_GROUP_TYPE, state, CONSUMER_GROUP_TYPE)
        for group_id, state in consumer
        if not wanted_states or state.lower() in wanted_states
    )
    return listed


def delete_groups(broker: Broker, group_ids: Iterable[str]) -> dict[str, int]:
    """DeleteGroups for the consumer-type groups among ``group_ids``: an error code per
    such group; an Empty one goes with its committed offsets."""
    errors: dict[str, int] = {}
    for group_id in group_ids:
        if not is_consumer_group(broker, group_id):
            continue
        try:
            broker.consumer_groups.delete_group(group_id)
        except ApiError as error:
            errors[group_id] = error.code
            continue
        broker.groups.delete_groups([group_id])  # its offsets; no holder is no error
        errors[group_id] = NO_ERROR
    return errors
