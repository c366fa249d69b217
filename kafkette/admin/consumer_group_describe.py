"""Reading a KIP-848 ``consumer`` group's ConsumerGroupDescribe answer into the admin's
:class:`~kafkette.admin.types.ConsumerGroupDescription`.

The admin client asks a group's coordinator with ConsumerGroupDescribe first,
as Kafka's Admin does since 4.0; a group that is not a ``consumer`` group
(GROUP_ID_NOT_FOUND) or a broker without the API is asked again with
DescribeGroups (the classic description).
"""

from __future__ import annotations

from kafkette.admin.types import (
    ConsumerGroupDescription,
    GroupState,
    GroupType,
    MemberDescription,
    Node,
)
from kafkette.protocol.messages.consumer_group_describe_response import (
    Assignment,
    DescribedGroup,
)
from kafkette.structs import TopicPartition

CONSUMER_PROTOCOL = "consumer"


def partitions_of(assignment: Assignment) -> frozenset[TopicPartition]:
    """The topic-partitions of an assignment (named by topic; ids are not needed here)."""
    return frozenset(
        TopicPartition(topics.topic_name, partition)
        for topics in assignment.topic_partitions
        for partition in topics.partitions
    )


def consumer_group_description(
    group: DescribedGroup, coordinator: Node | None
) -> ConsumerGroupDescription:
    """The description of a ``consumer`` group from its ConsumerGroupDescribe entry."""
    members = tuple(
        MemberDescription(
            member.member_id,
            member.instance_id,
            member.client_id,
            member.client_host,
            partitions_of(member.assignment),
            target_assignment=partitions_of(member.target_assignment),
            member_epoch=member.member_epoch,
        )
        for member in group.members
    )
    return ConsumerGroupDescription(
        group_id=group.group_id,
        is_simple_consumer_group=False,
        members=members,
        partition_assignor=group.assignor_name,
        state=GroupState.parse(group.group_state),
        coordinator=coordinator,
        protocol_type=CONSUMER_PROTOCOL,
        type=GroupType.CONSUMER,
        group_epoch=group.group_epoch,
        target_assignment_epoch=group.assignment_epoch,
    )
