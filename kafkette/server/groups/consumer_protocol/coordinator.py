"""The consumer group protocol (KIP-848) over every consumer-type group, without I/O.

:class:`ConsumerGroupCoordinator` is the consumer-group half of Kafka's
GroupMetadataManager as a plain class: :meth:`~ConsumerGroupCoordinator.heartbeat`
takes the time and one ConsumerGroupHeartbeat and answers it, or raises Kafka's error
for it; :meth:`~ConsumerGroupCoordinator.tick` runs the timers that are due, and
:meth:`~ConsumerGroupCoordinator.next_deadline_ms` says when (the shape of
:class:`kafkette.server.groups.timer.Timed`). Topics come from an injected
:data:`~kafkette.server.groups.consumer_protocol.topics.TopicImage`.

One heartbeat, as Kafka handles it:

1. leave (epoch -1: the member is removed; -2: a static member keeps its place and
   partitions until its session expires or its instance id rejoins);
2. find or create the group and the member, checking the member epoch (a member may
   repeat its previous epoch if it owns no more than it was given: the answer that
   moved it on may have been lost);
3. update the member's fields; a changed subscription, a new member or a change in the
   subscribed topics' metadata bumps the group epoch;
4. if the group epoch is past the assignment epoch, compute a new target assignment
   with the group's assignor (the one most members ask for);
5. move the member one step towards its target (:mod:`.reconciliation`), arming its
   revocation timer (its rebalance timeout) while it has partitions to give up;
6. restart its session timer and answer with its epoch, the heartbeat interval and,
   for a full request or a changed assignment, its assigned partitions.

A member whose session expires, or that keeps partitions it must revoke past its
rebalance timeout, is removed and the group epoch bumped, which frees its partitions.

Persistence: after each request or timer that may change a group, :meth:`persist` hands
the records that changed (Kafka's consumer group records, :mod:`.records`, tombstones for
what went) to :attr:`~ConsumerGroupCoordinator.record_sink`, which the broker points at
``__consumer_offsets``; :meth:`restore` rebuilds the groups from the records read back.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import attrs

from kafkette.errors import (
    ApiError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownServerError,
    UnreleasedInstanceIdError,
)
from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.assignors import ASSIGNORS, AssignmentSpec, MemberSpec
from kafkette.server.groups.consumer_protocol.config import ConsumerGroupConfig
from kafkette.server.groups.consumer_protocol.describe import DescribedGroup, describe
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup
from kafkette.server.groups.consumer_protocol.heartbeat import (
    HeartbeatRequest,
    HeartbeatResponse,
    validate,
)
from kafkette.server.groups.consumer_protocol.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Member,
    MemberState,
)
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.reconciliation import reconcile
from kafkette.server.groups.consumer_protocol.records import (
    Change,
    RecordCache,
    RecordKey,
    RecordSet,
    RecordValue,
    changed_records,
    changes,
    rebuild,
)
from kafkette.server.groups.consumer_protocol.topics import TopicImage, resolve

logger = logging.getLogger("kafkette.server.groups.consumer")


class ConsumerGroupCoordinator:
    """Every consumer-type group and the heartbeat protocol over them."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        topics: TopicImage,
        *,
        id_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.groups: dict[str, ConsumerGroup] = {}
        self._new_id = id_factory
        self._clock = clock
        """Milliseconds, read only by ``tick()`` called without a time."""
        self.downgrade: Callable[[ConsumerGroup, int], None] | None = None
        """Takes a group whose last consumer-protocol member left (already removed from
        :attr:`groups`) and makes it a classic group; set by the group migration."""
        self.record_sink: Callable[[str, list[Change]], None] | None = None
        """Takes a group id and the records to append for it (None values: tombstones), in
        order; returns once they are durable. None: the groups live in memory only."""
        self.group_configs: Mapping[str, Mapping[str, str]] = {}
        """Group configs by group id (``consumer.session.timeout.ms``,
        ``consumer.heartbeat.interval.ms``, checked), overriding :attr:`config` for one group;
        the broker hands the cluster's, which AlterConfigs changes in place."""
        self._written: dict[str, RecordSet] = {}
        """The latest record of each key written, by group id."""
        self._made = RecordCache()
        self._deferred = 0

    # -- persistence -------------------------------------------------------------------

    def persist(self, group_id: str) -> None:
        """Write the records that changed for ``group_id`` since it was last written
        (all tombstones if the group is gone) to :attr:`record_sink`. A write refused with
        a Kafka error (a batch over ``max.message.bytes``, a log that cannot be written) is
        logged and left to the next call: the group's requests go on being served."""
        if self.record_sink is None or self._deferred:
            return
        group = self.groups.get(group_id)
        if group is None:
            self._made.forget(group_id)
            new: RecordSet = {}
        else:
            made = changed_records(group, self._made)
            if made is None:
                return
            new = made
        diff = changes(self._written.get(group_id, {}), new)
        if not diff:
            return
        try:
            self.record_sink(group_id, diff)
        except ApiError as exc:
            self._made.forget(group_id)  # so that the next call compares with what was written
            logger.error(
                "group %s: %d record(s) not written to __consumer_offsets, retried with its "
                "next change: %s",
                group_id,
                len(diff),
                exc,
            )
            return
        if new:
            self._written[group_id] = new
        else:
            self._written.pop(group_id, None)

    @contextmanager
    def persisting(self, group_id: str) -> Iterator[None]:
        """Hold back :meth:`persist` until the block ends, then persist ``group_id``: for a
        caller making several changes to one group as one request (the group migration)."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1
            self.persist(group_id)

    def restore(self, records: Mapping[RecordKey, RecordValue], now_ms: int) -> None:
        """Take over the groups the latest consumer group records describe (as a store
        read them back on start); every member's session restarts at ``now_ms``."""
        for group_id, group in rebuild(records, self.config, now_ms).items():
            self.groups[group_id] = group
            session_timeout_ms = self.session_timeout_ms(group_id)
            if session_timeout_ms != self.config.session_timeout_ms:
                for member_id in group.session_deadlines:
                    group.session_deadlines[member_id] = now_ms + session_timeout_ms
        for key, value in records.items():
            self._written.setdefault(key.group_id, {})[key] = value

    # -- group configs -----------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms``, else the broker's (Kafka's
        ``consumerGroupSessionTimeoutMs(groupId)``)."""
        value = self.group_configs.get(group_id, {}).get("consumer.session.timeout.ms")
        return int(value) if value is not None else self.config.session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        value = self.group_configs.get(group_id, {}).get("consumer.heartbeat.interval.ms")
        return int(value) if value is not None else self.config.heartbeat_interval_ms

    # -- heartbeat ---------------------------------------------------------------------

    def heartbeat(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        """Answer one ConsumerGroupHeartbeat, or raise Kafka's error for it (the group is
        then unchanged). The group's timers due at ``now_ms`` run first, so that the answer
        does not depend on how promptly :meth:`tick` was called."""
        validate(request, self.config.assignors)
        try:
            return self._heartbeat(now_ms, request)
        finally:
            self.persist(request.group_id)

    def _heartbeat(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        existing = self.groups.get(request.group_id)
        if existing is not None:
            self._run_timers(existing, now_ms)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(now_ms, request)

        joining = request.member_epoch == JOIN_EPOCH
        group = self.groups.get(request.group_id)
        if group is None:
            if not joining:
                raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
            group = ConsumerGroup(request.group_id)
        member_id = request.member_id or self._new_id()
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise GroupMaxSizeReachedError(
                "The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members."
            )
        member, replaced = self._find_member(group, member_id, request)

        updated = attrs.evolve(
            member,
            instance_id=request.instance_id
            if request.instance_id is not None
            else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                request.server_assignor
                if request.server_assignor is not None
                else member.server_assignor
            ),
            subscribed_topic_names=(
                tuple(sorted(set(request.subscribed_topic_names)))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=request.client_id,
            client_host=request.client_host,
        )
        bump = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )

        # From here on the group changes; everything that can refuse the request is above.
        reconciled = self.update_member(group, updated, replaced, bump, request.owned, now_ms)
        group.session_deadlines[member_id] = now_ms + self.session_timeout_ms(group.group_id)

        changed = reconciled.assigned != member.assigned
        return HeartbeatResponse(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned if request.is_full or changed else None,
        )

    def update_member(
        self,
        group: ConsumerGroup,
        updated: Member,
        replaced: Member | None,
        bump: bool,
        owned: Assignment | None,
        now_ms: int,
    ) -> Member:
        """Record ``updated`` (taking the place of the static member ``replaced``, if any),
        bump the group epoch when ``bump`` or the subscribed topics changed, compute a new
        target when due, and move the member one step towards it: the member as it is now.
        The group is registered if new."""
        self.groups.setdefault(group.group_id, group)
        if replaced is not None:
            self._replace_static(group, replaced, updated)
        elif updated != group.members.get(updated.member_id):
            group.put(updated)
        if self._refresh_metadata(group) or bump:
            group.group_epoch += 1
            logger.info("group %s: epoch %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        return self._reconcile(group, updated, owned, now_ms)

    def _find_member(
        self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest
    ) -> tuple[Member, Member | None]:
        """The member the request is from (a new one when joining), and the static member
        it replaces, if any."""
        joining = request.member_epoch == JOIN_EPOCH
        if request.instance_id is None:
            existing = group.members.get(member_id)
            if existing is None:
                if not joining:
                    raise UnknownMemberIdError(
                        f"Member {member_id} is not a member of group {group.group_id}."
                    )
                return Member(member_id=member_id), None
            if joining:
                return _rejoined(existing), None
            _check_epoch(existing, request)
            return existing, None

        static = group.static_member(request.instance_id)
        if joining:
            if static is None:
                existing = group.members.get(member_id)
                if existing is not None:
                    return _rejoined(existing), None
                return Member(member_id=member_id), None
            if static.member_id == member_id and static.member_epoch != STATIC_LEAVE_EPOCH:
                return _rejoined(static), None
            if static.member_epoch != STATIC_LEAVE_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"Static member {member_id} with instance id {request.instance_id} cannot "
                    f"join the group because the instance id is owned by {static.member_id} member."
                )
            copy = attrs.evolve(
                static, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            return copy, static
        if static is None:
            raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
        if static.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {request.instance_id} was "
                f"fenced by member {static.member_id}."
            )
        _check_epoch(static, request)
        return static, None

    def _replace_static(self, group: ConsumerGroup, old: Member, new: Member) -> None:
        """A static member rejoining under a new member id takes the old one's place,
        partitions and target without a new group epoch."""
        target = group.target.get(old.member_id, {})
        group.remove(old.member_id)
        group.put(new)
        group.target[new.member_id] = target
        logger.info(
            "group %s: static member %s replaced by %s",
            group.group_id,
            old.member_id,
            new.member_id,
        )

    def _reconcile(
        self, group: ConsumerGroup, member: Member, owned: Assignment | None, now_ms: int
    ) -> Member:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        target = group.target.get(member.member_id, {})
        updated = reconcile(member, group.assignment_epoch, target, group.partition_epoch, owned)
        if updated == member:
            return member
        group.put(updated)
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            group.revocation_deadlines[member.member_id] = (
                updated.member_epoch,
                now_ms + max(updated.rebalance_timeout_ms, 0),
            )
        else:
            group.revocation_deadlines.pop(member.member_id, None)
        return updated

    # -- leave and removal -------------------------------------------------------------

    def _leave(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
        else:
            static = group.static_member(request.instance_id)
            if static is None:
                raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
            if static.member_id != request.member_id:
                raise FencedInstanceIdError(
                    f"Static member {request.member_id} with instance id {request.instance_id} "
                    f"was fenced by member {static.member_id}."
                )
            member = static
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                # Kept, with its partitions, until its session expires or it is replaced.
                group.put(
                    attrs.evolve(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
                )
                group.revocation_deadlines.pop(member.member_id, None)
                logger.info(
                    "group %s: static member %s left for now", group.group_id, member.member_id
                )
                return HeartbeatResponse(
                    member_id=member.member_id,
                    member_epoch=STATIC_LEAVE_EPOCH,
                    heartbeat_interval_ms=0,
                )
        self.remove_member(group, member.member_id, "it left the group", now_ms)
        return HeartbeatResponse(
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )

    def remove_member(
        self, group: ConsumerGroup, member_id: str, why: str, now_ms: int | None = None
    ) -> None:
        """Remove (fence) a member: its partitions are free at once and the group epoch
        moves on, so that the next heartbeat computes a new target. When it is the last
        member using the consumer protocol and the others use the classic protocol, the
        group goes to :attr:`downgrade` instead, if the migration policy allows."""
        member = group.members.get(member_id)
        if member is None:
            return
        if self.downgrade is not None and self._may_downgrade(group, member):
            group.remove(member_id)
            del self.groups[group.group_id]
            logger.info(
                "group %s: member %s removed because %s; the other members use the classic "
                "protocol: the group becomes a classic group",
                group.group_id,
                member_id,
                why,
            )
            self.downgrade(group, self._now_ms(now_ms))
            return
        group.remove(member_id)
        self._refresh_metadata(group)
        group.group_epoch += 1
        logger.info(
            "group %s: member %s removed because %s; epoch %d",
            group.group_id,
            member_id,
            why,
            group.group_epoch,
        )

    def downgrade_after_replacement(
        self, group: ConsumerGroup, replaced: Member, now_ms: int
    ) -> bool:
        """After a static member using the consumer protocol was replaced by a classic one:
        hand the group to :attr:`downgrade` when every member now uses the classic protocol
        and the policy allows (Kafka's validateOnlineDowngradeWithReplacedMemberId);
        whether it did."""
        if (
            self.downgrade is None
            or replaced.uses_classic_protocol
            or not group.members
            or not all(m.uses_classic_protocol for m in group.members.values())
            or not self.config.downgrade_enabled
            or len(group.members) > self.config.classic_max_size
        ):
            return False
        del self.groups[group.group_id]
        logger.info(
            "group %s: static member %s replaced by a classic member; the group becomes a "
            "classic group",
            group.group_id,
            replaced.member_id,
        )
        self.downgrade(group, now_ms)
        return True

    def _may_downgrade(self, group: ConsumerGroup, leaving: Member) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        others = [m for m in group.members.values() if m.member_id != leaving.member_id]
        if leaving.uses_classic_protocol or not others:
            return False
        if not all(m.uses_classic_protocol for m in others):
            return False
        if not self.config.downgrade_enabled:
            logger.info(
                "group %s: not downgraded to a classic group: group.consumer.migration.policy "
                "is %s",
                group.group_id,
                self.config.migration_policy,
            )
            return False
        return len(others) <= self.config.classic_max_size

    def _now_ms(self, now_ms: int | None) -> int:
        if now_ms is not None:
            return now_ms
        if self._clock is None:
            raise TypeError("this coordinator has no clock: pass now_ms")
        return self._clock()

    # -- topics and assignment ---------------------------------------------------------

    def topics_changed(self) -> None:
        """Re-read the topic image: a group whose subscribed topics appeared, vanished or
        changed their partition count gets a new group epoch (and a new target on the
        next heartbeat)."""
        for group in list(self.groups.values()):
            if group.members and self._refresh_metadata(group):
                group.group_epoch += 1
                self.persist(group.group_id)

    def _refresh_metadata(self, group: ConsumerGroup) -> bool:
        """Recompute the group's subscribed topics; whether they changed."""
        metadata = group.subscribed_topics(self.topics())
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _assign(self, group: ConsumerGroup) -> None:
        """Compute the target assignment at the group epoch."""
        name = group.preferred_assignor(self.config.assignors)
        topics = {info.topic_id: info for info in group.subscription_metadata.values()}
        members = tuple(
            MemberSpec(
                member_id=m.member_id,
                instance_id=m.instance_id,
                topics=frozenset(
                    group.subscription_metadata[n].topic_id
                    for n in resolve(
                        m.subscribed_topic_names,
                        m.subscribed_topic_regex,
                        group.subscription_metadata,
                    )
                ),
            )
            for m in group.members.values()
        )
        spec = AssignmentSpec(members=members, topics=topics, current=dict(group.target))
        target = ASSIGNORS[name].assign(spec)
        _check_target(group, spec, target, name)
        group.target = {m.member_id: target.get(m.member_id, {}) for m in members}
        group.assignment_epoch = group.group_epoch
        logger.info(
            "group %s: target assignment for epoch %d computed by %s",
            group.group_id,
            group.group_epoch,
            name,
        )

    # -- time --------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do (None: nothing scheduled)."""
        deadlines = [d for g in self.groups.values() for d in g.session_deadlines.values()]
        deadlines += (d for g in self.groups.values() for _, d in g.revocation_deadlines.values())
        deadlines += (d for g in self.groups.values() for d in g.join_deadlines.values())
        deadlines += (d for g in self.groups.values() for d in g.sync_deadlines.values())
        return min(deadlines, default=None)

    def tick(self, now_ms: int | None = None) -> None:
        """Remove the members whose session expired, or that kept partitions to revoke past
        their rebalance timeout, at ``now_ms`` (by default the injected clock's time)."""
        if now_ms is None:
            if self._clock is None:
                raise TypeError("tick() needs now_ms: this coordinator has no clock")
            now_ms = self._clock()
        for group in list(self.groups.values()):
            self._run_timers(group, now_ms)
            self.persist(group.group_id)

    def run_timers(self, group_id: str, now_ms: int) -> None:
        """Run the timers of one group that are due at ``now_ms``."""
        group = self.groups.get(group_id)
        if group is not None:
            self._run_timers(group, now_ms)
            self.persist(group_id)

    def _run_timers(self, group: ConsumerGroup, now_ms: int) -> None:
        def live() -> bool:  # a removal may have turned the group into a classic one
            return self.groups.get(group.group_id) is group

        expired = [
            (member_id, why)
            for deadlines, why in (
                (group.session_deadlines, "its session expired"),
                (group.join_deadlines, "it did not rejoin within its rebalance timeout"),
                (group.sync_deadlines, "it did not send SyncGroup within its rebalance timeout"),
            )
            for member_id, deadline in list(deadlines.items())
            if deadline <= now_ms
        ]
        for member_id, why in expired:
            if not live():
                return
            self.remove_member(group, member_id, why, now_ms)
        for member_id, (epoch, deadline) in list(group.revocation_deadlines.items()):
            if deadline > now_ms or not live():
                continue
            member = group.members.get(member_id)
            if member is not None and member.member_epoch == epoch:
                self.remove_member(
                    group,
                    member_id,
                    f"it did not revoke its partitions within {member.rebalance_timeout_ms} ms",
                    now_ms,
                )
            else:
                group.revocation_deadlines.pop(member_id, None)

    # -- read-outs ---------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        """ConsumerGroupDescribe's read-out of one group, or GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        return describe(group, self.topics(), self.config.assignors)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for a consumer-type group: only an Empty one (NON_EMPTY_GROUP
        otherwise, GROUP_ID_NOT_FOUND for none). Its committed offsets are the caller's."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if group.members:
            raise NonEmptyGroupError(f"Group {group_id} has {len(group.members)} members.")
        del self.groups[group_id]
        self.persist(group_id)

    def list_groups(self) -> list[tuple[str, str]]:
        """Every consumer-type group with its state, as ListGroups reports them."""
        return [(group_id, group.state.value) for group_id, group in self.groups.items()]


