"""The share-partition state machine, event by event (Kafka's SharePartition rules)."""

from __future__ import annotations

import pytest

from kafkette.errors import InvalidRecordStateError, InvalidRequestError
from kafkette.server.share.partition import InFlightRecord, SharePartition
from kafkette.server.share.state import (
    Acknowledgement,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    StateBatch,
    StateWrite,
)

LOCK = 1000
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
GAP, RENEW = AcknowledgeType.GAP, AcknowledgeType.RENEW


def ack(first: int, last: int, *types: int) -> Acknowledgement:
    return Acknowledgement(first, last, tuple(types))


def acquire(
    p: SharePartition, member: str, first: int, last: int, now: int = 0, **kw: object
) -> list[AcquiredRecords]:
    options: dict[str, object] = {"lock_duration_ms": LOCK, "max_records": 500, **kw}
    return p.acquire(member, first, last, now, **options)  # type: ignore[arg-type]


def states(p: SharePartition) -> dict[int, tuple[RecordState, int]]:
    return {o: (r.state, r.delivery_count) for o, r in p.records().items()}


def test_acquire_gives_new_records_once_with_delivery_count_one() -> None:
    """Two members fetching the same offsets: the second gets only what is left."""
    p = SharePartition()
    assert acquire(p, "a", 0, 9, max_records=4) == [AcquiredRecords(0, 3, 1)]
    assert acquire(p, "b", 0, 9) == [AcquiredRecords(4, 9, 1)]
    assert acquire(p, "c", 0, 9) == []
    assert p.end_offset == 10 and p.start_offset == 0 and p.in_flight == 10
    assert p.records()[5] == InFlightRecord(RecordState.ACQUIRED, 1, "b", LOCK)
    assert p.next_deadline() == LOCK


def test_accept_moves_the_start_offset_and_forgets_the_records() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 4)
    write = p.acknowledge("a", [ack(0, 2, ACCEPT)], 10, lock_duration_ms=LOCK)
    assert write == StateWrite(3, ())
    assert p.start_offset == 3 and sorted(p.records()) == [3, 4]
    assert p.next_fetch_offset() == 5


def test_release_redelivers_with_a_higher_count_and_reject_never() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 3)
    write = p.acknowledge(
        "a", [ack(0, 3, RELEASE, REJECT, RELEASE, ACCEPT)], 5, lock_duration_ms=LOCK
    )
    assert write == StateWrite(
        0,
        (
            StateBatch(0, 0, RecordState.AVAILABLE, 1),
            StateBatch(1, 1, RecordState.ARCHIVED, 1),
            StateBatch(2, 2, RecordState.AVAILABLE, 1),
            StateBatch(3, 3, RecordState.ACKNOWLEDGED, 1),
        ),
    )
    assert p.next_fetch_offset() == 0
    assert acquire(p, "b", 0, 3) == [AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2)]


def test_a_record_released_up_to_the_delivery_count_limit_is_archived() -> None:
    """group.share.delivery.count.limit deliveries, then never again."""
    p = SharePartition(max_delivery_count=3)
    for count in (1, 2, 3):
        assert acquire(p, "a", 0, 0, now=count) == [AcquiredRecords(0, 0, count)]
        write = p.acknowledge("a", [ack(0, 0, RELEASE)], count, lock_duration_ms=LOCK)
    assert write == StateWrite(1, ())
    assert p.start_offset == 1 and acquire(p, "a", 0, 0) == []


def test_an_expired_lock_makes_records_available_then_archived_at_the_limit() -> None:
    p = SharePartition(max_delivery_count=2)
    acquire(p, "a", 0, 1, now=0)
    assert p.expire_locks(LOCK - 1) is None
    assert p.expire_locks(LOCK) == StateWrite(0, (StateBatch(0, 1, RecordState.AVAILABLE, 1),))
    assert acquire(p, "b", 0, 1, now=LOCK) == [AcquiredRecords(0, 1, 2)]
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge("a", [ack(0, 1, ACCEPT)], LOCK, lock_duration_ms=LOCK)
    assert p.expire_locks(2 * LOCK) == StateWrite(2, ())
    assert p.records() == {} and p.next_fetch_offset() == 2


def test_renew_extends_the_lock_and_writes_nothing() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 0, now=0)
    assert p.acknowledge("a", [ack(0, 0, RENEW)], 900, lock_duration_ms=LOCK) is None
    assert p.next_deadline() == 1900
    assert p.expire_locks(1899) is None
    assert p.acknowledge("a", [ack(0, 0, ACCEPT)], 1899, lock_duration_ms=LOCK) == StateWrite(1, ())


def test_an_acknowledgement_after_the_deadline_fails_even_before_expiry_runs() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 0, now=0)
    with pytest.raises(InvalidRecordStateError, match="expired"):
        p.acknowledge("a", [ack(0, 0, ACCEPT)], LOCK, lock_duration_ms=LOCK)


