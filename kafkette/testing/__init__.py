"""Helpers for users' tests: in-process clusters with a controllable clock."""

from kafkette.testing.clock import ManualClock
from kafkette.testing.clusters import close_memory_cluster, memory_cluster

__all__ = ["ManualClock", "close_memory_cluster", "memory_cluster"]
