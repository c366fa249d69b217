"""ConsumerGroupDescribe's read-out of a consumer-type group, field for field."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import attrs

from kafkette.server.groups.consumer_protocol import partitions
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.topics import TopicInfo


@attrs.frozen
class TopicPartitions:
    """One topic's partitions in an assignment, with the topic's name."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@attrs.frozen
class DescribedMember:
    """One member as ConsumerGroupDescribe reports it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartitions, ...]
    """What the member was last given (its assigned partitions)."""
    target_assignment: tuple[TopicPartitions, ...]


@attrs.frozen
class DescribedGroup:
    """One group as ConsumerGroupDescribe reports it."""

    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]


def describe(
    group: ConsumerGroup, topics: Mapping[str, TopicInfo], assignors: tuple[str, ...]
) -> DescribedGroup:
    """The read-out of ``group``; topics no longer in ``topics`` are left out, as Kafka does."""
    names = {info.topic_id: info.name for info in topics.values()}

    def named(assignment: Assignment) -> tuple[TopicPartitions, ...]:
        return tuple(
            TopicPartitions(topic_id, names[topic_id], tuple(sorted(ps)))
            for topic_id, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], ""))
            if topic_id in names
        )

    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=named(m.assigned),
            target_assignment=named(group.target.get(m.member_id, partitions.EMPTY)),
        )
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    )
    return DescribedGroup(
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(assignors),
        members=members,
    )
