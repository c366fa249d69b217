"""The broker's background duties over its partition logs, as Kafka schedules them.

- every ``log.cleaner.backoff.ms`` (15 s): time-driven flushes (``flush.ms``)
  and a compaction pass on compacted topics dirty enough to clean
  (the log decides, from ``min.cleanable.dirty.ratio`` and the lags);
- every ``log.retention.check.interval.ms`` (5 min): retention by
  ``retention.ms`` / ``retention.bytes``, whole old segments only.

:func:`run_once` does one round and is what tests call with an injected
clock; :func:`maintenance_loop` repeats it for ``kafkette serve`` and the
in-process clusters. A log that fails is logged and skipped; the others go on.

On the event loop a round never holds the loop for long (:func:`drive`): it
yields to other tasks every few milliseconds, runs each compaction pass in
steps whose fsyncs and file creations go to a worker thread
(:mod:`kafkette.backends.compaction`), and leaves freeing deleted files
(:meth:`Storage.reap <kafkette.backends.log.Storage.reap>`, about 0.3 s per
GiB) to a worker thread too, as :func:`reap` does after DeleteTopics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
import attrs

from kafkette.backends.log import Steps, Storage, run_steps
from kafkette.server.cluster import Cluster, Partition
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.steps import STEP_BUDGET_S

_T = TypeVar("_T")

logger = logging.getLogger("kafkette.server.maintenance")


@attrs.define
class MaintenanceStats:
    """What one round did."""

    segments_deleted: int = 0
    logs_compacted: int = 0
    failures: int = 0


def run_once(
    cluster: Cluster, *, retention: bool = True, compaction: bool = True
) -> MaintenanceStats:
    """One round over every partition log of ``cluster``, at once."""
    stats = MaintenanceStats()
    run_steps(round_steps(cluster, stats, retention=retention, compaction=compaction))
    return stats


def round_steps(
    cluster: Cluster, stats: MaintenanceStats, *, retention: bool = True, compaction: bool = True
) -> Steps[None]:
    """One round over every partition log of ``cluster`` as steps (one per log, and the
    steps of each compaction pass), counted in ``stats``; then freeing what was deleted."""
    for partition in list(cluster.partitions()):
        if not _serving(cluster, partition):
            continue  # its topic was deleted since the round began
        log = partition.log
        try:
            log.tick()
            if retention:
                stats.segments_deleted += yield from log.retention_steps()
            if compaction and (yield from log.compaction_steps()) is not None:
                stats.logs_compacted += 1
        except Exception:
            if _serving(cluster, partition):
                stats.failures += 1
                logger.exception("maintenance of %s-%d failed", partition.topic, partition.index)
        yield None
    if stats.segments_deleted or stats.logs_compacted:
        logger.info(
            "retention deleted %d segment(s); compacted %d log(s)",
            stats.segments_deleted,
            stats.logs_compacted,
        )
    if cluster.storage.reap_pending:
        yield cluster.storage.reap


def _serving(cluster: Cluster, partition: Partition) -> bool:
    topic = cluster.topics.get(partition.topic)
    return (
        topic is not None
        and partition.index < len(topic.partitions)
        and topic.partitions[partition.index] is partition
    )


async def drive(steps: Steps[_T], *, budget_s: float = STEP_BUDGET_S) -> _T:
    """Run ``steps`` on this event loop: its blocking work in a worker thread, and a
    turn for other tasks whenever ``budget_s`` has passed. Cancelled, ``steps`` is
    closed (its own clean-up runs) once the running work has ended."""
    since = time.monotonic()
    try:
        item = next(steps)
        while True:
            if item is not None:
                try:
                    await anyio.to_thread.run_sync(item)
                except Exception as exc:
                    item = steps.throw(exc)
                    continue
                since = time.monotonic()
            elif time.monotonic() - since >= budget_s:
                await anyio.sleep(0)
                since = time.monotonic()
            item = next(steps)
    except StopIteration as stop:
        result: _T = stop.value
        return result
    finally:
        steps.close()


async def reap(storage: Storage) -> None:
    """Free what deletions left (:meth:`Storage.reap`) in a worker thread, if anything."""
    if storage.reap_pending:
        await anyio.to_thread.run_sync(storage.reap)


async def maintenance_loop(
    cluster: Cluster, config: BrokerConfig, clock: Callable[[], int]
) -> None:
    """Run :func:`run_once` on Kafka's schedule until cancelled (never, for a broker
    serving its data directory read-only: a round may delete, compact and flush)."""
    if config.read_only:
        return
    period_ms = max(min(config.log_cleaner_backoff_ms, config.log_retention_check_interval_ms), 1)
    last_retention = clock()
    while True:
        await anyio.sleep(period_ms / 1000)
        now = clock()
        retention = now - last_retention >= config.log_retention_check_interval_ms
        if retention:
            last_retention = now
        await drive(round_steps(cluster, MaintenanceStats(), retention=retention))
