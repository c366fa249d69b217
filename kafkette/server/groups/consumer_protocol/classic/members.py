"""Members of a consumer group that speak the classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), as Kafka 4 keeps them after an online upgrade or when a classic
consumer joins a consumer group: without I/O, every answer given at once.

Theory of operation. A classic member is a consumer group member like the others (its
subscription comes from the ConsumerProtocolSubscription in its JoinGroup, its assignment
is its part of the target, reached step by step by :mod:`.reconciliation`), with its
member epoch as its generation:

- JoinGroup updates the member (a changed subscription bumps the group epoch), moves it
  one step towards its target with the partitions its subscription says it owns, and
  answers with its epoch as the generation; it is never the leader, so it sends SyncGroup
  with no assignments and gets its assigned partitions there;
- Heartbeat answers REBALANCE_IN_PROGRESS when the member must join again: the group
  epoch moved past it, it has partitions to revoke, or partitions it waited for are free;
- SyncGroup answers REBALANCE_IN_PROGRESS too when the group epoch moved past the member
  (unless it is revoking, which a rejoin finishes);
- LeaveGroup removes it.

Timers (Kafka's): its own session timeout, restarted by each request; SyncGroup due
within its rebalance timeout after the JoinGroup answer; JoinGroup due within its
rebalance timeout after it was told to rejoin. Missing one removes the member.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence

import attrs

from kafkette.errors import (
    NO_ERROR,
    ApiError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafkette.server.groups.consumer_protocol.classic import embedded
from kafkette.server.groups.consumer_protocol.coordinator import ConsumerGroupCoordinator
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup
from kafkette.server.groups.consumer_protocol.member import ClassicMember, Member, MemberState
from kafkette.server.groups.engine import JoinParams
from kafkette.server.groups.group import CONSUMER_PROTOCOL_TYPE, JoinResult, SyncResult

logger = logging.getLogger("kafkette.server.groups.consumer")


class ClassicMembers:
    """The classic group APIs for classic members of the coordinator's consumer groups."""

    def __init__(
        self,
        coordinator: ConsumerGroupCoordinator,
        *,
        id_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.coordinator = coordinator
        self._new_id = id_factory

    # -- JoinGroup ------------------------------------------------------------------------

    def join(self, now_ms: int, group: ConsumerGroup, params: JoinParams) -> JoinResult:
        """JoinGroup to a consumer group with members (Kafka's classicGroupJoinToConsumerGroup)."""
        member_id = params.member_id or self._new_id()
        try:
            return self._join(now_ms, group, params, member_id)
        except ApiError as error:
            return JoinResult(error_code=error.code, member_id=params.member_id)

    def _join(
        self, now_ms: int, group: ConsumerGroup, params: JoinParams, member_id: str
    ) -> JoinResult:
        max_size = self.coordinator.config.max_size
        if member_id not in group.members and len(group.members) >= max_size:
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members."
            )
        names = [name for name, _ in params.protocols]
        if not group.supports_classic_protocols(params.protocol_type, names):
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s protocols are not supported."
            )
        if (
            not params.member_id
            and params.group_instance_id is None
            and params.require_known_member_id
        ):
            return JoinResult(error_code=MemberIdRequiredError.code, member_id=member_id)
        try:
            subscription = embedded.parse_subscription(params.protocols[0][1])
        except embedded.MalformedProtocolError as exc:
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s consumer protocol subscription does not parse: {exc}"
            ) from None

        member, replaced = self._find_member(group, params, member_id)
        updated = attrs.evolve(
            member,
            instance_id=params.group_instance_id,
            rack_id=subscription.rack_id if subscription.rack_id else member.rack_id,
            rebalance_timeout_ms=params.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex=None,
            client_id=params.client_id,
            client_host=params.client_host,
            classic=ClassicMember(
                session_timeout_ms=params.session_timeout_ms, protocols=tuple(params.protocols)
            ),
        )
        bump = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
        owned = embedded.by_topic_id(subscription.owned, self.coordinator.topics())
        reconciled = self.coordinator.update_member(group, updated, replaced, bump, owned, now_ms)
        assert reconciled.classic is not None
        if replaced is not None and self.coordinator.downgrade_after_replacement(
            group, replaced, now_ms
        ):
            # Now a classic group, rebalancing: the member's SyncGroup finds out.
            return JoinResult(
                member_id=reconciled.member_id,
                generation_id=reconciled.member_epoch,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=reconciled.classic.protocol_name,
            )
        group.join_deadlines.pop(reconciled.member_id, None)
        group.session_deadlines[reconciled.member_id] = now_ms + params.session_timeout_ms
        group.sync_deadlines[reconciled.member_id] = now_ms + max(params.rebalance_timeout_ms, 0)
        logger.info(
            "group %s: classic member %s joined at epoch %d",
            group.group_id,
            reconciled.member_id,
            reconciled.member_epoch,
        )
        return JoinResult(
            member_id=reconciled.member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=reconciled.classic.protocol_name,
        )

    def _find_member(
        self, group: ConsumerGroup, params: JoinParams, member_id: str
    ) -> tuple[Member, Member | None]:
        """The member joining (new, or as known), and the static member it replaces."""
        instance_id = params.group_instance_id
        if instance_id is None:
            existing = group.members.get(member_id)
            return (existing or Member(member_id=member_id)), None
        static = group.static_member(instance_id)
        if static is None:
            return Member(member_id=member_id), None
        if static.member_id == member_id:
            return static, None
        if params.member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {static.member_id}."
            )
        # A static member restarted: the new member id takes over its place and partitions.
        copy = attrs.evolve(static, member_id=member_id)
        return copy, static

    # -- SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------

    def sync(
        self,
        now_ms: int,
        group: ConsumerGroup,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """SyncGroup from a classic member: its assigned partitions (Kafka's
        classicGroupSyncToConsumerGroup)."""
        try:
            member = self._classic_member(group, member_id, group_instance_id)
            if generation_id != member.member_epoch:
                raise IllegalGenerationError(
                    f"The request generation id {generation_id} is not equal to the member "
                    f"epoch {member.member_epoch} of member {member_id}."
                )
            assert member.classic is not None
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise InconsistentGroupProtocolError(
                    f"The protocol type {protocol_type} is not {CONSUMER_PROTOCOL_TYPE}."
                )
            if protocol_name is not None and protocol_name != member.classic.protocol_name:
                raise InconsistentGroupProtocolError(
                    f"The protocol name {protocol_name} is not {member.classic.protocol_name}, "
                    "returned in the JoinGroup response."
                )
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._ask_rejoin(group, member, now_ms)
                raise RebalanceInProgressError(
                    f"A new rebalance is triggered in group {group.group_id} and member "
                    f"{member.member_id} should rejoin to catch up."
                )
        except ApiError as error:
            return SyncResult(error_code=error.code)
        group.sync_deadlines.pop(member.member_id, None)
        group.session_deadlines[member.member_id] = now_ms + member.classic.session_timeout_ms
        version = embedded.version_of(member.classic.protocols[0][1])
        return SyncResult(
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=member.classic.protocol_name,
            assignment=embedded.encode_assignment(
                member.assigned, self.coordinator.topics(), version
            ),
        )

    def heartbeat(
        self,
        now_ms: int,
        group: ConsumerGroup,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        """Heartbeat from a classic member: an error code; REBALANCE_IN_PROGRESS when it must
        join again (Kafka's classicGroupHeartbeatToConsumerGroup)."""
        try:
            member = self._classic_member(group, member_id, group_instance_id)
            if generation_id != member.member_epoch:
                raise IllegalGenerationError(
                    f"The request generation id {generation_id} is not equal to the member "
                    f"epoch {member.member_epoch} of member {member_id}."
                )
        except ApiError as error:
            return error.code
        assert member.classic is not None
        group.session_deadlines[member.member_id] = now_ms + member.classic.session_timeout_ms
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member)
            )
        ):
            self._ask_rejoin(group, member, now_ms)
            return RebalanceInProgressError.code
        return NO_ERROR

    def leave(
        self, now_ms: int, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
    ) -> list[int]:
        """LeaveGroup of classic members: an error code per (member id, instance id); an
        empty member id with an instance id removes that static member (an admin's removal)."""
        errors: list[int] = []
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    static = group.static_member(instance_id)
                    if static is None:
                        raise UnknownMemberIdError(
                            f"Instance id {instance_id} is not a member of group {group.group_id}."
                        )
                    member = self._classic_member(group, member_id or static.member_id, instance_id)
            except ApiError as error:
                errors.append(error.code)
                continue
            self.coordinator.remove_member(group, member.member_id, "it sent LeaveGroup", now_ms)
            errors.append(NO_ERROR)
            if self.coordinator.groups.get(group.group_id) is not group:
                errors += [UnknownMemberIdError.code] * (len(members) - len(errors))
                break
        return errors

    # -- helpers --------------------------------------------------------------------------

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> Member:
        """The member a classic request is from (Kafka's validateConsumerGroupMember and
        throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}."
                )
        else:
            static = group.static_member(instance_id)
            if static is None:
                raise UnknownMemberIdError(
                    f"Member with instance id {instance_id} is not a member of group "
                    f"{group.group_id}."
                )
            if static.member_id != member_id:
                raise FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {static.member_id}."
                )
            member = static
        if not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _ask_rejoin(group: ConsumerGroup, member: Member, now_ms: int) -> None:
        """The member is told to rejoin: it must, within its rebalance timeout."""
        group.join_deadlines.setdefault(
            member.member_id, now_ms + max(member.rebalance_timeout_ms, 0)
        )
