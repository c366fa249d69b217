"""The classic group protocol's membership rules over every group, without I/O.

:class:`GroupEngine` is Kafka's classic GroupCoordinator (GroupCoordinator.scala
in Kafka 3.x) as a plain class: each operation takes the time (``now_ms``) and
the request's fields, changes the groups, writes what Kafka persists to the
:class:`~kafkette.server.groups.store.GroupStore`, and answers. JoinGroup and
SyncGroup may have to wait for other members: they take a callback, called
once with the result, maybe at once, maybe from a later operation or
:meth:`GroupEngine.tick`. Timers are deadlines kept on the groups and
members; :meth:`GroupEngine.next_deadline_ms` says when ``tick`` next has
work:

- a member's session (``session.timeout.ms`` after its last heartbeat; a new
  member still joining gets 5 minutes, as Kafka's NewMemberJoinTimeoutMs);
  members waiting in a JoinGroup or SyncGroup are not expired;
- a member id given out with MEMBER_ID_REQUIRED (its session timeout);
- the join phase: the group's rebalance timeout, or for a group that was
  Empty ``group.initial.rebalance.delay.ms``, extended by the same delay
  while new members keep joining, up to the rebalance timeout (Kafka's
  InitialDelayedJoin);
- the sync phase: members that got their JoinGroup response must send
  SyncGroup within the rebalance timeout, or are removed.

Committed offsets (:mod:`~kafkette.server.groups.offsets`, with their expiry
timer) and the admin queries (:mod:`~kafkette.server.groups.queries`) work on
the same table of groups; the engine owns one of each and passes their
operations through, so the coordinator has one object to call.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from kafkette.errors import (
    NO_ERROR,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.group import (
    ClassicGroupState,
    Group,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
    invoke_join,
    invoke_sync,
    validate_current_member,
)
from kafkette.server.groups.offsets import GroupOffsets
from kafkette.server.groups.queries import GroupOverview, GroupQueries, GroupSummary
from kafkette.server.groups.store import (
    CommittedOffset,
    GroupStore,
    LoadedGroups,
    PartitionKey,
    StoredGroup,
    StoredMember,
)

logger = logging.getLogger("kafkette.server.groups")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
"""How long a new member's first join may wait (Kafka's NewMemberJoinTimeoutMs)."""

ACTIVE = (
    ClassicGroupState.PREPARING_REBALANCE,
    ClassicGroupState.COMPLETING_REBALANCE,
    ClassicGroupState.STABLE,
)


@attrs.frozen(kw_only=True)
class JoinParams:
    """The fields of a JoinGroup request, normalised across versions."""

    group_id: str
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    """JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED and its id."""
    supports_skip_assignment: bool = True
    """JoinGroup v9+ (KIP-814): a rejoining static leader is told to skip the assignment."""


class GroupEngine:
    """Every group this coordinator owns, and the classic group protocol over them."""

    def __init__(
        self,
        config: BrokerConfig,
        store: GroupStore,
        *,
        id_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self.offsets = GroupOffsets(config, store, self.groups)
        """Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry."""
        self.queries = GroupQueries(self.groups, self.offsets)
        """ListGroups, DescribeGroups and DeleteGroups."""
        self._new_id = id_factory

    @property
    def store(self) -> GroupStore:
        """Where the groups and their offsets are persisted."""
        return self.offsets.store

    @store.setter
    def store(self, store: GroupStore) -> None:
        self.offsets.store = store

    def schedule_offsets_check(self, now_ms: int) -> None:
        """Start the periodic offset expiry check (the first runs one interval from now)."""
        self.offsets.schedule_check(now_ms)

    # -- start ----------------------------------------------------------------------

    def restore(self, loaded: LoadedGroups, now_ms: int) -> None:
        """Rebuild the groups read back from the store (Kafka's loadGroup): a group with
        members is Stable in its stored generation and every member gets a fresh session."""
        for group_id, stored in loaded.groups.items():
            group = Group(
                group_id,
                ClassicGroupState.STABLE if stored.members else ClassicGroupState.EMPTY,
                stored.current_state_timestamp_ms,
            )
            group.generation_id = stored.generation
            group.protocol_type = stored.protocol_type or None
            group.protocol_name = stored.protocol_name
            group.leader_id = stored.leader_id
            for m in stored.members:
                protocols = [(stored.protocol_name or "", m.subscription)]
                member = Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=stored.protocol_type,
                    protocols=protocols,
                    assignment=m.assignment,
                    heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
                )
                group.members[member.member_id] = member
                if member.group_instance_id is not None:
                    group.static_members[member.group_instance_id] = member.member_id
            if group.leader_id is not None and group.leader_id not in group.members:
                group.leader_id = next(iter(group.members), None)
            group.subscribed_topics = group.compute_subscribed_topics()
            self.groups[group_id] = group
        for group_id, offsets in loaded.offsets.items():
            holder = self.groups.get(group_id)
            if holder is None:
                holder = self.groups[group_id] = Group(group_id, ClassicGroupState.EMPTY, now_ms)
            holder.offsets.update(offsets)

    # -- JoinGroup ----------------------------------------------------------------------

    def join(self, now_ms: int, params: JoinParams, callback: JoinCallback) -> None:
        """JoinGroup: ``callback`` gets the result once the join phase completes (or at once)."""

        def fail(error: int) -> None:
            callback(JoinResult(error_code=error, member_id=params.member_id))

        if not params.group_id:
            return fail(InvalidGroupIdError.code)
        if not (
            self.config.group_min_session_timeout_ms
            <= params.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return fail(InvalidSessionTimeoutError.code)
        group = self.groups.get(params.group_id)
        created = False
        if group is None:
            if params.member_id:
                return fail(UnknownMemberIdError.code)
            group = self.groups[params.group_id] = Group(
                params.group_id, ClassicGroupState.EMPTY, now_ms
            )
            created = True
        if not params.member_id:
            self._join_new_member(group, params, callback, now_ms)
        else:
            self._join_current_member(group, params, callback, now_ms)
        if created and not group.members and not group.pending_members and not group.offsets:
            del self.groups[group.group_id]  # a failed first join leaves no group behind
            return None
        if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)
        self.tick_group(group, now_ms)
        return None

    def _join_new_member(
        self, group: Group, params: JoinParams, callback: JoinCallback, now_ms: int
    ) -> None:
        if group.is_in(ClassicGroupState.DEAD):
            callback(JoinResult(error_code=CoordinatorNotAvailableError.code, member_id=""))
            return
        if not group.supports_protocols(params.protocol_type, list(params.protocols)):
            callback(JoinResult(error_code=InconsistentGroupProtocolError.code, member_id=""))
            return
        prefix = (
            params.group_instance_id if params.group_instance_id is not None else params.client_id
        )
        new_id = f"{prefix}-{self._new_id()}"
        if params.group_instance_id is not None:
            old_id = group.static_member_id(params.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, new_id, params, callback, now_ms)
            else:
                self._update_static_member(group, old_id, new_id, params, callback, now_ms)
        elif params.require_known_member_id:
            group.pending_members[new_id] = now_ms + params.session_timeout_ms
            callback(JoinResult(error_code=MemberIdRequiredError.code, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, params, callback, now_ms)

    def _join_current_member(
        self, group: Group, params: JoinParams, callback: JoinCallback, now_ms: int
    ) -> None:
        member_id = params.member_id

        def fail(error: int) -> None:
            callback(JoinResult(error_code=error, member_id=member_id))

        if group.is_in(ClassicGroupState.DEAD):
            return fail(CoordinatorNotAvailableError.code)
        if not group.supports_protocols(params.protocol_type, list(params.protocols)):
            return fail(InconsistentGroupProtocolError.code)
        if group.is_pending(member_id):
            if params.group_instance_id is not None:
                # Static members are never given pending ids (Kafka raises here).
                return fail(UnknownMemberIdError.code)
            self._add_member_and_rebalance(group, member_id, params, callback, now_ms)
            return None
        error = validate_current_member(group, member_id, params.group_instance_id)
        if error != NO_ERROR:
            return fail(error)
        member = group.members[member_id]
        state = group.state
        if state is ClassicGroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, params, callback, now_ms)
        elif state is ClassicGroupState.COMPLETING_REBALANCE:
            if member.matches(params.protocols):
                # The member lost its JoinGroup response: answer for the current generation.
                callback(
                    self._join_result(group, member_id, with_members=group.is_leader(member_id))
                )
            else:
                self._update_member_and_rebalance(group, member, params, callback, now_ms)
        elif state is ClassicGroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(params.protocols):
                self._update_member_and_rebalance(group, member, params, callback, now_ms)
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:
            return fail(UnknownMemberIdError.code)
        return None

    def _join_result(
        self, group: Group, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinResult:
        return JoinResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            skip_assignment=skip,
            members=group.current_member_metadata() if with_members else (),
        )

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, params: JoinParams, callback: JoinCallback, now_ms: int
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=params.group_instance_id,
            client_id=params.client_id,
            client_host=params.client_host,
            rebalance_timeout_ms=params.rebalance_timeout_ms,
            session_timeout_ms=params.session_timeout_ms,
            protocol_type=params.protocol_type,
            protocols=list(params.protocols),
            join_callback=callback,
            is_new=True,
            heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        if group.is_in(ClassicGroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member(
        self, member: Member, params: JoinParams, callback: JoinCallback | None
    ) -> None:
        member.protocols = list(params.protocols)
        member.rebalance_timeout_ms = params.rebalance_timeout_ms
        member.session_timeout_ms = params.session_timeout_ms
        if callback is not None and member.join_callback is not None:
            # A second JoinGroup while one waits (the client reconnected): the first one's
            # connection gets an answer instead of waiting forever.
            invoke_join(
                member,
                JoinResult(error_code=RebalanceInProgressError.code, member_id=member.member_id),
            )
        member.join_callback = callback

    def _update_member_and_rebalance(
        self, group: Group, member: Member, params: JoinParams, callback: JoinCallback, now_ms: int
    ) -> None:
        self._update_member(member, params, callback)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_static_member(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        params: JoinParams,
        callback: JoinCallback,
        now_ms: int,
    ) -> None:
        """A known group instance id joins with no member id: it takes over the old member
        id (KIP-345), without a rebalance when the group is Stable and the protocol the
        group would choose does not change."""
        assert params.group_instance_id is not None
        instance_id = params.group_instance_id
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._update_member(member, params, callback)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_in(ClassicGroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                try:
                    self._store_group(
                        group, {m.member_id: m.assignment for m in group.members.values()}
                    )
                except Exception:
                    logger.exception("group %s: storing member %s failed", group.group_id, new_id)
                    # As Kafka: the old member id stays, and the new instance is told why.
                    member.join_callback = None
                    member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = (
                        previous
                    )
                    group.replace_static_member(instance_id, new_id, old_id)
                    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                    callback(
                        JoinResult(
                            error_code=CoordinatorNotAvailableError.code,
                            member_id="",
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader_id=previous_leader,
                        )
                    )
                    return
                if params.supports_skip_assignment:
                    is_leader = group.is_leader(new_id)
                    result = self._join_result(
                        group, new_id, with_members=is_leader, skip=is_leader
                    )
                else:
                    # Before v9 the old leader id is returned, so that a rejoining leader
                    # does not run an assignment a Stable group would ignore.
                    result = attrs.evolve(
                        self._join_result(group, new_id, with_members=False),
                        leader_id=previous_leader,
                    )
                invoke_join(member, result)
            else:
                self._maybe_prepare_rebalance(group, now_ms)
        elif group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms)
        # PreparingRebalance: the join phase under way waits for this member too.

    # -- rebalance ------------------------------------------------------------------------

    def adopt(self, group: Group, now_ms: int) -> None:
        """Take over ``group``, converted from a consumer group (Stable, its members'
        assignments set), replacing any group of that id, and start a rebalance so that
        the members join the classic way."""
        for member in group.members.values():
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        self.groups[group.group_id] = group
        self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        self._maybe_prepare_rebalance(group, now_ms)

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, RebalanceInProgressError.code, now_ms)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        if group.is_in(ClassicGroupState.EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            group.join_deadline_ms = now_ms + delay
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        group.transition_to(ClassicGroupState.PREPARING_REBALANCE, now_ms)
        logger.info(
            "group %s: preparing to rebalance (generation %d)", group.group_id, group.generation_id
        )
        self._try_complete_join(group, now_ms)

    def _try_complete_join(self, group: Group, now_ms: int) -> None:
        """Complete the join phase early once every member has joined (not during the
        initial delay, which always runs its course)."""
        if (
            group.is_in(ClassicGroupState.PREPARING_REBALANCE)
            and group.initial_delay_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: Group, now_ms: int) -> None:
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            group.join_deadline_ms = now_ms + delay
            return
        self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        if group.is_in(ClassicGroupState.DEAD):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:  # static members keep their place until their session ends
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            logger.warning("group %s: no member rejoined; waiting again", group.group_id)
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            return
        group.init_next_generation(now_ms)
        if group.is_in(ClassicGroupState.EMPTY):
            logger.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._store_group(group, {})
            return
        logger.info(
            "group %s: generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            invoke_join(
                member,
                self._join_result(
                    group, member.member_id, with_members=group.is_leader(member.member_id)
                ),
            )
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _on_sync_deadline(self, group: Group, now_ms: int) -> None:
        group.sync_deadline_ms = None
        if not group.is_in(ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE):
            return
        if not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for member_id in late:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        logger.info("group %s: removed %s, which did not sync in time", group.group_id, late)
        self._prepare_rebalance(group, now_ms)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int, now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms)

    def _propagate_assignment(self, group: Group, error: int, now_ms: int) -> None:
        for member in group.members.values():
            result = (
                SyncResult(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
                if error == NO_ERROR
                else SyncResult(error_code=error)
            )
            if invoke_sync(member, result):
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _remove_member(self, group: Group, member: Member) -> None:
        """Drop a member; a JoinGroup or SyncGroup it has waiting is answered UNKNOWN_MEMBER_ID
        (the JoinGroup with no member id, so that a client still running joins afresh)."""
        group.remove(member.member_id)
        invoke_join(member, JoinResult(error_code=UnknownMemberIdError.code, member_id=""))
        invoke_sync(member, SyncResult(error_code=UnknownMemberIdError.code))

    def _remove_member_and_update_group(self, group: Group, member: Member, now_ms: int) -> None:
        self._remove_member(group, member)
        if group.is_in(ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms)
        elif group.is_in(ClassicGroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    def _remove_pending_member(self, group: Group, member_id: str, now_ms: int) -> None:
        group.pending_members.pop(member_id, None)
        if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    # -- SyncGroup -----------------------------------------------------------------------

    def sync(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """SyncGroup: ``callback`` gets the member's assignment once the leader's arrives."""

        def fail(error: int) -> None:
            callback(SyncResult(error_code=error))

        if not group_id:
            return fail(InvalidGroupIdError.code)
        group = self.groups.get(group_id)
        if group is None:
            return fail(UnknownMemberIdError.code)
        if group.is_in(ClassicGroupState.DEAD):
            return fail(CoordinatorNotAvailableError.code)
        error = validate_current_member(group, member_id, group_instance_id)
        if error != NO_ERROR:
            return fail(error)
        if generation_id != group.generation_id:
            return fail(IllegalGenerationError.code)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return fail(InconsistentGroupProtocolError.code)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return fail(InconsistentGroupProtocolError.code)
        member = group.members[member_id]
        if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
            return fail(RebalanceInProgressError.code)
        if group.is_in(ClassicGroupState.EMPTY):
            return fail(UnknownMemberIdError.code)
        if group.is_in(ClassicGroupState.STABLE):
            self._synced(group, member_id)
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            callback(
                SyncResult(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
            )
            return None
        # CompletingRebalance
        if member.sync_callback is not None:
            invoke_sync(member, SyncResult(error_code=RebalanceInProgressError.code))
        member.sync_callback = callback
        self._synced(group, member_id)
        if group.is_leader(member_id):
            assignment = {m: assignments.get(m, b"") for m in group.members}
            missing = [m for m in group.members if m not in assignments]
            if missing:
                logger.warning(
                    "group %s: the leader gave no assignment to %s", group.group_id, missing
                )
            try:
                self._store_group(group, assignment)
            except Exception:
                logger.exception("group %s: storing the assignment failed", group.group_id)
                self._reset_and_propagate_assignment_error(
                    group, CoordinatorNotAvailableError.code, now_ms
                )
                self._maybe_prepare_rebalance(group, now_ms)
                return None
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            group.transition_to(ClassicGroupState.STABLE, now_ms)
            self._propagate_assignment(group, NO_ERROR, now_ms)
        return None

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None

    # -- Heartbeat, LeaveGroup ----------------------------------------------------------------

    def heartbeat(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> int:
        """Heartbeat: an error code (REBALANCE_IN_PROGRESS tells the member to rejoin)."""
        if not group_id:
            return InvalidGroupIdError.code
        group = self.groups.get(group_id)
        if group is None:
            return UnknownMemberIdError.code
        if group.is_in(ClassicGroupState.DEAD):
            return CoordinatorNotAvailableError.code
        error = validate_current_member(group, member_id, group_instance_id)
        if error != NO_ERROR:
            return error
        if generation_id != group.generation_id:
            return IllegalGenerationError.code
        if group.is_in(ClassicGroupState.EMPTY):
            return UnknownMemberIdError.code
        member = group.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
            return RebalanceInProgressError.code
        return NO_ERROR

    def leave(
        self, now_ms: int, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """LeaveGroup for (member id, group instance id) pairs: (group error, error per member).
        An empty member id with an instance id removes that static member (an admin's removal)."""
        if not group_id:
            return InvalidGroupIdError.code, []
        group = self.groups.get(group_id)
        if group is None:
            return NO_ERROR, [UnknownMemberIdError.code] * len(members)
        if group.is_in(ClassicGroupState.DEAD):
            return CoordinatorNotAvailableError.code, []
        errors: list[int] = []
        for member_id, instance_id in members:
            if not member_id:
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(UnknownMemberIdError.code)
                else:
                    self._remove_member_and_update_group(group, group.members[current], now_ms)
                    errors.append(NO_ERROR)
            elif group.is_pending(member_id):
                self._remove_pending_member(group, member_id, now_ms)
                errors.append(NO_ERROR)
            elif (error := validate_current_member(group, member_id, instance_id)) != NO_ERROR:
                errors.append(error)
            else:
                self._remove_member_and_update_group(group, group.members[member_id], now_ms)
                errors.append(NO_ERROR)
        self.tick_group(group, now_ms)
        return NO_ERROR, errors

    # -- offsets and admin queries (GroupOffsets, GroupQueries) ------------------------------

    def commit(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[PartitionKey, CommittedOffset],
    ) -> dict[PartitionKey, int]:
        """OffsetCommit (:meth:`GroupOffsets.commit`)."""
        return self.offsets.commit(
            now_ms,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            offsets=offsets,
        )

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[PartitionKey] | None
    ) -> dict[PartitionKey, CommittedOffset | None]:
        """OffsetFetch (:meth:`GroupOffsets.fetch_offsets`)."""
        return self.offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(
        self, now_ms: int, group_id: str, partitions: Sequence[PartitionKey]
    ) -> tuple[int, dict[PartitionKey, int]]:
        """OffsetDelete (:meth:`GroupOffsets.delete_offsets`)."""
        return self.offsets.delete_offsets(now_ms, group_id, partitions)

    def remove_topic_offsets(self, now_ms: int, topics: Iterable[str]) -> int:
        """Offsets of deleted topics (:meth:`GroupOffsets.remove_topic_offsets`)."""
        return self.offsets.remove_topic_offsets(now_ms, topics)

    def expire_offsets(self, now_ms: int) -> None:
        """Offset expiry (:meth:`GroupOffsets.expire_offsets`)."""
        self.offsets.expire_offsets(now_ms)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupOverview]:
        """ListGroups (:meth:`GroupQueries.list_groups`)."""
        return self.queries.list_groups(states, types)

    def describe(self, group_id: str) -> GroupSummary:
        """DescribeGroups (:meth:`GroupQueries.describe`)."""
        return self.queries.describe(group_id)

    def delete_groups(self, now_ms: int, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups (:meth:`GroupQueries.delete_groups`)."""
        return self.queries.delete_groups(now_ms, group_ids)

    # -- time ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do (``None``: nothing scheduled)."""
        deadlines = [d for g in self.groups.values() if (d := self._group_deadline(g)) is not None]
        if (offsets_check := self.offsets.next_deadline_ms()) is not None:
            deadlines.append(offsets_check)
        return min(deadlines, default=None)

    def _group_deadline(self, group: Group) -> int | None:
        deadlines = list(group.pending_members.values())
        deadlines += (
            m.heartbeat_deadline_ms
            for m in group.members.values()
            if m.is_new or not (m.awaiting_join or m.awaiting_sync)
        )
        if group.join_deadline_ms is not None:
            deadlines.append(group.join_deadline_ms)
        if group.sync_deadline_ms is not None:
            deadlines.append(group.sync_deadline_ms)
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> None:
        """Run every timer due at ``now_ms``."""
        for group in list(self.groups.values()):
            self.tick_group(group, now_ms)
        self.offsets.tick(now_ms)

    def tick_group(self, group: Group, now_ms: int) -> None:
        """Run the timers of one group that are due at ``now_ms``."""
        for _ in range(1000):  # each round removes a due timer or moves it forward
            deadline = self._group_deadline(group)
            if (
                deadline is None
                or deadline > now_ms
                or self.groups.get(group.group_id) is not group
            ):
                return
            self._run_due(group, now_ms)
        raise AssertionError(f"{group!r}: timers keep firing at {now_ms}")

    def _run_due(self, group: Group, now_ms: int) -> None:
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now_ms:
                logger.info("group %s: pending member %s expired", group.group_id, member_id)
                self._remove_pending_member(group, member_id, now_ms)
        for member in list(group.members.values()):
            if member.member_id not in group.members or member.heartbeat_deadline_ms > now_ms:
                continue
            if member.is_new or not (member.awaiting_join or member.awaiting_sync):
                logger.info(
                    "group %s: member %s's session expired", group.group_id, member.member_id
                )
                self._remove_member_and_update_group(group, member, now_ms)
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
                self._on_join_deadline(group, now_ms)
            else:
                group.join_deadline_ms = None
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
            self._on_sync_deadline(group, now_ms)

    # -- persistence ---------------------------------------------------------------------------

    def _store_group(self, group: Group, assignment: Mapping[str, bytes]) -> None:
        protocol = group.protocol_name
        members = tuple(
            StoredMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        self.store.write_group(
            group.group_id,
            StoredGroup(
                protocol_type=group.protocol_type or "",
                generation=group.generation_id,
                protocol_name=protocol,
                leader_id=group.leader_id,
                current_state_timestamp_ms=group.state_timestamp_ms,
                members=members if group.members else (),
            ),
        )
