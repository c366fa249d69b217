"""Whole batches handed out by ``take_batches`` (``Consumer.poll_batches``) against ``take``.

The records of the handed-out batches, from each batch's position on, must be
exactly the records ``take`` returns (control batches, aborted transactions
and records below the position skipped), and the position must end where
``take`` leaves it.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette import Consumer, TopicPartition
from kafkette.consumer.fetch_buffer import CompletedFetch, end_offset
from kafkette.consumer.record import CREATE_TIME, LOG_APPEND_TIME
from kafkette.consumer.subscription import PartitionState
from kafkette.protocol.records import GZIP, ControlRecordType
from tests.consumer.targets import Target
from tests.consumer.test_fetch_buffer import TP, batch, control


def completed(
    data: bytes, position: int, **kwargs: object
) -> tuple[CompletedFetch, PartitionState]:
    state = PartitionState(position=position)
    end = end_offset(data)
    assert end is not None
    return CompletedFetch(TP, state, position, data, end, **kwargs), state  # type: ignore[arg-type]


def by_records(data: bytes, position: int, **kwargs: object) -> tuple[list[int], int]:
    fetch, state = completed(data, position, **kwargs)
    got: list[int] = []
    done = False
    while not done:
        records, done = fetch.take(3, None, None)
        got += [r.offset for r in records]
    assert state.position is not None
    return got, state.position


def by_batches(data: bytes, position: int, limit: int, **kwargs: object) -> tuple[list[int], int]:
    fetch, state = completed(data, position, **kwargs)
    got: list[int] = []
    done = False
    while not done:
        before = state.position
        fetched, taken, done = fetch.take_batches(limit)
        assert state.position is not None and before is not None
        assert taken == state.position - before
        if fetched:
            assert taken >= limit or done
        for whole, first in fetched:
            got += [r.offset for r in whole if r.offset >= first]
    assert state.position is not None
    return got, state.position


transactional_log = (
    batch(0, 2, producer_id=1, transactional=True)  # aborted
    + batch(2, 2, producer_id=2, transactional=True, compression=GZIP)  # committed
    + control(4, 1, ControlRecordType.ABORT)
    + control(5, 2, ControlRecordType.COMMIT)
    + batch(6, 3, producer_id=1, transactional=True)  # a later transaction of 1: kept
    + batch(9, 1, producer_id=3, transactional=True)  # aborted
    + control(10, 3, ControlRecordType.ABORT)
    + batch(11, 4, log_append_time=True)
)
ABORTED = ((9, 3), (0, 1))


@settings(max_examples=100, deadline=None)
@given(position=st.integers(0, 15), limit=st.integers(1, 20), read_committed=st.booleans())
def test_batches_hold_the_records_take_returns(
    position: int, limit: int, read_committed: bool
) -> None:
    kwargs = {"read_committed": read_committed, "aborted": ABORTED}
    assert by_batches(transactional_log, position, limit, **kwargs) == by_records(
        transactional_log, position, **kwargs
    )


def test_a_batch_take_started_is_handed_out_whole_with_its_position() -> None:
    fetch, state = completed(batch(0, 5) + batch(5, 2), 0)
    records, done = fetch.take(2, None, None)
    assert [r.offset for r in records] == [0, 1] and not done
    fetched, taken, done = fetch.take_batches(1)
    assert [(b.base_offset, first) for b, first in fetched] == [(0, 2)]
    assert (taken, done, state.position) == (3, False, 5)
    fetched, taken, done = fetch.take_batches(100)
    assert [(b.base_offset, first) for b, first in fetched] == [(5, 5)]
    assert (taken, done, state.position) == (2, True, 7)


def test_timestamp_type_of_a_handed_out_batch() -> None:
    fetch, _ = completed(batch(0, 1) + batch(1, 1, log_append_time=True), 0)
    fetched, _, _ = fetch.take_batches(10)
    assert [f.timestamp_type for f in fetched] == [CREATE_TIME, LOG_APPEND_TIME]


def test_consumer_poll_batches_from_a_seek_inside_a_batch(target: Target, topic: str) -> None:
    """Consumer.poll_batches against every target: whole batches, positions past them."""
    target.create_topic(topic)
    tp = TopicPartition(topic, 0)
    for start in (0, 5, 10):
        target.produce_values(tp, 5, start=start)
    settings = {"bootstrap_servers": target.bootstrap, "fetch_max_wait_ms": 100}
    with Consumer(settings) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 7)
        got: list[tuple[int, int]] = []
        values: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < 15 and time.monotonic() < deadline:
            for fetched in consumer.poll_batches(timeout_ms=200, max_offsets=1).get(tp, []):
                got.append((fetched.batch.base_offset, fetched.position))
                values += [r.value for r in fetched.batch if r.offset >= fetched.position]
        assert got == [(5, 7), (10, 10)]
        assert values == [b"v%d" % i for i in range(7, 15)]
        assert consumer.position(tp) == 15
        assert consumer.poll_batches(timeout_ms=0) == {}
        with pytest.raises(ValueError, match="max_offsets"):
            consumer.poll_batches(max_offsets=0)
