"""Online migration between classic and consumer groups (Kafka 4's
``group.consumer.migration.policy``), and the routing of every group request to the kind
of group that holds its id; without I/O.

Theory of operation. A group id is held by a classic group (the engine's) or by a
consumer group (the consumer coordinator's), never both with members. Committed offsets
always stay with the classic side, in an Empty classic group when a consumer group holds
the id (as before), so a conversion never moves them.

- **upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a classic group with members
  converts it when the policy allows (``bidirectional``, ``upgrade``), the group uses the
  consumer protocol and its size is within ``group.consumer.max.size``: each member
  becomes a consumer group member using the classic protocol, at the generation as its
  epoch, holding its last assignment (the group epoch and the target too), and waiting
  JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS. Otherwise
  GROUP_ID_NOT_FOUND ("Group g is not a consumer group"), as Kafka answers.
- **downgrade**: when the last member using the consumer protocol leaves (or is fenced)
  and every other member uses the classic protocol, the consumer group becomes a classic
  group when the policy allows (``bidirectional``, ``downgrade``) and its size is within
  ``group.max.size``: Stable at the group epoch, each member with its target as its
  assignment, then a rebalance, so the members join the classic way.
- an Empty classic group is simply replaced by a consumer group (its offsets stay), and an
  Empty consumer group by a classic group when a JoinGroup names its id; classic
  requests naming a consumer group with members go to its classic members
  (:class:`~kafkette.server.groups.consumer_protocol.classic.members.ClassicMembers`):
  a JoinGroup with another protocol type is INCONSISTENT_GROUP_PROTOCOL, as Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from kafkette.errors import GroupIdNotFoundError, RebalanceInProgressError, UnknownMemberIdError
from kafkette.server.groups.consumer_protocol.classic import embedded
from kafkette.server.groups.consumer_protocol.classic.members import ClassicMembers
from kafkette.server.groups.consumer_protocol.coordinator import ConsumerGroupCoordinator
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup, PartitionOwnedTwiceError
from kafkette.server.groups.consumer_protocol.heartbeat import (
    HeartbeatRequest,
    HeartbeatResponse,
    validate,
)
from kafkette.server.groups.consumer_protocol.member import (
    JOIN_EPOCH,
    ClassicMember,
    Member,
)
from kafkette.server.groups.consumer_protocol.topics import TopicInfo
from kafkette.server.groups.engine import GroupEngine, JoinParams
from kafkette.server.groups.group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroupState,
    Group,
    JoinCallback,
    JoinResult,
    SyncCallback,
    SyncResult,
    invoke_join,
    invoke_sync,
)
from kafkette.server.groups.group import Member as ClassicGroupMember

logger = logging.getLogger("kafkette.server.groups")


class GroupMigration:
    """Both kinds of group over one set of group ids: routes each request, converts."""

    def __init__(self, engine: GroupEngine, consumer: ConsumerGroupCoordinator) -> None:
        self.engine = engine
        self.consumer = consumer
        self.classic_members = ClassicMembers(consumer)
        consumer.downgrade = self._downgrade
        engine.offsets.consumer_group_topics = self._subscribed_topics

    def _subscribed_topics(self, group_id: str) -> frozenset[str]:
        group = self.consumer.groups.get(group_id)
        if group is None or not group.members:
            return frozenset()
        return frozenset(group.subscription_metadata)

    # -- ConsumerGroupHeartbeat --------------------------------------------------------

    def consumer_heartbeat(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        """Answer a ConsumerGroupHeartbeat, or raise Kafka's error for it. A classic group
        of that id with members is upgraded first if it may be (else GROUP_ID_NOT_FOUND);
        the upgrade takes effect only if the heartbeat then succeeds, as Kafka's records
        are only written then."""
        validate(request, self.consumer.config.assignors)
        with self.consumer.persisting(request.group_id):
            return self._consumer_heartbeat(now_ms, request)

    def _consumer_heartbeat(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        group_id = request.group_id
        self.consumer.run_timers(group_id, now_ms)
        classic = None if group_id in self.consumer.groups else self.engine.groups.get(group_id)
        if classic is not None:
            self.engine.tick_group(classic, now_ms)
        if classic is None or not classic.members:
            if classic is not None:
                classic.pending_members.clear()  # an Empty classic group is replaced
            return self.consumer.heartbeat(now_ms, request)
        if request.member_epoch != JOIN_EPOCH or not self._may_upgrade(classic):
            raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group")
        converted = self._converted(now_ms, classic)
        self.consumer.groups[group_id] = converted
        try:
            response = self.consumer.heartbeat(now_ms, request)
        except Exception:
            if self.consumer.groups.get(group_id) is converted:
                del self.consumer.groups[group_id]
            raise
        self._upgraded(now_ms, classic, converted)
        return response

    def _may_upgrade(self, classic: Group) -> bool:
        """Kafka's validateOnlineUpgrade."""
        config = self.consumer.config
        if not config.upgrade_enabled:
            logger.info(
                "group %s: not upgraded to a consumer group: group.consumer.migration.policy is %s",
                classic.group_id,
                config.migration_policy,
            )
            return False
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            logger.info(
                "group %s: not upgraded to a consumer group: protocol type %r",
                classic.group_id,
                classic.protocol_type,
            )
            return False
        return len(classic.members) <= config.max_size

    def _converted(self, now_ms: int, classic: Group) -> ConsumerGroup:
        group_id = classic.group_id
        try:
            converted = to_consumer_group(classic, self.consumer.topics())
        except (embedded.MalformedProtocolError, PartitionOwnedTwiceError, KeyError) as exc:
            logger.warning("group %s: cannot upgrade to a consumer group: %s", group_id, exc)
            raise GroupIdNotFoundError(
                f"Cannot upgrade the classic group {group_id} to consumer group because the "
                "embedded consumer protocol is malformed."
            ) from None
        for member in classic.members.values():
            converted.session_deadlines[member.member_id] = now_ms + member.session_timeout_ms
        return converted

    def _upgraded(self, now_ms: int, classic: Group, converted: ConsumerGroup) -> None:
        """The upgrade took: answer what waited, keep only the offsets on the classic side."""
        group_id = classic.group_id
        for member in classic.members.values():
            invoke_join(
                member,
                JoinResult(error_code=RebalanceInProgressError.code, member_id=member.member_id),
            )
            invoke_sync(member, SyncResult(error_code=RebalanceInProgressError.code))
        holder = Group(group_id, ClassicGroupState.EMPTY, now_ms)
        holder.offsets = classic.offsets
        self.engine.groups[group_id] = holder
        self.engine.store.write_group(group_id, None)
        logger.info(
            "group %s: classic group at generation %d upgraded to a consumer group with %d "
            "member(s)",
            group_id,
            classic.generation_id,
            len(classic.members),
        )

    def _downgrade(self, group: ConsumerGroup, now_ms: int) -> None:
        classic = to_classic_group(group, self.consumer.topics(), now_ms)
        holder = self.engine.groups.get(group.group_id)
        if holder is not None:
            classic.offsets = holder.offsets
        self.engine.adopt(classic, now_ms)
        logger.info(
            "group %s: consumer group at epoch %d downgraded to a classic group with %d member(s)",
            group.group_id,
            group.group_epoch,
            len(classic.members),
        )

    # -- classic APIs ------------------------------------------------------------------

    def join(self, now_ms: int, params: JoinParams, callback: JoinCallback) -> None:
        """JoinGroup: to the classic members of a consumer group with members, else to the
        classic engine (an Empty consumer group of that id is deleted first)."""
        with self.consumer.persisting(params.group_id):
            self._join(now_ms, params, callback)

    def _join(self, now_ms: int, params: JoinParams, callback: JoinCallback) -> None:
        self.consumer.run_timers(params.group_id, now_ms)
        group = self.consumer.groups.get(params.group_id)
        if group is not None and group.members:
            callback(self.classic_members.join(now_ms, group, params))
            return
        if group is not None:
            del self.consumer.groups[params.group_id]
            logger.info(
                "group %s: empty consumer group replaced by a classic group", group.group_id
            )
        self.engine.join(now_ms, params, callback)

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
        """SyncGroup, to whichever group holds the id."""
        with self.consumer.persisting(group_id):
            self.consumer.run_timers(group_id, now_ms)
            group = self.consumer.groups.get(group_id)
            if group is not None:
                if not group.members:
                    callback(SyncResult(error_code=UnknownMemberIdError.code))
                    return
                callback(
                    self.classic_members.sync(
                        now_ms,
                        group,
                        generation_id=generation_id,
                        member_id=member_id,
                        group_instance_id=group_instance_id,
                        protocol_type=protocol_type,
                        protocol_name=protocol_name,
                    )
                )
                return
        self.engine.sync(
            now_ms,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            callback=callback,
        )

    def heartbeat(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        """Heartbeat, to whichever group holds the id: an error code."""
        with self.consumer.persisting(group_id):
            return self._heartbeat(
                now_ms,
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
            )

    def _heartbeat(
        self,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        self.consumer.run_timers(group_id, now_ms)
        group = self.consumer.groups.get(group_id)
        if group is None:
            return self.engine.heartbeat(
                now_ms,
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
            )
        return self.classic_members.heartbeat(
            now_ms,
            group,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )

    def leave(
        self, now_ms: int, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """LeaveGroup, to whichever group holds the id: (group error, error per member)."""
        with self.consumer.persisting(group_id):
            self.consumer.run_timers(group_id, now_ms)
            group = self.consumer.groups.get(group_id)
            if group is None:
                return self.engine.leave(now_ms, group_id, members)
            return 0, self.classic_members.leave(now_ms, group, members)


# -- conversions ---------------------------------------------------------------------------


def to_consumer_group(classic: Group, topics: Mapping[str, TopicInfo]) -> ConsumerGroup:
    """A consumer group from a classic group with members (Kafka's
    ConsumerGroup.fromClassicGroup): the group epoch, the target and each member's epoch
    are the generation; each member holds its last assignment, Stable. Raises
    :class:`~kafkette.server.groups.consumer_protocol.classic.embedded.MalformedProtocolError` for
    bytes that do not parse, PartitionOwnedTwiceError for assignments that overlap."""
    group = ConsumerGroup(classic.group_id)
    generation = classic.generation_id
    group.group_epoch = generation
    group.assignment_epoch = generation
    protocol = classic.protocol_name
    for m in classic.members.values():
        metadata = m.metadata(protocol) if protocol is not None else m.protocols[0][1]
        subscription = embedded.parse_subscription(metadata)
        assigned = embedded.by_topic_id(embedded.parse_assignment(m.assignment), topics)
        member = Member(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id or None,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            member_epoch=generation,
            previous_member_epoch=generation,
            assigned=assigned,
            classic=ClassicMember(
                session_timeout_ms=m.session_timeout_ms, protocols=tuple(m.protocols)
            ),
        )
        group.put(member)
        group.target[member.member_id] = assigned
    group.subscription_metadata = group.subscribed_topics(topics)
    return group


def to_classic_group(group: ConsumerGroup, topics: Mapping[str, TopicInfo], now_ms: int) -> Group:
    """A classic group from a consumer group whose members all use the classic protocol
    (Kafka's ClassicGroup.fromConsumerGroup): Stable at the group epoch, protocol type
    ``consumer``, the first member the leader. Each member's assignment is what it may
    still hold (assigned and pending revocation), where Kafka puts its target: no member
    is sent it (a rebalance follows at once), but an upgrade before that rebalance ends
    reads it back as what the member holds, and a target not yet reached would let a
    partition the member still consumes go to another member."""
    classic = Group(group.group_id, ClassicGroupState.STABLE, now_ms)
    classic.generation_id = group.group_epoch
    for m in group.members.values():
        assert m.classic is not None
        classic.add(
            ClassicGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=list(m.classic.protocols),
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        held = group.members[member.member_id].owned()
        version = embedded.version_of(member.metadata(classic.protocol_name))
        member.assignment = embedded.encode_assignment(held, topics, version)
    return classic
