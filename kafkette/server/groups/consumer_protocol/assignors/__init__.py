"""The server-side assignors of consumer-type groups (``group.consumer.assignors``).

An assignor takes an :class:`AssignmentSpec` (the members, the topic ids each is
subscribed to, the topics' partition counts and the previous target assignment) and
returns every member's new target. It must give each partition to at most one member,
and only to a member subscribed to its topic.
"""

from __future__ import annotations

from kafkette.server.groups.consumer_protocol.assignors.range import RangeAssignor
from kafkette.server.groups.consumer_protocol.assignors.spec import (
    AssignmentSpec,
    Assignor,
    MemberSpec,
)
from kafkette.server.groups.consumer_protocol.assignors.uniform import UniformAssignor
from kafkette.server.groups.consumer_protocol.config import RANGE, UNIFORM

ASSIGNORS: dict[str, Assignor] = {UNIFORM: UniformAssignor(), RANGE: RangeAssignor()}
"""Every assignor by its name (``group.remote.assignor``)."""

__all__ = [
    "ASSIGNORS",
    "AssignmentSpec",
    "Assignor",
    "MemberSpec",
    "RangeAssignor",
    "UniformAssignor",
]
