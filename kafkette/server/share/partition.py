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

Every change but an acquisition or a RENEW returns a :class:`StateWrite` for
the share coordinator to persist (``persistence``); the written start offset is
the one after the change. Time is always an argument, in milliseconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import attrs

from kafkette.errors import InvalidRecordStateError, InvalidRequestError
from kafkette.server.share.state import (
    Acknowledgement,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    StateBatch,
    StateWrite,
    runs,
)

MAX_WINDOW = 100_000
"""The most offsets a restored state may span: a state this class writes spans at
most ``max_in_flight`` (at most 10,000 in Kafka), so a wider one is corrupt, and
tracking it offset by offset would take the broker's memory and time."""

_TERMINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
_ACK_STATES = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


@attrs.define
class InFlightRecord:
    """What the partition knows of one record."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    """The member holding it, while ACQUIRED."""
    deadline_ms: int = 0
    """When its acquisition lock expires, while ACQUIRED."""


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
        self._records: dict[int, InFlightRecord] = {}
        self._unknown: list[int] = []
        """Offsets of the window a restart left without a written state, sorted."""
        end = start_offset
        for batch in sorted(batches, key=lambda b: b.first_offset):
            if batch.first_offset > batch.last_offset or batch.delivery_count < 0:
                raise ValueError(f"invalid state batch {batch}")
            if batch.last_offset - start_offset >= MAX_WINDOW:
                raise ValueError(
                    f"state batch {batch} lies more than {MAX_WINDOW} offsets past the "
                    f"start offset {start_offset}"
                )
            if batch.state == RecordState.ACQUIRED:
                raise ValueError(f"state batch {batch} is ACQUIRED: that state is never written")
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                if offset in self._records:
                    raise ValueError(f"state batches overlap at offset {offset}")
                self._records[offset] = InFlightRecord(batch.state, batch.delivery_count)
            end = max(end, batch.last_offset + 1)
        self._end = end
        self._unknown = [o for o in range(start_offset, end) if o not in self._records]
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
        return self._end - self._start if self._records or self._unknown else 0

    def records(self) -> dict[int, InFlightRecord]:
        """Every tracked record by offset (a copy, for inspection)."""
        return {o: attrs.evolve(r) for o, r in sorted(self._records.items())}

    def next_fetch_offset(self) -> int:
        """Where the next log read should start: the first AVAILABLE or unknown
        record, else the end offset."""
        available = min(
            (o for o, r in self._records.items() if r.state == RecordState.AVAILABLE),
            default=self._end,
        )
        if self._unknown:
            return min(available, self._unknown[0])
        return available

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline, None when nothing is acquired."""
        return min(
            (r.deadline_ms for r in self._records.values() if r.state == RecordState.ACQUIRED),
            default=None,
        )

    def has_acquirable(self, log_end_offset: int) -> bool:
        """Whether an acquire could give out anything, with the log readable up to
        ``log_end_offset`` (exclusive: the high watermark or the last stable offset)."""
        if self._unknown or any(r.state == RecordState.AVAILABLE for r in self._records.values()):
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
        if not self._records and not self._unknown and offset > self._end:
            self._start = self._end = offset  # the log moved on (retention, compaction)
        capacity = self.max_in_flight - self.in_flight
        deadline = now_ms + lock_duration_ms
        given: list[tuple[int, int]] = []  # (offset, delivery count)
        taken = 0
        while offset <= last_offset and taken < max_records:
            record = self._records.get(offset)
            if record is None:
                if offset >= self._end:
                    if capacity <= 0:
                        break
                    capacity -= 1
                    self._end = offset + 1
                elif not self._take_unknown(offset):
                    offset = self._next_tracked(offset)  # no record there in the log
                    continue
                record = self._records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
            if record.state == RecordState.AVAILABLE:
                taken += 1
                record.delivery_count += 1
                if aborted and _in_ranges(offset, aborted):
                    record.state = RecordState.ARCHIVED
                else:
                    record.state = RecordState.ACQUIRED
                    record.member_id, record.deadline_ms = member_id, deadline
                    given.append((offset, record.delivery_count))
            offset += 1
        self._advance()
        return _ranges(given)

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
        plan: list[tuple[int, AcknowledgeType]] = []
        previous_last = -1
        for ack in sorted(acknowledgements, key=lambda a: a.first_offset):
            types = _check_acknowledgement(ack, previous_last)
            previous_last = ack.last_offset
            if ack.first_offset >= self._end:
                raise InvalidRequestError(
                    f"offsets {ack.first_offset}-{ack.last_offset} are past the acquired records"
                )
            low, high = max(ack.first_offset, self._start), min(ack.last_offset, self._end - 1)
            for offset in self._tracked_between(low, high):
                record = self._records.get(offset)
                if record is None or record.state != RecordState.ACQUIRED:
                    raise InvalidRecordStateError(f"offset {offset} is not acquired")
                if record.member_id != member_id:
                    raise InvalidRecordStateError(f"offset {offset} is acquired by another member")
                if record.deadline_ms <= now_ms:
                    raise InvalidRecordStateError(
                        f"the acquisition lock of offset {offset} expired"
                    )
                kind = types[0] if len(types) == 1 else types[offset - ack.first_offset]
                plan.append((offset, kind))
        changed: dict[int, tuple[RecordState, int]] = {}
        for offset, kind in plan:
            record = self._records[offset]
            if kind == AcknowledgeType.RENEW:
                record.deadline_ms = now_ms + lock_duration_ms
                continue
            state = _ACK_STATES[kind]
            if state == RecordState.AVAILABLE and record.delivery_count >= self.max_delivery_count:
                state = RecordState.ARCHIVED
            record.state, record.member_id, record.deadline_ms = state, "", 0
            changed[offset] = (state, record.delivery_count)
        return self._written(changed)

    def expire_locks(self, now_ms: int) -> StateWrite | None:
        """Give back every record whose lock expired at ``now_ms``: AVAILABLE, or
        ARCHIVED at the delivery-count limit. Returns what to persist."""
        changed: dict[int, tuple[RecordState, int]] = {}
        for offset, record in self._records.items():
            if record.state == RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self._give_back(record, lowered=False)
                changed[offset] = (record.state, record.delivery_count)
        return self._written(changed)

    def release_member(self, member_id: str) -> StateWrite | None:
        """Give back the records ``member_id`` holds (it left the group or closed
        its share session): AVAILABLE with the delivery count lowered by one, as
        Kafka does for records fetched but not delivered."""
        changed: dict[int, tuple[RecordState, int]] = {}
        for offset, record in self._records.items():
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._give_back(record, lowered=True)
                changed[offset] = (record.state, record.delivery_count)
        return self._written(changed)

    def move_log_start(self, log_start_offset: int) -> None:
        """The log's start offset moved (retention, DeleteRecords) to
        ``log_start_offset``: what lies below is gone, acquired or not. As Kafka,
        nothing is written now; the next write carries the new start offset."""
        if log_start_offset <= self._start:
            return
        self._records = {o: r for o, r in self._records.items() if o >= log_start_offset}
        self._unknown = [o for o in self._unknown if o >= log_start_offset]
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self._advance()

    # ---- inside

    def _give_back(self, record: InFlightRecord, *, lowered: bool) -> None:
        if lowered:
            record.delivery_count = max(record.delivery_count - 1, 0)
            record.state = RecordState.AVAILABLE
        elif record.delivery_count >= self.max_delivery_count:
            record.state = RecordState.ARCHIVED
        else:
            record.state = RecordState.AVAILABLE
        record.member_id, record.deadline_ms = "", 0

    def _written(self, changed: dict[int, tuple[RecordState, int]]) -> StateWrite | None:
        if not changed:
            return None
        self._advance()
        kept = {o: s for o, s in changed.items() if o >= self._start}
        return StateWrite(self._start, runs(kept))

    def _advance(self) -> None:
        """Move the start offset past the done records at the front."""
        limit = self._unknown[0] if self._unknown else self._end
        offset = self._start
        while offset < limit:
            record = self._records.get(offset)
            if record is None:
                offset = min(self._next_tracked(offset), limit)  # a hole: no record there
            elif record.state in _TERMINAL:
                del self._records[offset]
                offset += 1
            else:
                break
        self._start = max(self._start, offset)

    def _take_unknown(self, offset: int) -> bool:
        """Whether ``offset`` was unknown (it is not any more)."""
        i = bisect.bisect_left(self._unknown, offset)
        if i < len(self._unknown) and self._unknown[i] == offset:
            del self._unknown[i]
            return True
        return False

    def _forget_unknown(self, low: int, high: int) -> None:
        if self._unknown and low <= high:
            self._unknown = [o for o in self._unknown if not low <= o <= high]
            self._advance()

    def _next_tracked(self, offset: int) -> int:
        """The first offset after ``offset`` that is tracked or unknown, else the end."""
        following = [o for o in self._records if o > offset]
        i = bisect.bisect_right(self._unknown, offset)
        if i < len(self._unknown):
            following.append(self._unknown[i])
        return min(following, default=self._end) if following else self._end

    def _tracked_between(self, low: int, high: int) -> list[int]:
        """The tracked and unknown offsets in ``low``-``high``, in order."""
        if low > high:
            return []
        if high - low < len(self._records):
            found = {o for o in range(low, high + 1) if o in self._records}
        else:
            found = {o for o in self._records if low <= o <= high}
        found.update(o for o in self._unknown if low <= o <= high)
        return sorted(found)


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


def _in_ranges(offset: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(first <= offset <= last for first, last in ranges)


def _ranges(given: list[tuple[int, int]]) -> list[AcquiredRecords]:
    spans: list[list[int]] = []  # [first, last, count]
    for offset, count in given:
        if spans and spans[-1][1] + 1 == offset and spans[-1][2] == count:
            spans[-1][1] = offset
        else:
            spans.append([offset, offset, count])
    return [AcquiredRecords(first, last, count) for first, last, count in spans]
