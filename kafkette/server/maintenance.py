"""The broker's background duties over its partition logs, as Kafka schedules them.

- every ``log.cleaner.backoff.ms`` (15 s): time-driven flushes (``flush.ms``)
  and a compaction pass on compacted topics dirty enough to clean
  (the log decides, from ``min.cleanable.dirty.ratio`` and the lags);
- every ``log.retention.check.interval.ms`` (5 min): retention by
  ``retention.ms`` / ``retention.bytes``, whole old segments only.

:func:`run_once` does one round and is what tests call with an injected
clock; :func:`maintenance_loop` repeats it for ``kafkette serve`` and the
in-process clusters. A log that fails is logged and skipped; the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import attrs

from kafkette.server.cluster import Cluster
from kafkette.server.config.broker_config import BrokerConfig

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
    """One round over every partition log of ``cluster``."""
    stats = MaintenanceStats()
    for partition in list(cluster.partitions()):
        log = partition.log
        try:
            log.tick()
            if retention:
                stats.segments_deleted += log.enforce_retention()
            if compaction and log.compact() is not None:
                stats.logs_compacted += 1
        except Exception:
            stats.failures += 1
            logger.exception("maintenance of %s-%d failed", partition.topic, partition.index)
    if stats.segments_deleted or stats.logs_compacted:
        logger.info(
            "retention deleted %d segment(s); compacted %d log(s)",
            stats.segments_deleted,
            stats.logs_compacted,
        )
    return stats


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
        run_once(cluster, retention=retention)