def test_a_bad_offset_fails_the_whole_acknowledgement_and_changes_nothing() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 2)
    acquire(p, "b", 3, 5)
    before = states(p)
    with pytest.raises(InvalidRecordStateError, match="another member"):
        p.acknowledge("a", [ack(0, 1, ACCEPT), ack(2, 3, ACCEPT)], 1, lock_duration_ms=LOCK)
    assert states(p) == before and p.start_offset == 0
    p.acknowledge("a", [ack(2, 2, RELEASE)], 1, lock_duration_ms=LOCK)
    with pytest.raises(InvalidRecordStateError, match="offset 2 is not acquired"):
        p.acknowledge("a", [ack(1, 1, ACCEPT), ack(2, 2, REJECT)], 1, lock_duration_ms=LOCK)
    assert states(p)[1] == (RecordState.ACQUIRED, 1)


@pytest.mark.parametrize(
    ("acks", "message"),
    [
        ([ack(0, 2, 1, 1)], "2 acknowledge types for 3 offsets"),
        ([ack(0, 0, 9)], "invalid acknowledge type"),
        ([ack(2, 1, 1)], "invalid acknowledgement range"),
        ([ack(0, 1, 1), ack(1, 2, 1)], "overlap"),
        ([ack(10, 12, 1)], "past the acquired records"),
    ],
)
def test_malformed_acknowledgements_are_invalid_requests(
    acks: list[Acknowledgement], message: str
) -> None:
    p = SharePartition()
    acquire(p, "a", 0, 4)
    with pytest.raises(InvalidRequestError, match=message):
        p.acknowledge("a", acks, 1, lock_duration_ms=LOCK)
    assert all(s == (RecordState.ACQUIRED, 1) for s in states(p).values())


def test_offsets_below_the_start_offset_are_ignored() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 3)
    p.acknowledge("a", [ack(0, 1, ACCEPT)], 1, lock_duration_ms=LOCK)
    write = p.acknowledge("a", [ack(0, 3, GAP)], 1, lock_duration_ms=LOCK)
    assert write == StateWrite(4, ()) and p.records() == {}


def test_a_member_leaving_gives_its_records_back_uncounted() -> None:
    """Kafka lowers the delivery count: fetched by the member, never delivered."""
    p = SharePartition(max_delivery_count=1)
    acquire(p, "a", 0, 1)
    acquire(p, "b", 2, 2)
    assert p.release_member("a") == StateWrite(0, (StateBatch(0, 1, RecordState.AVAILABLE, 0),))
    assert p.release_member("a") is None
    assert acquire(p, "c", 0, 2) == [AcquiredRecords(0, 1, 1)]


def test_max_in_flight_bounds_new_records_not_redeliveries() -> None:
    p = SharePartition(max_in_flight=4)
    assert acquire(p, "a", 0, 9) == [AcquiredRecords(0, 3, 1)]
    assert not p.has_acquirable(10)
    p.acknowledge("a", [ack(1, 1, RELEASE)], 1, lock_duration_ms=LOCK)
    assert p.has_acquirable(10)
    assert acquire(p, "b", 1, 9) == [AcquiredRecords(1, 1, 2)]
    p.acknowledge("a", [ack(0, 0, ACCEPT)], 1, lock_duration_ms=LOCK)
    assert acquire(p, "b", 4, 9) == [AcquiredRecords(4, 4, 1)]


def test_read_committed_archives_aborted_ranges_instead_of_delivering() -> None:
    p = SharePartition()
    got = acquire(p, "a", 0, 9, aborted=[(3, 5)])
    assert got == [AcquiredRecords(0, 2, 1), AcquiredRecords(6, 9, 1)]
    assert {o for o, s in states(p).items() if s[0] == RecordState.ARCHIVED} == {3, 4, 5}
    p.acknowledge("a", [ack(0, 2, ACCEPT)], 1, lock_duration_ms=LOCK)
    assert p.start_offset == 6


def test_a_log_that_moved_on_moves_an_empty_partition() -> None:
    """The first batch the log returns starts past the end (retention): start there."""
    p = SharePartition()
    assert acquire(p, "a", 50, 52) == [AcquiredRecords(50, 52, 1)]
    assert (p.start_offset, p.end_offset) == (50, 53)


def test_restored_state_keeps_counts_and_refetches_what_was_never_written() -> None:
    """After a restart: written AVAILABLE records keep their count, ACKNOWLEDGED ones
    stay done, offsets between them with no written state come back as new."""
    p = SharePartition(
        start_offset=10,
        batches=[
            StateBatch(10, 11, RecordState.ACKNOWLEDGED, 1),
            StateBatch(12, 12, RecordState.AVAILABLE, 2),
            StateBatch(15, 16, RecordState.ACKNOWLEDGED, 1),
        ],
    )
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (12, 17, 12)
    assert acquire(p, "a", 12, 20) == [
        AcquiredRecords(12, 12, 3),
        AcquiredRecords(13, 14, 1),
        AcquiredRecords(17, 20, 1),
    ]


def test_unknown_offsets_the_log_skips_hold_no_record() -> None:
    p = SharePartition(start_offset=0, batches=[StateBatch(5, 5, RecordState.ACKNOWLEDGED, 1)])
    assert p.next_fetch_offset() == 0
    assert acquire(p, "a", 3, 9, fetch_offset=0) == [
        AcquiredRecords(3, 4, 1),
        AcquiredRecords(6, 9, 1),
    ]
    assert p.start_offset == 3


