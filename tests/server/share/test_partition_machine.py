"""The share partition against a plain model of Kafka's rules, under any sequence of
acquisitions, acknowledgements of each type (one for a range, or mixed ones that split
an acquired batch), lock expiries (of whole batches, or of the part a RENEW did not
reach), members leaving and restarts from the written ``__share_group_state`` records.

The partition keeps batches of offsets with one state; the model keeps one state per
offset, so every split and rejoin of a batch is checked against it."""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkette.errors import InvalidRecordStateError, InvalidRequestError
from kafkette.server.share.partition import SharePartition
from kafkette.server.share.persistence import ShareKey, ShareStateBook
from kafkette.server.share.state import (
    Acknowledgement,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    StateWrite,
)

MEMBERS = ("m1", "m2", "m3")
LOCK = 100
LIMIT = 3
IN_FLIGHT = 8
KEY = ShareKey("g", uuid.UUID(int=7), 0)
NEW = None  # never delivered, or not written before a restart

_AFTER_ACK = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
}


class Record:
    def __init__(self, state: RecordState, count: int, member: str = "", deadline: int = 0):
        self.state, self.count, self.member, self.deadline = state, count, member, deadline


class Model:
    """Kafka's rules one offset at a time, with nothing clever."""

    def __init__(self) -> None:
        self.records: dict[int, Record] = {}  # absent: NEW
        self.start = 0
        self.end = 0
        self.written: dict[int, tuple[RecordState, int]] = {}
        self.written_start = 0
        self.accepted: set[int] = set()

    def state(self, offset: int) -> RecordState | None:
        record = self.records.get(offset)
        return NEW if record is None else record.state

    def advance(self) -> None:
        while self.start < self.end and self.state(self.start) in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        ):
            self.records.pop(self.start, None)
            self.start += 1

    def write(self, changed: list[int]) -> None:
        self.advance()
        if changed:
            self.written_start = self.start
        for offset in changed:
            record = self.records.get(offset)
            if record is not None:
                self.written[offset] = (record.state, record.count)

    def give_back(self, record: Record, lowered: bool) -> None:
        if lowered:
            record.state, record.count = RecordState.AVAILABLE, record.count - 1
        elif record.count >= LIMIT:
            record.state = RecordState.ARCHIVED
        else:
            record.state = RecordState.AVAILABLE
        record.member, record.deadline = "", 0

    def move_log_start(self, log_start: int) -> None:
        if log_start > self.start:
            self.records = {o: r for o, r in self.records.items() if o >= log_start}
            self.start = log_start
            self.end = max(self.end, log_start)
            self.advance()

    def restart(self) -> None:
        """Only what was written survives: archiving aborted data is not written,
        so a restart may fetch and archive it again, as in Kafka."""
        self.start = self.written_start
        self.records = {
            o: Record(state, count)
            for o, (state, count) in self.written.items()
            if o >= self.start and state != RecordState.ACQUIRED
        }
        self.end = max([self.start, *(o + 1 for o in self.records)])
        self.advance()


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.partition = SharePartition(max_delivery_count=LIMIT, max_in_flight=IN_FLIGHT)
        self.model = Model()
        self.book = ShareStateBook(snapshot_every=3)
        self.book.initialize(KEY, 0, 0, now_ms=0)
        self.records: list[tuple[bytes, bytes | None]] = []
        self.log_end = 0
        self.log_start = 0
        self.now = 0

    def persist(self, write: StateWrite | None, changed: list[int]) -> None:
        self.model.write(changed)
        if not changed:
            assert write is None
            return
        assert write is not None and write.start_offset == self.model.start
        self.records.append(self.book.write(KEY, write, self.now))

    @rule(n=st.integers(1, 6))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(data=st.data())
    def log_start_moves(self, data: st.DataObject) -> None:
        """Retention or DeleteRecords: the records below are gone."""
        self.log_start = data.draw(st.integers(self.log_start, self.log_end))
        self.partition.move_log_start(self.log_start)
        self.model.move_log_start(self.log_start)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 5), data=st.data())
    def acquire(self, member: str, max_records: int, data: st.DataObject) -> None:
        """A log read from the next fetch offset to the log end; under read_committed
        some of it may be aborted transactional data."""
        aborted = data.draw(st.frozensets(st.integers(0, max(self.log_end - 1, 0)), max_size=3))
        fetch = self.partition.next_fetch_offset()
        if fetch >= self.log_end:
            got = []
        else:
            got = self.partition.acquire(
                member,
                fetch,
                self.log_end - 1,
                self.now,
                lock_duration_ms=LOCK,
                max_records=max_records,
                fetch_offset=fetch,
                aborted=[(o, o) for o in sorted(aborted)],
            )
        m = self.model
        wanted = [
            o for o in range(m.start, self.log_end) if m.state(o) in (NEW, RecordState.AVAILABLE)
        ]
        capacity, old_end = IN_FLIGHT - (m.end - m.start), m.end
        expected: list[AcquiredRecords] = []
        for offset in wanted[:max_records]:
            if offset >= old_end:
                if capacity <= 0:
                    break
                capacity -= 1
            record = m.records.setdefault(offset, Record(RecordState.AVAILABLE, 0))
            record.count += 1
            m.end = max(m.end, offset + 1)
            if offset in aborted:
                record.state = RecordState.ARCHIVED
                continue
            record.state = RecordState.ACQUIRED
            record.member, record.deadline = member, self.now + LOCK
            last = expected[-1] if expected else None
            if last and last.last_offset + 1 == offset and last.delivery_count == record.count:
                expected[-1] = AcquiredRecords(last.first_offset, offset, record.count)
            else:
                expected.append(AcquiredRecords(offset, offset, record.count))
        m.advance()
        assert got == expected
        assert not any(r.first_offset <= o <= r.last_offset for r in got for o in m.accepted)

    def acknowledge(
        self, member: str, first: int, last: int, kinds: tuple[AcknowledgeType, ...]
    ) -> None:
        m = self.model
        error: type[Exception] | None = None
        if first >= m.end:
            error = InvalidRequestError
        else:
            for offset in range(max(first, m.start), min(last, m.end - 1) + 1):
                record = m.records.get(offset)
                if (
                    record is None
                    or record.state != RecordState.ACQUIRED
                    or record.member != member
                    or record.deadline <= self.now
                ):
                    error = InvalidRecordStateError
                    break
        ack = Acknowledgement(first, last, tuple(int(k) for k in kinds))
        if error is not None:
            try:
                self.partition.acknowledge(member, [ack], self.now, lock_duration_ms=LOCK)
            except error:
                return
            raise AssertionError(f"{ack} by {member} should fail with {error.__name__}")
        write = self.partition.acknowledge(member, [ack], self.now, lock_duration_ms=LOCK)
        changed = []
        for offset in range(max(first, m.start), min(last, m.end - 1) + 1):
            record = m.records[offset]
            kind = kinds[0] if len(kinds) == 1 else kinds[offset - first]
            if kind == AcknowledgeType.RENEW:
                record.deadline = self.now + LOCK
                continue
            state = _AFTER_ACK[kind]
            if state == RecordState.AVAILABLE and record.count >= LIMIT:
                state = RecordState.ARCHIVED
            if state == RecordState.ACKNOWLEDGED:
                m.accepted.add(offset)
            record.state, record.member, record.deadline = state, "", 0
            changed.append(offset)
        self.persist(write, changed)

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 40),
        size=st.integers(1, 4),
        kind=st.sampled_from(AcknowledgeType),
    )
    def acknowledge_any(self, member: str, first: int, size: int, kind: AcknowledgeType) -> None:
        self.acknowledge(member, first, first + size - 1, (kind,))

    @precondition(
        lambda self: any(r.state == RecordState.ACQUIRED for r in self.model.records.values())
    )
    @rule(data=st.data(), kind=st.sampled_from(AcknowledgeType))
    def acknowledge_held(self, data: st.DataObject, kind: AcknowledgeType) -> None:
        held = sorted(o for o, r in self.model.records.items() if r.state == RecordState.ACQUIRED)
        first = data.draw(st.sampled_from(held))
        member = self.model.records[first].member
        last = first
        while last + 1 in held and self.model.records[last + 1].member == member:
            last += 1
        last = data.draw(st.integers(first, last))
        self.acknowledge(member, first, last, (kind,))

    @precondition(
        lambda self: any(r.state == RecordState.ACQUIRED for r in self.model.records.values())
    )
    @rule(data=st.data())
    def acknowledge_mixed(self, data: st.DataObject) -> None:
        """One type per offset over a member's held run (a part of it, or all):
        differing types split the batch the records were acquired in."""
        held = sorted(o for o, r in self.model.records.items() if r.state == RecordState.ACQUIRED)
        first = data.draw(st.sampled_from(held))
        member = self.model.records[first].member
        last = first
        while last + 1 in held and self.model.records[last + 1].member == member:
            last += 1
        first = data.draw(st.integers(first, last))
        last = data.draw(st.integers(first, last))
        kinds = data.draw(
            st.lists(
                st.sampled_from(AcknowledgeType),
                min_size=last - first + 1,
                max_size=last - first + 1,
            )
        )
        self.acknowledge(member, first, last, tuple(kinds))

    @precondition(
        lambda self: any(r.state == RecordState.ACQUIRED for r in self.model.records.values())
    )
    @rule(data=st.data())
    def renew_part_then_expire(self, data: st.DataObject) -> None:
        """RENEW the middle of a held run, then let the lock of the rest expire: the
        batch is given back in part."""
        held = sorted(o for o, r in self.model.records.items() if r.state == RecordState.ACQUIRED)
        first = data.draw(st.sampled_from(held))
        member = self.model.records[first].member
        last = first
        while last + 1 in held and self.model.records[last + 1].member == member:
            last += 1
        low = data.draw(st.integers(first, last))
        high = data.draw(st.integers(low, last))
        deadline = self.model.records[first].deadline
        if deadline <= self.now:
            return
        self.acknowledge(member, low, high, (AcknowledgeType.RENEW,))
        self.time_passes(deadline - self.now)

    @rule(ms=st.integers(1, 2 * LOCK))
    def time_passes_rule(self, ms: int) -> None:
        self.time_passes(ms)

    def time_passes(self, ms: int) -> None:
        self.now += ms
        write = self.partition.expire_locks(self.now)
        changed = []
        for offset, record in sorted(self.model.records.items()):
            if record.state == RecordState.ACQUIRED and record.deadline <= self.now:
                self.model.give_back(record, lowered=False)
                changed.append(offset)
        self.persist(write, changed)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        write = self.partition.release_member(member)
        changed = []
        for offset, record in sorted(self.model.records.items()):
            if record.state == RecordState.ACQUIRED and record.member == member:
                self.model.give_back(record, lowered=True)
                changed.append(offset)
        self.persist(write, changed)

    @rule()
    def restart(self) -> None:
        """The broker dies: only the records written to the topic survive."""
        book = ShareStateBook(snapshot_every=3)
        book.initialize(KEY, 0, 0, now_ms=0)
        for key, value in self.records:
            book.replay(key, value)
        state = book.state(KEY)
        assert state is not None
        self.book = book
        self.partition = SharePartition(
            start_offset=state.start_offset,
            batches=state.batches,
            max_delivery_count=LIMIT,
            max_in_flight=IN_FLIGHT,
        )
        self.partition.move_log_start(self.log_start)
        self.model.restart()
        self.model.move_log_start(self.log_start)

    @invariant()
    def same_as_the_model(self) -> None:
        m, p = self.model, self.partition
        assert (p.start_offset, p.end_offset) == (m.start, m.end)
        records = p.records()
        for offset in range(m.start, m.end):
            record = m.records.get(offset)
            if record is None:
                assert offset not in records
            else:
                got = records[offset]
                assert (got.state, got.delivery_count, got.member_id) == (
                    record.state,
                    record.count,
                    record.member,
                )
        assert all(m.start <= o < m.end for o in records)


SharePartitionMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_share_partition_follows_the_model = SharePartitionMachine.TestCase
