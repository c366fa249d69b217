"""The broker's share groups: their members, share partitions, sessions and timers.

:class:`ShareCoordinator` owns what the share handlers serve and holds it together,
as Kafka's ``GroupCoordinator`` (share groups), ``SharePartitionManager`` and share
coordinator do between them:

- one :class:`~kafkette.server.share.group.ShareGroup` per group id, made by its
  first heartbeat;
- one :class:`~kafkette.server.share.partition.SharePartition` per (group, topic id,
  partition), made by the first ShareFetch that reads it: restored from its written
  state when ``__share_group_state`` has one, else started at the log's end
  (``share.auto.offset.reset`` ``latest``, Kafka's default) or start (``earliest``);
- the share sessions (:class:`~kafkette.server.share.sessions.ShareSessions`);
- the timers: acquisition locks that expire and member sessions that end, both
  read from the clock the broker gives (so a test's ManualClock drives them).

Every change of a share partition that Kafka persists (an initialization, an
acknowledgement, a lock expiry, a member's records given back) goes to ``sink`` as
a ``__share_group_state`` record, through the book of :mod:`.persistence`.
Acquisitions are never written: a record in flight at a crash comes back.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from kafkette.errors import GroupIdNotFoundError, InvalidRecordStateError, NonEmptyGroupError
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.server.config.group_configs import auto_offset_reset_ms
from kafkette.server.share import wire
from kafkette.server.share.group import ShareGroup, ShareGroupConfig, TopicImage
from kafkette.server.share.partition import SharePartition
from kafkette.server.share.persistence import (
    STATE_TOPIC,
    PersistedState,
    ShareKey,
    ShareStateBook,
    coordinator_key,
)
from kafkette.server.share.sessions import ShareSessions
from kafkette.server.share.state import Acknowledgement, AcquiredRecords, StateWrite

logger = logging.getLogger("kafkette.server.share")

AUTO_OFFSET_RESET = "share.auto.offset.reset"
LOCK_DURATION = "share.record.lock.duration.ms"
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
ISOLATION_LEVEL = "share.isolation.level"

StateSink = Callable[[str, bytes, bytes | None], None]
"""Appends one ``__share_group_state`` record: (coordinator key, key, value)."""


@attrs.frozen
class ShareConfig:
    """The broker's share-group settings (Kafka's names and defaults)."""

    delivery_count_limit: int = 5
    """``group.share.delivery.count.limit``."""
    record_lock_duration_ms: int = 30_000
    """``group.share.record.lock.duration.ms``."""
    partition_max_record_locks: int = 2_000
    """``group.share.partition.max.record.locks``."""
    session_timeout_ms: int = 45_000
    """``group.share.session.timeout.ms``."""
    heartbeat_interval_ms: int = 5_000
    """``group.share.heartbeat.interval.ms``."""
    max_size: int = 200
    """``group.share.max.size``."""
    max_share_sessions: int = 2_000
    """``group.share.max.share.sessions``."""
    snapshot_every: int = 500
    """``share.coordinator.snapshot.update.records.per.snapshot``."""


class ShareCoordinator:
    """Share groups, share partitions and share sessions of one broker."""

    def __init__(
        self,
        config: ShareConfig | None = None,
        *,
        clock: Callable[[], int],
        group_configs: Mapping[str, Mapping[str, str]] | None = None,
        sink: StateSink | None = None,
    ) -> None:
        """``clock``: epoch milliseconds (locks, sessions and ``by_duration:``);
        ``group_configs``: each group's overrides (``share.*`` names) by group id;
        ``sink``: where the state records go (None: nowhere, as a read-only broker)."""
        self.config = config or ShareConfig()
        self.clock = clock
        self.group_configs: Mapping[str, Mapping[str, str]] = (
            {} if group_configs is None else group_configs
        )
        self.sink = sink
        self.available: Callable[[], None] = _nothing
        """Called when records may have become acquirable again (long polls look again)."""
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.sessions = ShareSessions(self.config.max_share_sessions)
        self.book = ShareStateBook(self.config.snapshot_every)

    # ---- loading

    def replay(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply ``__share_group_state`` records in order (a broker's start); the share
        partitions are restored from them on first use."""
        for key, value in records:
            try:
                self.book.replay(key, value)
            except ProtocolError as exc:
                logger.warning("unreadable %s record skipped: %s", STATE_TOPIC, exc)
        # A group with written state outlives a restart (Kafka keeps its records in
        # __consumer_offsets): it comes back Empty, its offsets there to describe or alter.
        for share_key in self.book.share_keys():
            group_id = share_key.group_id
            if group_id and group_id not in self.groups:
                self.groups[group_id] = self._new_group(group_id)

    # ---- groups

    def heartbeat(
        self,
        request: ShareGroupHeartbeatRequest,
        topics: Mapping[str, TopicImage],
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> ShareGroupHeartbeatResponse:
        """Serve a ShareGroupHeartbeat. A member that leaves (epoch -1) keeps its share
        session: the client closes it after (ShareFetch or ShareAcknowledge with epoch
        -1, which gives back what it still holds), as librdkafka does on close."""
        group = self.groups.get(request.group_id)
        if group is None:
            group = self._new_group(request.group_id)
            if request.group_id:
                self.groups[request.group_id] = group
        else:
            group.config = self._group_settings(request.group_id)  # may have changed
        return wire.heartbeat(
            group,
            request,
            self.clock(),
            topics,
            client_id=client_id,
            client_host=client_host,
        )

    def close_session(self, group_id: str, member_id: str) -> None:
        """End the member's share session (a request with epoch -1): the records it
        holds in the session's partitions go back, their delivery counts lowered."""
        for topic_id, index in self.sessions.release(group_id, member_id):
            key = ShareKey(group_id, topic_id, index)
            partition = self.partitions.get(key)
            if partition is not None:
                self._persist(key, partition.release_member(member_id))

    def disconnect(self, connection_id: str) -> None:
        """The connection ``connection_id`` closed: the share sessions it opened end and
        their members' acquired records go back, as Kafka's ShareSessionCache tells its
        share-group listener that the member left (records released, delivery counts
        lowered, as :meth:`close_session`)."""
        for session in self.sessions.disconnect(connection_id):
            for key, partition in self.partitions.items():
                if key.group_id == session.group_id:
                    self._persist(key, partition.release_member(session.member_id))

    def member_gone(self, group_id: str, member_id: str) -> None:
        """A member's group session ended (no heartbeat in time): its share session
        ends and its records go back to the group."""
        if self.sessions.get(group_id, member_id) is not None:
            self.sessions.release(group_id, member_id)
        for key, partition in self.partitions.items():
            if key.group_id == group_id:
                self._persist(key, partition.release_member(member_id))

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for a share group: refused (NON_EMPTY_GROUP) while it has members;
        else it goes with its share partitions, whose state gets tombstones."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        if group.members:
            raise NonEmptyGroupError(f"Share group {group_id} has members.")
        del self.groups[group_id]
        for key in [k for k in self.partitions if k.group_id == group_id]:
            del self.partitions[key]
        for key in [k for k in self.book.share_keys() if k.group_id == group_id]:
            record_key, value = self.book.delete(key)
            if self.sink is not None:
                self.sink(coordinator_key(key), record_key, value)

    # ---- offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets)

    def empty_group(self, group_id: str) -> ShareGroup:
        """The share group ``group_id`` if it has no members, as Kafka's
        ``validateOffsetsAlterable``: GroupIdNotFoundError or NonEmptyGroupError."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if group.members:
            raise NonEmptyGroupError("The group is not empty.")
        return group

    def written_state(
        self, group_id: str, topic_id: uuid.UUID, index: int
    ) -> PersistedState | None:
        """The share partition's persisted state (start offset, batches), None when it
        was never initialized: what Kafka's ReadShareGroupStateSummary reads."""
        return self.book.state(ShareKey(group_id, topic_id, index))

    def initialized(self, group_id: str) -> dict[uuid.UUID, list[int]]:
        """The group's share partitions with a state, by topic id."""
        found: dict[uuid.UUID, list[int]] = {}
        for key in self.book.share_keys():
            if key.group_id == group_id:
                found.setdefault(key.topic_id, []).append(key.partition)
        return {topic_id: sorted(found[topic_id]) for topic_id in found}

    def alter_start_offset(
        self, group_id: str, topic_id: uuid.UUID, index: int, start_offset: int
    ) -> None:
        """Start the share partition afresh at ``start_offset`` (an Empty group's, see
        :meth:`empty_group`), as Kafka's InitializeShareGroupState: a snapshot with no
        batches and the next state epoch; the partition reopens from it on next use."""
        key = ShareKey(group_id, topic_id, index)
        self.partitions.pop(key, None)
        previous = self.book.state(key)
        epoch = 0 if previous is None else previous.state_epoch + 1
        record_key, value = self.book.initialize(key, start_offset, epoch, self.clock())
        if self.sink is not None:
            self.sink(coordinator_key(key), record_key, value)

    def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> bool:
        """Forget the state of the group's share partitions of one topic (tombstones);
        False when there was none."""
        keys = [
            k for k in self.book.share_keys() if (k.group_id, k.topic_id) == (group_id, topic_id)
        ]
        for key in keys:
            self.partitions.pop(key, None)
            record_key, value = self.book.delete(key)
            if self.sink is not None:
                self.sink(coordinator_key(key), record_key, value)
        return bool(keys)

    # ---- share partitions

    def lock_duration_ms(self, group_id: str) -> int:
        """``share.record.lock.duration.ms`` of the group, else the broker's."""
        return self._int(group_id, LOCK_DURATION, self.config.record_lock_duration_ms)

    def read_committed(self, group_id: str) -> bool:
        """Whether the group's ``share.isolation.level`` is read_committed."""
        return self.group_configs.get(group_id, {}).get(ISOLATION_LEVEL) == "read_committed"

    def share_partition(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        index: int,
        log_start: int,
        log_end: int,
        offset_for_timestamp: Callable[[int], int | None] | None = None,
    ) -> SharePartition:
        """The share partition, made (restored, or started per ``share.auto.offset.reset``)
        on first use; moved past what the log no longer has. ``offset_for_timestamp``
        gives the first offset whose record's timestamp is at or past a time (None: no
        such record), for ``by_duration:``."""
        key = ShareKey(group_id, topic_id, index)
        partition = self.partitions.get(key)
        if partition is None:
            partition = self._open(key, log_start, log_end, offset_for_timestamp)
            self.partitions[key] = partition
        partition.move_log_start(log_start)
        return partition

    def acquire(
        self,
        partition: SharePartition,
        group_id: str,
        member_id: str,
        first_offset: int,
        last_offset: int,
        *,
        max_records: int,
        fetch_offset: int,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> list[AcquiredRecords]:
        """Acquire what a log read returned for ``member_id`` (nothing is written)."""
        return partition.acquire(
            member_id,
            first_offset,
            last_offset,
            self.clock(),
            lock_duration_ms=self.lock_duration_ms(group_id),
            max_records=max_records,
            fetch_offset=fetch_offset,
            aborted=aborted,
        )

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        index: int,
        acknowledgements: Sequence[Acknowledgement],
    ) -> None:
        """Apply a member's acknowledgements to one share partition and persist them
        (InvalidRecordStateError when the partition has no records in flight)."""
        key = ShareKey(group_id, topic_id, index)
        partition = self.partitions.get(key)
        if partition is None:
            raise InvalidRecordStateError(
                f"share partition {topic_id}-{index} of group {group_id} has no acquired records"
            )
        write = partition.acknowledge(
            member_id,
            acknowledgements,
            self.clock(),
            lock_duration_ms=self.lock_duration_ms(group_id),
        )
        self._persist(key, write)

    # ---- timers (the broker's group timer loop)

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition lock or member session deadline."""
        deadlines = [p.next_deadline() for p in self.partitions.values()]
        deadlines += [g.next_deadline() for g in self.groups.values()]
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now_ms: int | None = None) -> None:
        """Expire the locks and member sessions due by ``now_ms`` (default: now)."""
        now = self.clock() if now_ms is None else now_ms
        for key, partition in self.partitions.items():
            self._persist(key, partition.expire_locks(now))
        for group in self.groups.values():
            for member_id in group.expire_sessions(now):
                self.member_gone(group.group_id, member_id)

    # ---- inside

    def _new_group(self, group_id: str) -> ShareGroup:
        return ShareGroup(group_id, self._group_settings(group_id))

    def _group_settings(self, group_id: str) -> ShareGroupConfig:
        """The group's ``share.session.timeout.ms`` and ``share.heartbeat.interval.ms``,
        else the broker's."""
        return ShareGroupConfig(
            session_timeout_ms=self._int(group_id, SESSION_TIMEOUT, self.config.session_timeout_ms),
            heartbeat_interval_ms=self._int(
                group_id, HEARTBEAT_INTERVAL, self.config.heartbeat_interval_ms
            ),
            max_size=self.config.max_size,
        )

    def _int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_configs.get(group_id, {}).get(name)
        return default if value is None else int(value)

    def _start_offset(
        self,
        group_id: str,
        log_start: int,
        log_end: int,
        offset_for_timestamp: Callable[[int], int | None] | None,
    ) -> int:
        """Where a new share partition starts (Kafka's ``share.auto.offset.reset``):
        the log's start, its end, or the first record at most the duration old (the
        end when there is none)."""
        reset = self.group_configs.get(group_id, {}).get(AUTO_OFFSET_RESET, "latest")
        if reset == "earliest":
            return log_start
        duration = auto_offset_reset_ms(reset)
        if duration is None or offset_for_timestamp is None:
            return log_end
        found = offset_for_timestamp(self.clock() - duration)
        return log_end if found is None else max(found, log_start)

    def _open(
        self,
        key: ShareKey,
        log_start: int,
        log_end: int,
        offset_for_timestamp: Callable[[int], int | None] | None = None,
    ) -> SharePartition:
        state = self.book.state(key)
        limit, locks = self.config.delivery_count_limit, self.config.partition_max_record_locks
        if state is not None:
            start = max(state.start_offset, log_start)
            kept = [b for b in state.batches if b.last_offset >= start]
            return SharePartition(
                start_offset=start, batches=kept, max_delivery_count=limit, max_in_flight=locks
            )
        start = self._start_offset(key.group_id, log_start, log_end, offset_for_timestamp)
        if self.sink is not None:
            record_key, value = self.book.initialize(key, start, 0, self.clock())
            self.sink(coordinator_key(key), record_key, value)
        return SharePartition(start_offset=start, max_delivery_count=limit, max_in_flight=locks)

    def _persist(self, key: ShareKey, write: StateWrite | None) -> None:
        if write is None:
            return
        self.available()
        if self.sink is None:
            return
        record_key, value = self.book.write(key, write, self.clock())
        self.sink(coordinator_key(key), record_key, value)


def _nothing() -> None:
    pass