@pytest.mark.parametrize(
    "batches",
    [
        [StateBatch(0, 1, RecordState.ACQUIRED, 1)],
        [StateBatch(0, 3, RecordState.AVAILABLE, 1), StateBatch(3, 4, RecordState.ARCHIVED, 1)],
        [StateBatch(4, 3, RecordState.AVAILABLE, 1)],
        [StateBatch(0, 2**62, RecordState.ACKNOWLEDGED, 1)],
    ],
)
def test_an_impossible_written_state_is_refused(batches: list[StateBatch]) -> None:
    with pytest.raises(ValueError):
        SharePartition(batches=batches)


def test_a_moved_log_start_drops_what_lies_below_acquired_or_not() -> None:
    """Retention or DeleteRecords past in-flight records: acknowledgements of them
    are ignored, their expiry writes nothing, the start offset is the log's."""
    p = SharePartition()
    acquire(p, "a", 0, 5)
    p.acknowledge("a", [ack(4, 4, RELEASE)], 1, lock_duration_ms=LOCK)
    p.move_log_start(5)
    assert (p.start_offset, p.end_offset, sorted(p.records())) == (5, 6, [5])
    assert p.acknowledge("a", [ack(0, 3, ACCEPT)], 2, lock_duration_ms=LOCK) is None
    assert p.expire_locks(LOCK) == StateWrite(5, (StateBatch(5, 5, RecordState.AVAILABLE, 1),))
    p.move_log_start(9)
    assert (p.start_offset, p.end_offset, p.records()) == (9, 9, {})
    assert acquire(p, "a", 9, 9) == [AcquiredRecords(9, 9, 1)]


def test_a_fetch_is_one_batch_split_by_mixed_acknowledgements() -> None:
    """500 records acquired together are one run of one state; acknowledgements that
    differ within it split it; the start offset moves once the front is done."""
    p = SharePartition()
    assert acquire(p, "a", 0, 499) == [AcquiredRecords(0, 499, 1)]
    assert p.batches() == [(0, 499, InFlightRecord(RecordState.ACQUIRED, 1, "a", LOCK))]
    write = p.acknowledge("a", [ack(10, 12, RELEASE, REJECT, RELEASE)], 5, lock_duration_ms=LOCK)
    assert write == StateWrite(
        0,
        (
            StateBatch(10, 10, RecordState.AVAILABLE, 1),
            StateBatch(11, 11, RecordState.ARCHIVED, 1),
            StateBatch(12, 12, RecordState.AVAILABLE, 1),
        ),
    )
    held = InFlightRecord(RecordState.ACQUIRED, 1, "a", LOCK)
    available = InFlightRecord(RecordState.AVAILABLE, 1)
    assert p.batches() == [
        (0, 9, held),
        (10, 10, available),
        (11, 11, InFlightRecord(RecordState.ARCHIVED, 1)),
        (12, 12, available),
        (13, 499, held),
    ]
    assert p.next_fetch_offset() == 10
    assert acquire(p, "b", 10, 12, now=6) == [
        AcquiredRecords(10, 10, 2),
        AcquiredRecords(12, 12, 2),
    ]
    accept = [ack(0, 9, ACCEPT), ack(13, 499, ACCEPT)]
    write = p.acknowledge("a", accept, 7, lock_duration_ms=LOCK)
    assert write is not None and write.start_offset == 10
    held_by_b = InFlightRecord(RecordState.ACQUIRED, 2, "b", 6 + LOCK)
    assert p.batches() == [
        (10, 10, held_by_b),
        (11, 11, InFlightRecord(RecordState.ARCHIVED, 1)),
        (12, 12, held_by_b),
        (13, 499, InFlightRecord(RecordState.ACKNOWLEDGED, 1)),
    ]
    write = p.acknowledge("b", [ack(10, 10, ACCEPT), ack(12, 12, ACCEPT)], 8, lock_duration_ms=LOCK)
    assert write == StateWrite(500, ())
    assert p.batches() == [] and p.in_flight == 0


def test_a_renew_of_part_of_a_batch_lets_the_rest_expire() -> None:
    p = SharePartition()
    acquire(p, "a", 0, 9)
    assert p.acknowledge("a", [ack(3, 5, RENEW)], 600, lock_duration_ms=LOCK) is None
    write = p.expire_locks(LOCK)
    assert write == StateWrite(
        0,
        (StateBatch(0, 2, RecordState.AVAILABLE, 1), StateBatch(6, 9, RecordState.AVAILABLE, 1)),
    )
    assert p.batches() == [
        (0, 2, InFlightRecord(RecordState.AVAILABLE, 1)),
        (3, 5, InFlightRecord(RecordState.ACQUIRED, 1, "a", 600 + LOCK)),
        (6, 9, InFlightRecord(RecordState.AVAILABLE, 1)),
    ]
    assert p.next_deadline() == 600 + LOCK
    assert acquire(p, "b", 0, 9, now=LOCK) == [AcquiredRecords(0, 2, 2), AcquiredRecords(6, 9, 2)]
