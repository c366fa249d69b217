"""The broker's group coordinator: :class:`GroupEngine` with waiting and a clock.

The engine is sans-I/O and answers JoinGroup and SyncGroup through callbacks;
:class:`GroupCoordinator` turns those into coroutines that wait (on an anyio
event) until the join phase or the sync completes, reads the time from the
broker's injected clock, and runs the engine's timers after each request and
from :func:`~kafkette.server.groups.timer.group_timer_loop`. Every method runs
in the broker's event loop: the engine is never touched from two threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

import anyio

from kafkette.errors import (
    ApiError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    UnknownMemberIdError,
)
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.consumer_protocol.coordinator import ConsumerGroupCoordinator
from kafkette.server.groups.consumer_protocol.offsets import validate_offset_commit
from kafkette.server.groups.engine import GroupEngine, JoinParams
from kafkette.server.groups.group import ClassicGroupState, Group, JoinResult, SyncResult
from kafkette.server.groups.migration import GroupMigration
from kafkette.server.groups.queries import GroupOverview, GroupSummary
from kafkette.server.groups.store import CommittedOffset, GroupStore, LoadedGroups, PartitionKey

T = TypeVar("T")


class _Reply(Generic[T]):
    """A callback for the engine that a coroutine can wait on."""

    def __init__(self) -> None:
        self._value: list[T] = []
        self._event = anyio.Event()

    def __call__(self, value: T) -> None:
        if not self._value:
            self._value.append(value)
            self._event.set()

    async def wait(self) -> T:
        if not self._value:
            await self._event.wait()
        return self._value[0]


class GroupCoordinator:
    """Classic consumer groups and their committed offsets, for one broker."""

    def __init__(self, config: BrokerConfig, store: GroupStore, clock: Callable[[], float]) -> None:
        self.config = config
        self.store = store
        self.engine = GroupEngine(config, store)
        self._clock = clock
        self.engine.schedule_offsets_check(self.now_ms())
        self.migration: GroupMigration | None = None
        """Set by :meth:`attach`: classic requests then reach a consumer group's classic
        members, and groups migrate between the two kinds."""

    def attach(self, consumer: ConsumerGroupCoordinator) -> GroupMigration:
        """Share the group ids with the broker's consumer groups (KIP-848): the classic
        APIs route through :class:`~kafkette.server.groups.migration.GroupMigration`."""
        if self.migration is None or self.migration.consumer is not consumer:
            self.migration = GroupMigration(self.engine, consumer)
        return self.migration

    def now_ms(self) -> int:
        return int(self._clock())

    def restore(self, loaded: LoadedGroups) -> None:
        """Take over the groups and offsets a store read back at start."""
        self.engine.restore(loaded, self.now_ms())

    # -- time ------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has work (``None``: nothing scheduled)."""
        return self.engine.next_deadline_ms()

    def tick(self, now_ms: int | None = None) -> None:
        """Expire sessions, finish join and sync phases that timed out, expire offsets."""
        self.engine.tick(self.now_ms() if now_ms is None else now_ms)

    # -- membership --------------------------------------------------------------------

    async def join_group(self, params: JoinParams) -> JoinResult:
        """JoinGroup; returns when the member has its answer (after the join phase)."""
        reply: _Reply[JoinResult] = _Reply()
        if self.migration is not None:
            self.migration.join(self.now_ms(), params, reply)
        else:
            self.engine.join(self.now_ms(), params, reply)
        return await reply.wait()

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> SyncResult:
        """SyncGroup; returns once the leader's assignment is in (or at once on error)."""
        reply: _Reply[SyncResult] = _Reply()
        sync = self.migration.sync if self.migration is not None else self.engine.sync
        sync(
            self.now_ms(),
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments or {},
            callback=reply,
        )
        return await reply.wait()

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> int:
        """Heartbeat: an error code."""
        heartbeat = (
            self.migration.heartbeat if self.migration is not None else self.engine.heartbeat
        )
        return heartbeat(
            self.now_ms(),
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """LeaveGroup: (group error, error per (member id, instance id))."""
        leave = self.migration.leave if self.migration is not None else self.engine.leave
        return leave(self.now_ms(), group_id, members)

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[PartitionKey, CommittedOffset],
    ) -> dict[PartitionKey, int]:
        """OffsetCommit: an error code per partition."""
        return self.engine.commit(
            self.now_ms(),
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            offsets=offsets,
        )

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[PartitionKey] | None
    ) -> dict[PartitionKey, CommittedOffset | None]:
        """OffsetFetch: committed offsets (``None`` where there is none)."""
        return self.engine.fetch_offsets(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[PartitionKey]
    ) -> tuple[int, dict[PartitionKey, int]]:
        """OffsetDelete: (group error, error per partition)."""
        return self.engine.delete_offsets(self.now_ms(), group_id, partitions)

    # -- transactional offsets (TxnOffsetCommit) -----------------------------------------

    def validate_transactional_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        """TxnOffsetCommit's checks of the sender (Kafka's ``doTxnCommitOffsets``): an error
        code. Unlike OffsetCommit, an empty member id and generation -1 always pass, and a
        rebalance in progress does not stop the commit. A consumer group (KIP-848) checks
        the member and its epoch (its classic members' generation) as Kafka's
        ConsumerGroup.validateOffsetCommit does for a transactional commit."""
        consumer = self.migration.consumer.groups.get(group_id) if self.migration else None
        if consumer is not None:
            try:
                validate_offset_commit(
                    consumer, member_id, generation_id, api_version=0, transactional=True
                )
            except ApiError as error:
                return error.code
            return 0
        group = self.engine.groups.get(group_id)
        if group is None:
            if member_id:
                return UnknownMemberIdError.code
            return IllegalGenerationError.code if generation_id > 0 else 0
        if group.is_in(ClassicGroupState.DEAD):
            return CoordinatorNotAvailableError.code
        if group_instance_id is not None:
            static = group.static_members.get(group_instance_id)
            if static is not None and static != member_id:
                return FencedInstanceIdError.code
        if member_id and not group.has(member_id):
            return UnknownMemberIdError.code
        if generation_id >= 0 and generation_id != group.generation_id:
            return IllegalGenerationError.code
        return 0

    def apply_transactional_offsets(
        self, group_id: str, offsets: Mapping[PartitionKey, CommittedOffset]
    ) -> None:
        """Make a committed transaction's offsets the group's (already in the log: not
        written again); a group that does not exist yet is made, Empty."""
        if not offsets:
            return
        group = self.engine.groups.get(group_id)
        if group is None or group.is_in(ClassicGroupState.DEAD):
            group = self.engine.groups[group_id] = Group(
                group_id, ClassicGroupState.EMPTY, self.now_ms()
            )
        group.offsets.update(offsets)

    def topics_deleted(self, topics: Iterable[str]) -> int:
        """Forget the committed offsets of deleted topics (call when topics are deleted)."""
        return self.engine.remove_topic_offsets(self.now_ms(), topics)

    # -- administration -----------------------------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        """ListGroups."""
        return self.engine.list_groups(states, types)

    def describe_group(self, group_id: str) -> GroupSummary:
        """DescribeGroups for one group."""
        return self.engine.describe(group_id)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups: an error code per group."""
        return self.engine.delete_groups(self.now_ms(), group_ids)
