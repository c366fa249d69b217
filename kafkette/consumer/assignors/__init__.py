"""Partition assignors: range, roundrobin, sticky and cooperative-sticky, and their bytes.

:mod:`.base` defines what an assignor is, :mod:`.protocol` the consumer
protocol's subscription/assignment bytes, :mod:`.registry` the lookup by name
used for ``partition.assignment.strategy``.
"""

from kafkette.consumer.assignors.base import (
    Assignment,
    Assignor,
    RebalanceProtocol,
    Subscription,
)
from kafkette.consumer.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafkette.consumer.assignors.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkette.consumer.assignors.range import RangeAssignor
from kafkette.consumer.assignors.registry import ASSIGNORS, resolve_assignors
from kafkette.consumer.assignors.roundrobin import RoundRobinAssignor
from kafkette.consumer.assignors.sticky import StickyAssignor

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "resolve_assignors",
]
