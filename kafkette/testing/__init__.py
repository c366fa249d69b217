"""Helpers for users' tests: in-process clusters with a controllable clock and faults.

:class:`MemoryCluster` is the toolkit's center; the pytest plugin
(``kafkette.testing.pytest_plugin``, loaded automatically by pytest) gives it
as the ``kafka_cluster`` fixture. :func:`memory_cluster` and
:func:`close_memory_cluster` are the older, string-returning helpers.
:class:`RemoteFaults` arms the same faults as ``MemoryCluster.faults`` on a
``kafkette serve --enable-fault-injection`` broker over TCP.
"""

from kafkette.testing.clock import ManualClock
from kafkette.testing.cluster import MemoryCluster
from kafkette.testing.clusters import close_memory_cluster, memory_cluster
from kafkette.testing.remote_faults import RemoteFaults
from kafkette.testing.share import SharePartitionState, ShareRecordState

__all__ = [
    "ManualClock",
    "MemoryCluster",
    "RemoteFaults",
    "SharePartitionState",
    "ShareRecordState",
    "close_memory_cluster",
    "memory_cluster",
]
