"""The exactly-once decision and attempt logic, without Spark or a broker.

A fake Kafka keeps, per transactional id, the producer epoch, the committed
records and the committed marker; attempts crash at any step, retry, replay
batches already written (a driver restart) or come back as zombies after a
newer attempt fenced them. Whatever happens, every batch's rows end up in the
log exactly once, in batch order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.spark_integration.exactly_once import (
    Marker,
    MarkerError,
    PartitionOutcome,
    PartitionPlan,
    Record,
    write_partition,
)

QUERY = "3f0c-query"
TXN = "kafkette-spark-3f0c-query-0"


class Crash(Exception):
    """The attempt's task or executor died here."""


class Fenced(Exception):
    """The broker refused a producer whose epoch is no longer the newest."""


@attrs.define
class FakeKafka:
    epoch: int = 0
    log: list[Record] = attrs.Factory(list)
    marker: Marker | None = None
    open_records: list[Record] | None = None


@attrs.define
class FakeSession:
    """One attempt's producer; ``crash_at`` names the step it dies at."""

    kafka: FakeKafka
    crash_at: str | None = None
    before_commit: Callable[[], None] | None = None
    epoch: int = -1
    sends: int = 0

    def _step(self, name: str) -> None:
        if self.crash_at == name:
            raise Crash(name)

    def _check_epoch(self) -> None:
        if self.epoch != self.kafka.epoch:
            raise Fenced(f"epoch {self.epoch} < {self.kafka.epoch}")

    def init_transactions(self) -> None:
        self._step("init")
        self.kafka.epoch += 1
        self.kafka.open_records = None  # the fenced producer's transaction is aborted
        self.epoch = self.kafka.epoch

    def read_marker(self) -> Marker | None:
        self._step("read")
        return self.kafka.marker

    def begin(self) -> None:
        self._step("begin")
        self._check_epoch()
        self.kafka.open_records = []

    def send(self, record: Record) -> None:
        self.sends += 1
        self._step(f"send{self.sends}")
        self._check_epoch()
        assert self.kafka.open_records is not None
        self.kafka.open_records.append(record)

    def commit(self, marker: Marker) -> None:
        self._step("commit")
        if self.before_commit is not None:
            self.before_commit()
        self._check_epoch()
        assert self.kafka.open_records is not None
        self.kafka.log += self.kafka.open_records
        self.kafka.marker = marker
        self.kafka.open_records = None
        self._step("after-commit")  # committed, but the task dies before reporting it


def rows_of(batch: int, count: int) -> list[Record]:
    return [("out", f"{batch}-{i}".encode(), None, None, None, None) for i in range(count)]


def test_marker_round_trips_through_metadata() -> None:
    marker = Marker(QUERY, 12, 345)
    assert Marker.from_metadata(marker.to_metadata(), TXN) == marker
    assert marker.to_metadata() == '{"query": "3f0c-query", "batch": 12, "rows": 345}'


@pytest.mark.parametrize("text", ["", "{}", "[1]", '{"query": "q", "batch": "x", "rows": 1}'])
def test_metadata_that_is_no_marker_is_refused(text: str) -> None:
    with pytest.raises(MarkerError, match="is not an exactly-once marker"):
        Marker.from_metadata(text, TXN)


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        (None, True),
        (Marker(QUERY, 4, 10), True),
        (Marker(QUERY, 5, 10), False),
        (Marker(QUERY, 6, 0), False),
    ],
)
def test_a_batch_is_written_unless_its_marker_says_it_was(
    marker: Marker | None, expected: bool
) -> None:
    assert PartitionPlan(QUERY, 5, TXN).should_write(marker) is expected


def test_a_marker_of_another_query_is_an_error() -> None:
    plan = PartitionPlan(QUERY, 0, TXN)
    with pytest.raises(MarkerError) as info:
        plan.should_write(Marker("old-query", 7, 3))
    assert str(info.value).startswith(
        f"transactional id {TXN!r} was last used by streaming query old-query (batch 7), "
        f"not by this query {QUERY}."
    )


def test_an_empty_partition_opens_no_transaction() -> None:
    kafka = FakeKafka()
    outcome = write_partition(FakeSession(kafka), PartitionPlan(QUERY, 0, TXN), [])
    assert outcome == PartitionOutcome(written=False, rows=0)
    assert kafka.epoch == 0


def test_a_skipped_partition_drains_its_rows() -> None:
    kafka = FakeKafka(marker=Marker(QUERY, 3, 2))
    rows = iter(rows_of(3, 2))
    outcome = write_partition(FakeSession(kafka), PartitionPlan(QUERY, 3, TXN), rows)
    assert outcome == PartitionOutcome(written=False, rows=0)
    assert next(rows, None) is None
    assert kafka.log == []


def test_a_zombie_commit_after_a_retry_is_fenced() -> None:
    kafka = FakeKafka()
    plan = PartitionPlan(QUERY, 0, TXN)
    rows = rows_of(0, 3)
    retry: list[PartitionOutcome] = []
    zombie = FakeSession(
        kafka,
        before_commit=lambda: retry.append(write_partition(FakeSession(kafka), plan, rows)),
    )
    with pytest.raises(Fenced):
        write_partition(zombie, plan, rows)
    assert retry == [PartitionOutcome(written=True, rows=3)]
    assert kafka.log == rows
    assert kafka.marker == Marker(QUERY, 0, 3)


CRASH_POINTS = ["init", "read", "begin", "send1", "send2", "commit", "after-commit"]


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[int, str | None, bool]]:
    """Attempts in the order they run: (batch, crash point or None, zombie?).

    Batches go 0, 1, 2...; a batch is attempted until an attempt finishes;
    after a finished batch, a driver restart may replay any earlier batch.
    """
    attempts: list[tuple[int, str | None, bool]] = []
    for batch in range(draw(st.integers(1, 5))):
        crashes = draw(st.lists(st.sampled_from(CRASH_POINTS), max_size=3))
        attempts += [(batch, crash, False) for crash in crashes]
        attempts.append((batch, None, draw(st.booleans())))
        replays = draw(st.lists(st.integers(0, batch), max_size=2))
        attempts += [(replay, None, False) for replay in replays]
    return attempts


@settings(max_examples=300, deadline=None)
@given(runs(), st.integers(0, 3))
def test_each_batch_lands_exactly_once(
    attempts: list[tuple[int, str | None, bool]], rows_per_batch: int
) -> None:
    kafka = FakeKafka()
    batches = max(batch for batch, _, _ in attempts) + 1
    for batch, crash, zombie in attempts:
        plan = PartitionPlan(QUERY, batch, TXN)
        rows = rows_of(batch, rows_per_batch)
        if zombie:
            # this attempt stalls before its commit; Spark's retry runs and
            # finishes; then the zombie's commit comes in
            def retry(plan: PartitionPlan = plan, rows: list[Record] = rows) -> None:
                write_partition(FakeSession(kafka), plan, rows)

            # (it reaches its commit only if the batch was not written before)
            with contextlib.suppress(Fenced):
                write_partition(FakeSession(kafka, before_commit=retry), plan, rows)
            continue
        with contextlib.suppress(Crash):
            write_partition(FakeSession(kafka, crash_at=crash), plan, rows)
    expected = [record for batch in range(batches) for record in rows_of(batch, rows_per_batch)]
    assert kafka.log == expected
    if rows_per_batch:
        assert kafka.marker == Marker(QUERY, batches - 1, rows_per_batch)
