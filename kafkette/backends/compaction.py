"""Log compaction (``cleanup.policy=compact``), as Kafka's log cleaner does it.

One pass:

1. The cleanable range runs from the log start to the *first uncleanable
   offset*: the base of the active segment, of the segment holding the last
   stable offset or the high watermark, or of the first segment whose largest
   timestamp is within ``min.compaction.lag.ms`` of now. Only whole segments
   below it are cleaned.
2. Unless forced, the pass runs only when the dirty part (from the cleaner
   checkpoint, the first offset not yet cleaned, on) is at least
   ``min.cleanable.dirty.ratio`` of the cleanable bytes, or a dirty segment
   is older than ``max.compaction.lag.ms``.
3. An offset map (key -> last offset) is built from the dirty part, skipping
   control batches and the records of aborted transactions.
4. Every cleanable segment is rewritten keeping a record when no later offset
   of its key is in the map. Records of aborted transactions go. Tombstones
   stay until their batch's *delete horizon* (set to now +
   ``delete.retention.ms`` the first time a pass sees them, stored in the
   batch header as Kafka does) has passed. A transaction marker stays while
   records of its transaction remain; once none do, it gets a delete horizon
   and is removed after it. A batch left with no records keeps its header
   when it is the last data batch of its producer (its sequence numbers are
   what idempotent producers are checked against); otherwise it is dropped.
   A segment left empty is deleted (unless it is the first one).
   Offsets never change: a rebuilt batch keeps its base offset, last offset
   delta and producer fields. Keyless records (left from before the log
   became compacted) are removed, as Kafka's cleaner does.
5. The cleaner checkpoint moves to the first uncleanable offset.

A pass runs in steps (:func:`clean_steps`, :data:`~kafkette.backends.log.Steps`):
a step reads or writes one batch, and the fsyncs and file creations are handed to
the driver (a worker thread, on the broker's event loop), so that cleaning a large
log never holds the loop for long. The log stays in use meanwhile: the steps after
a pause check that the segment they work on is still in the log (retention,
DeleteRecords or the topic's deletion may have taken it) and stop the pass when it
is not; what they replace is replaced on the log's own thread. :func:`clean` runs
a pass at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.backends.batches import empty_batch
from kafkette.backends.config import LONG_MAX
from kafkette.backends.header import StoredHeader, parse_header
from kafkette.backends.log import Steps, run_steps
from kafkette.backends.records import rebuild_batch, records_of
from kafkette.backends.segment import BufferLike
from kafkette.backends.types import CleanerStats

if TYPE_CHECKING:
    from kafkette.backends.segmented import SegmentedLog


def first_uncleanable_offset(log: SegmentedLog, now: int) -> int:
    """Offset below which whole segments may be compacted."""
    segments = log.segments
    limit = min(segments[-1].base_offset, log.last_stable_offset, log.high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments:
            if segment.max_timestamp >= 0 and now - segment.max_timestamp < lag:
                limit = min(limit, segment.base_offset)
                break
    # Round down to a segment boundary.
    boundary = segments[0].base_offset
    for segment in segments[1:]:
        if segment.base_offset > limit:
            break
        boundary = segment.base_offset
    return boundary


def _aborted_ranges(log: SegmentedLog) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted_transactions(0, 2**63 - 1):
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def _is_aborted(header: StoredHeader, ranges: dict[int, list[tuple[int, int]]]) -> bool:
    if not header.is_transactional or header.is_control:
        return False
    return any(
        first <= header.base_offset <= last for first, last in ranges.get(header.producer_id, ())
    )


def clean(log: SegmentedLog, now: int, *, force: bool = False) -> CleanerStats | None:
    """Run one compaction pass over ``log``; None when it was not due."""
    return run_steps(clean_steps(log, now, force=force))


def clean_steps(log: SegmentedLog, now: int, *, force: bool = False) -> Steps[CleanerStats | None]:
    """One compaction pass over ``log`` in steps; None when it was not due, or when a
    segment it was cleaning left the log meanwhile (the pass stops there)."""
    config = log.config
    if not config.compact:
        return None
    end = first_uncleanable_offset(log, now)
    segments = [s for s in log.segments if s.base_offset < end]
    if not segments:
        return None
    first_dirty = min(max(log.first_dirty_offset, log.log_start_offset), end)
    total = sum(s.size for s in segments)
    dirty = [s for s in segments if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    overdue = config.max_compaction_lag_ms < LONG_MAX and any(
        s.first_timestamp >= 0 and now - s.first_timestamp > config.max_compaction_lag_ms
        for s in dirty
    )
    ratio = dirty_bytes / total if total else 0.0
    if not force and not overdue and (not dirty_bytes or ratio < config.min_cleanable_dirty_ratio):
        return None

    aborted = _aborted_ranges(log)
    offset_map: dict[bytes, int] = {}
    bytes_read = 0
    for segment in dirty:
        for position, header in segment.headers(first_dirty):
            if header.is_control or _is_aborted(header, aborted) or header.record_count == 0:
                continue
            data = segment.batch_bytes(position, header.size)
            bytes_read += header.size
            for record in records_of(data):
                if record.offset >= first_dirty and record.key is not None:
                    offset_map[record.key] = record.offset
            yield None
            if not log._holds(segment):
                return None

    last_data_offset = {
        pid: entry.last_offset for pid, entry in log.producer_state().producers.items()
    }
    txn_has_records: dict[int, bool] = {}
    horizon_if_new = now + config.delete_retention_ms
    written = removed = 0
    for segment in segments:
        kept: list[tuple[tuple[BufferLike, ...], StoredHeader]] = []
        changed = False
        for position, header in segment.headers():
            data = segment.batch_bytes(position, header.size)
            bytes_read += header.size
            horizon = header.base_timestamp if header.has_delete_horizon else None
            if header.is_control:
                if txn_has_records.pop(header.producer_id, False):
                    kept.append(((data,), header))  # its transaction still has records
                elif horizon is None:
                    marker = rebuild_batch(
                        header, records_of(data), delete_horizon_ms=horizon_if_new
                    )
                    kept.append(((marker,), parse_header(marker)))
                    changed = True
                elif now < horizon:
                    kept.append(((data,), header))
                else:
                    removed += header.record_count
                    changed = True
                yield None
                if not log._holds(segment):
                    return None
                continue
            records = records_of(data)
            dropped_txn = _is_aborted(header, aborted)
            retained = [
                r
                for r in records
                if not dropped_txn
                and r.key is not None
                and offset_map.get(r.key, -1) <= r.offset
                and not (r.value is None and horizon is not None and now >= horizon)
            ]
            if header.is_transactional:
                txn_has_records[header.producer_id] = txn_has_records.get(
                    header.producer_id, False
                ) or bool(retained)
            tombstones = any(r.value is None for r in retained)
            new_horizon = (
                (horizon if horizon is not None else horizon_if_new) if tombstones else None
            )
            if len(retained) == len(records) and new_horizon == horizon:
                kept.append(((data,), header))
                continue
            changed = True
            removed += len(records) - len(retained)
            if retained:
                rebuilt = rebuild_batch(header, retained, delete_horizon_ms=new_horizon)
                kept.append(((rebuilt,), parse_header(rebuilt)))
            elif (
                header.producer_id >= 0
                and last_data_offset.get(header.producer_id) == header.last_offset
            ):
                empty = empty_batch(data, 0)
                kept.append(((empty,), parse_header(empty)))
            yield None
            if not log._holds(segment):
                return None
        if not kept and segment is not segments[0]:
            # emptied: its offsets now fall to the segment before
            if not (yield from log._drop_segment(segment)):
                return None
        elif changed and not (yield from log._swap_segment(segment, kept)):
            return None
        written += sum(h.size for _, h in kept)
    yield from log._set_first_dirty_offset(end)
    return CleanerStats(
        segments=len(segments),
        bytes_read=bytes_read,
        bytes_written=written,
        records_removed=removed,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=end,
    )
