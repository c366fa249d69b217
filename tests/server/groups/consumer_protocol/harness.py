"""A ConsumerGroupCoordinator over a topic table held in a dict, and clients that behave
as a consumer of the consumer group protocol: they adopt each assignment they are sent at
once (dropping what it no longer holds, taking what is new) and report what they hold on
their next heartbeat."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import attrs

from kafkette.server.groups.consumer_protocol import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicInfo,
)
from kafkette.server.groups.consumer_protocol import partitions as ps
from kafkette.server.groups.consumer_protocol.partitions import Assignment

REBALANCE = 30_000


def topic_id(name: str) -> uuid.UUID:
    """A stable id per topic name (a recreated topic gets :func:`uuid.uuid4` instead)."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class Cluster:
    """Topics by name, the coordinator reading them, and the time."""

    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.topics: dict[str, TopicInfo] = {}
        for name, count in (topics or {}).items():
            self.create(name, count)
        self.coordinator = ConsumerGroupCoordinator(
            ConsumerGroupConfig(**config), lambda: self.topics, id_factory=self._ids()
        )
        self.now = 0

    @staticmethod
    def _ids() -> Any:
        counter = iter(range(1, 1_000_000))
        return lambda: f"generated-{next(counter)}"

    def create(self, name: str, partitions: int) -> TopicInfo:
        info = TopicInfo(topic_id(name), name, partitions)
        self.topics[name] = info
        return info

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coordinator.tick(self.now)

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coordinator.groups[group_id]

    def tp(self, spec: dict[str, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
        """An assignment from topic names."""
        return ps.make((self.topics[name].topic_id, parts) for name, parts in spec.items())

    def named(self, assignment: Assignment | None) -> dict[str, list[int]] | None:
        """An assignment with topic names, for readable asserts."""
        if assignment is None:
            return None
        names = {info.topic_id: name for name, info in self.topics.items()}
        return {names.get(t, str(t)): sorted(p) for t, p in sorted(assignment.items(), key=str)}


@attrs.define
class Client:
    """One member of group ``group``, as a well-behaved consumer."""

    cluster: Cluster
    member_id: str
    topics: tuple[str, ...] | None = ("a",)
    regex: str | None = None
    instance_id: str | None = None
    assignor: str | None = None
    rebalance_timeout_ms: int = REBALANCE
    group_id: str = "g"
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = attrs.Factory(dict)
    revokes: bool = True
    """False: keep the partitions it was told to give up (a consumer stuck in its
    revocation callback); it gives them up on its first heartbeat with this True."""
    given: dict[uuid.UUID, frozenset[int]] = attrs.Factory(dict)
    """The last assignment it was sent."""
    last: HeartbeatResponse | None = None

    def join(self) -> HeartbeatResponse:
        """A full heartbeat with epoch 0."""
        self.epoch = 0
        self.owned = {}
        self.given = {}
        return self._send(
            HeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=0,
                instance_id=self.instance_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                subscribed_topic_names=self.topics if self.topics is not None else None,
                subscribed_topic_regex=self.regex,
                server_assignor=self.assignor,
                owned={},
            )
        )

    def heartbeat(self, *, full: bool = False, **changes: Any) -> HeartbeatResponse:
        """A partial heartbeat reporting what the client holds, or a full one (as a client
        sends after an error or a lost answer); ``changes`` sets fields."""
        if self.revokes:
            self.owned = dict(self.given)
        fields: dict[str, Any] = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "owned": dict(self.owned),
        }
        if full:
            fields.update(
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                subscribed_topic_names=self.topics or (),
                subscribed_topic_regex=self.regex or "",
                instance_id=self.instance_id,
            )
        fields.update(changes)
        return self._send(HeartbeatRequest(**fields))

    def leave(self, epoch: int = -1) -> HeartbeatResponse:
        response = self.cluster.coordinator.heartbeat(
            self.cluster.now,
            HeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=epoch,
                instance_id=self.instance_id,
            ),
        )
        self.owned = {}
        self.given = {}
        return response

    def _send(self, request: HeartbeatRequest) -> HeartbeatResponse:
        response = self.cluster.coordinator.heartbeat(self.cluster.now, request)
        self.last = response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.given = dict(response.assignment)
            self.owned = dict(self.given) if self.revokes else ps.union(self.owned, self.given)
        return response

    def holds(self) -> dict[str, list[int]] | None:
        return self.cluster.named(self.owned)
