"""Opening a planned topic's partition logs without stopping the broker.

Used by CreateTopics, CreatePartitions and by Metadata's auto-creation. The
logs are opened in steps (:func:`~kafkette.server.steps.run_in_steps`), or,
when the storage's opening blocks (``Storage.blocking_io``: on disk each new
log is a directory and files, and creating one may wait milliseconds on the
file system's journal), in a worker thread, so that the event loop keeps
serving produce and fetch requests meanwhile. The topic's name is held in
:attr:`Cluster.creating <kafkette.server.cluster.Cluster.creating>` until it
is registered, and a creation that fails or is cancelled half way leaves no
log behind.
"""

from __future__ import annotations

from collections.abc import Generator

import anyio.lowlevel
import anyio.to_thread

from kafkette.backends.config import LogConfig
from kafkette.server.cluster import Cluster, Partition, Topic, TopicPlan
from kafkette.server.steps import run_in_steps


async def open_topic(cluster: Cluster, plan: TopicPlan) -> Topic:
    """Create the planned topic in ``cluster``; the caller holds
    :attr:`Broker.topic_changes <kafkette.server.broker.Broker.topic_changes>`."""
    cluster.creating.add(plan.name)
    try:
        opened = await open_partitions(cluster, plan.name, 0, plan.num_partitions, plan.log_config)
        return cluster.register_topic(plan, opened)
    finally:
        cluster.creating.discard(plan.name)


async def open_partitions(
    cluster: Cluster, name: str, start: int, stop: int, config: LogConfig
) -> list[Partition]:
    """The opened logs of partitions ``start`` to ``stop - 1`` of ``name``
    (:meth:`Cluster.open_partitions`); the caller holds ``topic_changes``."""
    opened: list[Partition] = []
    steps = cluster.open_partitions(name, start, stop, config, opened)
    if cluster.storage.blocking_io:
        await _run_in_thread(steps, stop - start)
    else:
        await run_in_steps(steps)
    return opened


async def _run_in_thread(steps: Generator[None, None, None], count: int) -> None:
    """Run the ``count`` steps of ``steps`` in a worker thread, and its end here.

    The end (which keeps the opened logs) runs on the loop, after the thread:
    if the caller was cancelled meanwhile (the thread runs to its end anyway),
    ``steps`` is closed instead, which deletes them.
    """
    try:
        await anyio.to_thread.run_sync(_advance, steps, count)
        await anyio.lowlevel.checkpoint()  # a cancellation during the thread lands here
        for _ in steps:
            raise AssertionError("more steps than partitions")
    finally:
        steps.close()


def _advance(steps: Generator[None, None, None], count: int) -> None:
    for _ in range(count):
        next(steps)