def _rejoined(member: Member) -> Member:
    """A member still in the group that joins again with epoch 0 and its member id (after
    being fenced, or because the answer to its join was lost; Kafka accepts this since
    KAFKA-19233): it holds nothing now (a join reports no partitions), so it starts again
    from epoch 0 with its subscription, and its partitions are free for its target at once."""
    return attrs.evolve(
        member,
        member_epoch=JOIN_EPOCH,
        previous_member_epoch=JOIN_EPOCH,
        state=MemberState.STABLE,
        assigned={},
        pending_revocation={},
    )


def _check_epoch(member: Member, request: HeartbeatRequest) -> None:
    """FENCED_MEMBER_EPOCH unless the request's epoch is the member's, or its previous one
    with no partition owned beyond those assigned (the answer that moved it on was lost)."""
    received = request.member_epoch
    if received > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch
        or request.owned is None
        or not partitions.is_subset(request.owned, member.assigned)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )


def _check_target(
    group: ConsumerGroup, spec: AssignmentSpec, target: dict[str, Assignment], name: str
) -> None:
    """UNKNOWN_SERVER_ERROR for an assignor's answer that breaks the rules (a bug)."""
    seen: set[tuple[uuid.UUID, int]] = set()
    subscriptions = {m.member_id: m.topics for m in spec.members}
    for member_id, assignment in target.items():
        for topic_id, p in partitions.each(assignment):
            topic = spec.topics.get(topic_id)
            if (
                member_id not in subscriptions
                or topic_id not in subscriptions[member_id]
                or topic is None
                or not 0 <= p < topic.partitions
                or (topic_id, p) in seen
            ):
                raise UnknownServerError(
                    f"Failed to compute a new target assignment for epoch {group.group_epoch}: "
                    f"assignor {name} gave partition {p} of topic {topic_id} to {member_id}"
                )
            seen.add((topic_id, p))
