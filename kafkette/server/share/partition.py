"""One share partition's records in flight (KIP-932), as a plain class.

Theory of operation, following Kafka's ``SharePartition``:

- The partition tracks the records from its *start offset* (everything below is
  done) to its *end offset* (exclusive: the next offset never fetched). Between
  them each record it has seen has a :class:`RecordState`, a delivery count and,
  while ACQUIRED, its member and lock deadline. Offsets in that window it has no
  record for hold no record in the log (a compacted or deleted range), except
  after a restart: offsets the written state does not cover are *unknown*, and
  are acquired as new records when the log returns them (Kafka's gap window).
- ``acquire`` takes the offsets a log read returned, gives the member every
  AVAILABLE or new one among them (up to ``max_records``, new ones only while
  fewer than ``max_in_flight`` records are in the window), raises each delivery
  count by one and locks the records until ``now + lock_duration``. Under
  read_committed the caller names the aborted transactional ranges: those
  records are archived instead of delivered.
- ``acknowledge``: ACCEPT makes a record ACKNOWLEDGED, REJECT and GAP ARCHIVED,
  RELEASE makes it AVAILABLE again, RENEW keeps it ACQUIRED with a new deadline.
  Only the member holding a record may acknowledge it; one bad offset fails the
  whole call and changes nothing.
- A lock that expires (``expire_locks``) makes its records AVAILABLE. A record
  released, by RELEASE or by its lock, whose delivery count has reached
  ``max_delivery_count`` is ARCHIVED instead. A member that leaves
  (``release_member``) gives its records back with their count lowered by one,
  as they were not delivered.
- The start offset moves past every ACKNOWLEDGED or ARCHIVED record at its
  front, and those records are forgotten; and to the log's start offset when
  retention or DeleteRecords moves it (``move_log_start``).

Records are kept as Kafka's ``InFlightBatch``es: a range of offsets acquired
together carries one state, delivery count, member and deadline, so a fetch of
500 records and their acknowledgement cost one step each, not 500. A batch holds
a state per offset only once something touches part of it (a partial
acquisition, acknowledgements that differ within it, a partial lock renewal), and
goes back to one state when its offsets agree again.

Every change but an acquisition or a RENEW returns a :class:`StateWrite` for
the share coordinator to persist (``persistence``); the written start offset is
the one after the change. Time is always an argument, in milliseconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

import attrs

from kafkette.errors import InvalidRecordStateError, InvalidRequestError
from kafkette.server.share.state import (
    Acknowledgement,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    StateBatch,
    StateWrite,
)

MAX_WINDOW = 100_000
"""The most offsets a restored state may span: a state this class writes spans at
most ``max_in_flight`` (at most 10,000 in Kafka), so a wider one is corrupt."""

_AVAILABLE, _ACQUIRED = RecordState.AVAILABLE, RecordState.ACQUIRED
_TERMINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
_ACK_STATES = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}

_Change = tuple[int, int, RecordState, int]
"""A persisted change: first and last offset, new state, delivery count."""


@attrs.define
class InFlightRecord:
    """What the partition knows of one record (or of every record of a batch)."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    """The member holding it, while ACQUIRED."""
    deadline_ms: int = 0
    """When its acquisition lock expires, while ACQUIRED."""


class InFlightBatch:
    """Offsets ``first``-``last`` (Kafka's ``InFlightBatch``): one :class:`InFlightRecord`
    for all of them (``offsets`` None), or one per offset once they differ."""

    __slots__ = ("first", "last", "offsets", "whole")

    def __init__(self, first: int, last: int, whole: InFlightRecord) -> None:
        self.first, self.last, self.whole = first, last, whole
        self.offsets: list[InFlightRecord] | None = None

    def split(self) -> list[InFlightRecord]:
        """The per-offset states, made from the batch's one state if need be."""
        if self.offsets is None:
            w = self.whole
            self.offsets = [
                InFlightRecord(w.state, w.delivery_count, w.member_id, w.deadline_ms)
                for _ in range(self.last - self.first + 1)
            ]
        return self.offsets

    def join(self) -> None:
        """Back to one state when every offset has the same."""
        offsets = self.offsets
        if offsets is not None and all(r == offsets[0] for r in offsets):
            self.whole, self.offsets = offsets[0], None

    def trim_front(self, first: int) -> None:
        """Drop the offsets below ``first``."""
        if self.offsets is not None:
            del self.offsets[: first - self.first]
        self.first = first

    def segments(self, low: int, high: int) -> Iterator[tuple[int, int, InFlightRecord]]:
        """(first, last, record) pieces of the batch within ``low``-``high``."""
        low, high = max(low, self.first), min(high, self.last)
        if self.offsets is None:
            if low <= high:
                yield low, high, self.whole
            return
        for offset in range(low, high + 1):
            yield offset, offset, self.offsets[offset - self.first]

    def records(self) -> Iterator[InFlightRecord]:
        """Its distinct records."""
        return iter((self.whole,) if self.offsets is None else self.offsets)

    def __repr__(self) -> str:
        return f"InFlightBatch({self.first}-{self.last}, {self.offsets or self.whole})"


class SharePartition:
    """The in-flight records of one share partition of one share group."""

    def __init__(
        self,
        *,
        start_offset: int = 0,
        max_delivery_count: int = 5,
        max_in_flight: int = 2000,
        batches: Iterable[StateBatch] = (),
    ) -> None:
        """A partition at ``start_offset``, or restored from its written state
        (``batches``: AVAILABLE, ACKNOWLEDGED or ARCHIVED ranges at or above it).

        ``max_delivery_count`` is ``group.share.delivery.count.limit`` and
        ``max_in_flight`` ``group.share.partition.max.record.locks``.
        """
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        if max_delivery_count < 1:
            raise ValueError(f"delivery count limit {max_delivery_count} is below 1")
        if max_in_flight < 1:
            raise ValueError(f"in-flight record limit {max_in_flight} is below 1")
        self.max_delivery_count = max_delivery_count
        self.max_in_flight = max_in_flight
        self._start = start_offset
        self._batches: list[InFlightBatch] = []
        """The tracked records, sorted, not overlapping, none below the start offset."""
        self._unknown: list[list[int]] = []
        """[first, last] ranges a restart left without a written state, sorted."""
        end = start_offset
        for batch in sorted(batches, key=lambda b: b.first_offset):
            if batch.first_offset > batch.last_offset or batch.delivery_count < 0:
                raise ValueError(f"invalid state batch {batch}")
            if batch.last_offset - start_offset >= MAX_WINDOW:
                raise ValueError(
                    f"state batch {batch} lies more than {MAX_WINDOW} offsets past the "
                    f"start offset {start_offset}"
                )
            if batch.state == _ACQUIRED:
                raise ValueError(f"state batch {batch} is ACQUIRED: that state is never written")
            first = max(batch.first_offset, start_offset)
            if first <= batch.last_offset:
                if self._batches and first <= self._batches[-1].last:
                    raise ValueError(f"state batches overlap at offset {first}")
                if first > end:
                    self._unknown.append([end, first - 1])
                record = InFlightRecord(batch.state, batch.delivery_count)
                self._batches.append(InFlightBatch(first, batch.last_offset, record))
            end = max(end, batch.last_offset + 1)
        self._end = end
        self._advance()

    # ---- reading

    @property
    def start_offset(self) -> int:
        """The first offset not yet done (Kafka's share-partition start offset)."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The offset after the last record ever acquired (exclusive)."""
        return self._end

    @property
    def in_flight(self) -> int:
        """The records in the window, as counted against ``max_in_flight``."""
        return self._end - self._start if self._batches or self._unknown else 0

    def records(self) -> dict[int, InFlightRecord]:
        """Every tracked record by offset (a copy, for inspection)."""
        out: dict[int, InFlightRecord] = {}
        for batch in self._batches:
            for first, last, record in batch.segments(batch.first, batch.last):
                for offset in range(first, last + 1):
                    out[offset] = attrs.evolve(record)
        return out

    def batches(self) -> list[tuple[int, int, InFlightRecord]]:
        """The tracked records as (first, last, record) runs of one state (copies)."""
        runs: list[tuple[int, int, InFlightRecord]] = []
        for batch in self._batches:
            for first, last, record in batch.segments(batch.first, batch.last):
                if runs and runs[-1][1] + 1 == first and runs[-1][2] == record:
                    runs[-1] = (runs[-1][0], last, runs[-1][2])
                else:
                    runs.append((first, last, attrs.evolve(record)))
        return runs

    def next_fetch_offset(self) -> int:
        """Where the next log read should start: the first AVAILABLE or unknown
        record, else the end offset."""
        limit = self._unknown[0][0] if self._unknown else self._end
        for batch in self._batches:
            if batch.first >= limit:
                break
            for first, _, record in batch.segments(batch.first, batch.last):
                if record.state == _AVAILABLE:
                    return min(first, limit)
        return limit

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline, None when nothing is acquired."""
        return min(
            (
                r.deadline_ms
                for batch in self._batches
                for r in batch.records()
                if r.state == _ACQUIRED
            ),
            default=None,
        )

    def has_acquirable(self, log_end_offset: int) -> bool:
        """Whether an acquire could give out anything, with the log readable up to
        ``log_end_offset`` (exclusive: the high watermark or the last stable offset)."""
        if self._unknown or any(
            r.state == _AVAILABLE for batch in self._batches for r in batch.records()
        ):
            return True
        return log_end_offset > self._end and self.in_flight < self.max_in_flight

    # ---- events

    def acquire(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        now_ms: int,
        *,
        lock_duration_ms: int,
        max_records: int,
        fetch_offset: int | None = None,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the records among ``first_offset``-``last_offset``
        (the offsets a log read from ``fetch_offset`` returned) that are AVAILABLE,
        unknown or new, at most ``max_records``, locked until ``now_ms +
        lock_duration_ms``. Records in an ``aborted`` range (first, last) are
        archived, not delivered. Acquisitions are not persisted."""
        if not member_id:
            raise ValueError("an acquisition needs a member id")
        if lock_duration_ms <= 0:
            raise ValueError(f"lock duration {lock_duration_ms} ms is not positive")
        if first_offset > last_offset or first_offset < 0:
            raise ValueError(f"invalid offset range {first_offset}-{last_offset}")
        start_of_read = first_offset if fetch_offset is None else min(fetch_offset, first_offset)
        # Offsets a restart left unknown that the log skipped hold no record.
        self._forget_unknown(start_of_read, first_offset - 1)
        if max_records <= 0:
            return []
        offset = max(first_offset, self._start)
        if not self._batches and not self._unknown and offset > self._end:
            self._start = self._end = offset  # the log moved on (retention, compaction)
        taking = _Taking(member_id, now_ms + lock_duration_ms, max_records, aborted)
        batches = self._batches
        i = bisect.bisect_left(batches, offset, key=_last)
        while offset <= last_offset and taking.left > 0:
            if offset >= self._end:
                high = min(last_offset, offset + taking.left - 1)
                high = min(high, offset + self.max_in_flight - self.in_flight - 1)
                if high < offset:
                    break
                self._end = high + 1
                batches.extend(taking.new(offset, high))
                break
            batch = batches[i] if i < len(batches) else None
            if batch is not None and batch.first <= offset:
                taking.existing(batch, offset, min(batch.last, last_offset))
                offset, i = batch.last + 1, i + 1
                continue
            u = bisect.bisect_right(self._unknown, offset, key=_first) - 1
            if u >= 0 and self._unknown[u][1] >= offset:
                high = min(self._unknown[u][1], last_offset, offset + taking.left - 1)
                self._unknown = _cut(self._unknown, offset, high)
                made = taking.new(offset, high)
                batches[i:i] = made
                offset, i = high + 1, i + len(made)
                continue
            # A hole: no record there in the log.
            following = [self._end]
            if batch is not None:
                following.append(batch.first)
            if u + 1 < len(self._unknown):
                following.append(self._unknown[u + 1][0])
            offset = min(following)
        self._advance()
        return taking.given

    def acknowledge(
        self,
        member_id: str,
        acknowledgements: Sequence[Acknowledgement],
        now_ms: int,
        *,
        lock_duration_ms: int,
    ) -> StateWrite | None:
        """Apply ``member_id``'s acknowledgements, all or none.

        Raises :class:`InvalidRequestError` for a malformed batch (unknown type,
        a type list of the wrong length, overlapping batches, offsets past every
        acquired record) and :class:`InvalidRecordStateError` when a record in
        range is not ACQUIRED by ``member_id`` (or its lock expired by ``now_ms``,
        whether or not :meth:`expire_locks` ran). Offsets below the start offset are
        already done and ignored. Returns what to persist (None after RENEWs only).
        """
        plan: list[tuple[InFlightBatch, int, int, tuple[AcknowledgeType, ...], int]] = []
        previous_last = -1
        for ack in sorted(acknowledgements, key=lambda a: a.first_offset):
            types = _check_acknowledgement(ack, previous_last)
            previous_last = ack.last_offset
            if ack.first_offset >= self._end:
                raise InvalidRequestError(
                    f"offsets {ack.first_offset}-{ack.last_offset} are past the acquired records"
                )
            low, high = max(ack.first_offset, self._start), min(ack.last_offset, self._end - 1)
            if low > high:
                continue
            bad = self._first_unknown(low, high)
            i = bisect.bisect_left(self._batches, low, key=_last)
            while i < len(self._batches) and self._batches[i].first <= high:
                batch = self._batches[i]
                lo, hi = max(batch.first, low), min(batch.last, high)
                for first, _, record in batch.segments(lo, hi):
                    if bad is not None and bad < first:
                        break
                    if record.state != _ACQUIRED:
                        raise InvalidRecordStateError(f"offset {first} is not acquired")
                    if record.member_id != member_id:
                        raise InvalidRecordStateError(
                            f"offset {first} is acquired by another member"
                        )
                    if record.deadline_ms <= now_ms:
                        raise InvalidRecordStateError(
                            f"the acquisition lock of offset {first} expired"
                        )
                plan.append((batch, lo, hi, types, ack.first_offset))
                i += 1
            if bad is not None:
                raise InvalidRecordStateError(f"offset {bad} is not acquired")
        changes: list[_Change] = []
        renewed = now_ms + lock_duration_ms
        for batch, lo, hi, types, ack_first in plan:
            if len(types) > 1:
                types = types[lo - ack_first : hi - ack_first + 1]
                if all(t == types[0] for t in types):
                    types = types[:1]
            if len(types) == 1 and (
                batch.offsets is not None or (lo, hi) != (batch.first, batch.last)
            ):
                # one type over part of a batch (or a batch already split)
                offsets = batch.split()
                for offset in range(lo, hi + 1):
                    self._apply(
                        offsets[offset - batch.first], offset, offset, types[0], renewed, changes
                    )
            elif len(types) == 1:
                self._apply(batch.whole, lo, hi, types[0], renewed, changes)
            else:
                offsets = batch.split()
                for offset, kind in zip(range(lo, hi + 1), types, strict=True):
                    self._apply(
                        offsets[offset - batch.first], offset, offset, kind, renewed, changes
                    )
            batch.join()
        return self._written(changes)

    def expire_locks(self, now_ms: int) -> StateWrite | None:
        """Give back every record whose lock expired at ``now_ms``: AVAILABLE, or
        ARCHIVED at the delivery-count limit. Returns what to persist."""
        changes: list[_Change] = []
        for batch in self._batches:
            for first, last, record in batch.segments(batch.first, batch.last):
                if record.state == _ACQUIRED and record.deadline_ms <= now_ms:
                    self._give_back(record, lowered=False)
                    changes.append((first, last, record.state, record.delivery_count))
            batch.join()
        return self._written(changes)

    def release_member(self, member_id: str) -> StateWrite | None:
        """Give back the records ``member_id`` holds (it left the group or closed
        its share session): AVAILABLE with the delivery count lowered by one, as
        Kafka does for records fetched but not delivered."""
        changes: list[_Change] = []
        for batch in self._batches:
            for first, last, record in batch.segments(batch.first, batch.last):
                if record.state == _ACQUIRED and record.member_id == member_id:
                    self._give_back(record, lowered=True)
                    changes.append((first, last, record.state, record.delivery_count))
            batch.join()
        return self._written(changes)

    def move_log_start(self, log_start_offset: int) -> None:
        """The log's start offset moved (retention, DeleteRecords) to
        ``log_start_offset``: what lies below is gone, acquired or not. As Kafka,
        nothing is written now; the next write carries the new start offset."""
        if log_start_offset <= self._start:
            return
        i = bisect.bisect_left(self._batches, log_start_offset, key=_last)
        del self._batches[:i]
        if self._batches and self._batches[0].first < log_start_offset:
            self._batches[0].trim_front(log_start_offset)
        self._unknown = _cut(self._unknown, 0, log_start_offset - 1)
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self._advance()

    # ---- inside

    def _apply(
        self,
        record: InFlightRecord,
        first: int,
        last: int,
        kind: AcknowledgeType,
        renewed: int,
        changes: list[_Change],
    ) -> None:
        if kind == AcknowledgeType.RENEW:
            record.deadline_ms = renewed
            return
        state = _ACK_STATES[kind]
        if state == _AVAILABLE and record.delivery_count >= self.max_delivery_count:
            state = RecordState.ARCHIVED
        record.state, record.member_id, record.deadline_ms = state, "", 0
        changes.append((first, last, state, record.delivery_count))

    def _give_back(self, record: InFlightRecord, *, lowered: bool) -> None:
        if lowered:
            record.delivery_count = max(record.delivery_count - 1, 0)
            record.state = _AVAILABLE
        elif record.delivery_count >= self.max_delivery_count:
            record.state = RecordState.ARCHIVED
        else:
            record.state = _AVAILABLE
        record.member_id, record.deadline_ms = "", 0

    def _written(self, changes: list[_Change]) -> StateWrite | None:
        if not changes:
            return None
        self._advance()
        start = self._start
        out: list[StateBatch] = []
        for first, last, state, count in sorted(changes, key=lambda c: c[0]):
            if last < start:
                continue
            first = max(first, start)
            previous = out[-1] if out else None
            if (
                previous is not None
                and previous.last_offset + 1 == first
                and (previous.state, previous.delivery_count) == (state, count)
            ):
                out[-1] = StateBatch(previous.first_offset, last, state, count)
            else:
                out.append(StateBatch(first, last, state, count))
        return StateWrite(start, tuple(out))

    def _advance(self) -> None:
        """Move the start offset past the done records at the front (and holes)."""
        limit = self._unknown[0][0] if self._unknown else self._end
        batches = self._batches
        start = limit
        while batches and batches[0].first < limit:
            batch = batches[0]
            if batch.offsets is None:
                if batch.whole.state in _TERMINAL:
                    del batches[0]
                    continue
                start = batch.first
                break
            done = 0
            for record in batch.offsets:
                if record.state not in _TERMINAL:
                    break
                done += 1
            if done == len(batch.offsets):
                del batches[0]
                continue
            if done:
                batch.trim_front(batch.first + done)
                batch.join()
            start = batch.first
            break
        self._start = max(self._start, start)

    def _first_unknown(self, low: int, high: int) -> int | None:
        for first, last in self._unknown:
            if first > high:
                break
            if last >= low:
                return max(first, low)
        return None

    def _forget_unknown(self, low: int, high: int) -> None:
        if self._unknown and low <= high:
            self._unknown = _cut(self._unknown, low, high)
            self._advance()


class _Taking:
    """One acquisition's bookkeeping: what is left to take and what was given."""

    def __init__(
        self, member_id: str, deadline: int, left: int, aborted: Sequence[tuple[int, int]]
    ) -> None:
        self.member_id, self.deadline, self.left, self.aborted = member_id, deadline, left, aborted
        self.given: list[AcquiredRecords] = []

    def _give(self, first: int, last: int, count: int) -> None:
        previous = self.given[-1] if self.given else None
        if (
            previous is not None
            and previous.last_offset + 1 == first
            and previous.delivery_count == count
        ):
            self.given[-1] = AcquiredRecords(previous.first_offset, last, count)
        else:
            self.given.append(AcquiredRecords(first, last, count))

    def new(self, first: int, last: int) -> list[InFlightBatch]:
        """Batches for new records ``first``-``last`` (at most ``left`` of them),
        acquired, or archived where aborted."""
        made: list[InFlightBatch] = []
        last = min(last, first + self.left - 1)
        self.left -= last - first + 1
        for low, high, is_aborted in _pieces(first, last, self.aborted):
            if is_aborted:
                made.append(InFlightBatch(low, high, InFlightRecord(RecordState.ARCHIVED, 1)))
            else:
                record = InFlightRecord(_ACQUIRED, 1, self.member_id, self.deadline)
                made.append(InFlightBatch(low, high, record))
                self._give(low, high, 1)
        return made

    def existing(self, batch: InFlightBatch, low: int, high: int) -> None:
        """Take the AVAILABLE records of ``batch`` in ``low``-``high``."""
        whole = batch.whole
        if batch.offsets is None:
            if whole.state != _AVAILABLE:
                return
            size = batch.last - batch.first + 1
            if (
                (low, high) == (batch.first, batch.last)
                and size <= self.left
                and not any(f <= high and low <= la for f, la in self.aborted)
            ):
                self.left -= size
                self._take(whole, low, high)
                return
        offsets = batch.split()
        for offset in range(low, high + 1):
            if self.left <= 0:
                break
            record = offsets[offset - batch.first]
            if record.state == _AVAILABLE:
                self.left -= 1
                if any(f <= offset <= la for f, la in self.aborted):
                    record.delivery_count += 1
                    record.state = RecordState.ARCHIVED
                else:
                    self._take(record, offset, offset)
        batch.join()

    def _take(self, record: InFlightRecord, first: int, last: int) -> None:
        record.delivery_count += 1
        record.state, record.member_id, record.deadline_ms = (
            _ACQUIRED,
            self.member_id,
            self.deadline,
        )
        self._give(first, last, record.delivery_count)


def _last(batch: InFlightBatch) -> int:
    return batch.last


def _first(span: list[int]) -> int:
    return span[0]


def _cut(ranges: list[list[int]], low: int, high: int) -> list[list[int]]:
    """``ranges`` without the offsets ``low``-``high``."""
    out: list[list[int]] = []
    for first, last in ranges:
        if last < low or first > high:
            out.append([first, last])
            continue
        if first < low:
            out.append([first, low - 1])
        if last > high:
            out.append([high + 1, last])
    return out


def _pieces(
    first: int, last: int, aborted: Sequence[tuple[int, int]]
) -> Iterator[tuple[int, int, bool]]:
    """``first``-``last`` cut into runs inside and outside the ``aborted`` ranges."""
    if not aborted:
        yield first, last, False
        return
    offset = first
    for low, high in sorted(aborted):
        if high < offset or low > last:
            continue
        if low > offset:
            yield offset, low - 1, False
        yield max(low, offset), min(high, last), True
        offset = min(high, last) + 1
        if offset > last:
            return
    if offset <= last:
        yield offset, last, False


def _check_acknowledgement(ack: Acknowledgement, previous_last: int) -> tuple[AcknowledgeType, ...]:
    if ack.first_offset < 0 or ack.first_offset > ack.last_offset:
        raise InvalidRequestError(
            f"invalid acknowledgement range {ack.first_offset}-{ack.last_offset}"
        )
    if ack.first_offset <= previous_last:
        raise InvalidRequestError(f"acknowledgement batches overlap at offset {ack.first_offset}")
    size = ack.last_offset - ack.first_offset + 1
    if len(ack.types) not in (1, size):
        raise InvalidRequestError(
            f"{len(ack.types)} acknowledge types for {size} offsets "
            f"{ack.first_offset}-{ack.last_offset}: give one, or one per offset"
        )
    try:
        return tuple(AcknowledgeType(t) for t in ack.types)
    except ValueError:
        raise InvalidRequestError(f"invalid acknowledge type in {list(ack.types)}") from None
