"""What an assignor is given, and what it is."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

import attrs

from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.consumer_protocol.topics import TopicInfo


@attrs.frozen
class MemberSpec:
    """One member as an assignor sees it."""

    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]
    """The existing topics it is subscribed to, by id."""


@attrs.frozen
class AssignmentSpec:
    """The input of one target assignment."""

    members: tuple[MemberSpec, ...]
    topics: Mapping[uuid.UUID, TopicInfo]
    """Every topic some member is subscribed to."""
    current: Mapping[str, Assignment]
    """The previous target assignment by member id (for stickiness)."""


class Assignor(Protocol):
    """A server-side assignor."""

    name: str

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        """Every member's target assignment (an entry for each member, maybe empty)."""
        ...
