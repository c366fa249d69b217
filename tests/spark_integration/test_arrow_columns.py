"""The columnar read path against the record-by-record one, without Spark.

Random fetches (keys and values None or bytes, headers, compressed batches,
transactional batches, aborted transactions, control batches, LogAppendTime,
a start position inside a batch and an end inside another): whole batches
from ``take_batches`` decoded by :class:`ArrowBatchBuilder` (with the C
decoder and with the Python one) must give the Arrow batch that
:func:`records_to_batch` makes of the records ``take`` returns.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.consumer.fetch_buffer import CompletedFetch, end_offset
from kafkette.consumer.subscription import PartitionState
from kafkette.protocol.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    ZSTD,
    ControlRecordType,
    RecordBatchBuilder,
    _columns,
    build_control_batch,
    columns,
)
from kafkette.spark_integration.arrow_records import ArrowBatchBuilder, records_to_batch
from kafkette.structs import TopicPartition
from tests.protocol.records.strategies import Spec, record_specs

TP = TopicPartition("topic-é", 3)


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches of random records from producers 1..3, some transactions aborted."""
    out = bytearray()
    aborted: list[tuple[int, int]] = []
    open_txn: dict[int, int] = {}  # producer id -> first offset of its open transaction
    offset = 0
    for _ in range(draw(st.integers(1, 5))):
        specs: list[Spec] = draw(record_specs(max_size=12))
        producer = draw(st.sampled_from([-1, 1, 2, 3]))
        transactional = producer > 0
        builder = RecordBatchBuilder(
            base_offset=offset,
            compression=draw(st.sampled_from([NO_COMPRESSION, GZIP, LZ4, ZSTD])),
            producer_id=producer,
            producer_epoch=0 if transactional else -1,
            base_sequence=0 if transactional else -1,
            is_transactional=transactional,
            log_append_time=draw(st.booleans()),
        )
        for ts, key, value, headers in specs or [(1, None, None, ())]:
            builder.append(ts, key, value, headers)
        out += builder.build()
        if transactional:
            open_txn.setdefault(producer, offset)
        offset += len(builder)
        for pid in sorted(open_txn):
            if draw(st.booleans()):
                kind = draw(st.sampled_from([ControlRecordType.COMMIT, ControlRecordType.ABORT]))
                if kind == ControlRecordType.ABORT:
                    aborted.append((open_txn[pid], pid))
                del open_txn[pid]
                out += build_control_batch(
                    kind,
                    producer_id=pid,
                    producer_epoch=0,
                    coordinator_epoch=0,
                    timestamp=5,
                    base_offset=offset,
                )
                offset += 1
    return bytes(out), aborted


def fetch(
    data: bytes, position: int, read_committed: bool, aborted: list[tuple[int, int]]
) -> CompletedFetch:
    end = end_offset(data)
    assert end is not None
    state = PartitionState(position=position)
    return CompletedFetch(
        TP, state, position, data, end, aborted=aborted, read_committed=read_committed
    )


@pytest.mark.parametrize("decoder", ["c", "python"])
@settings(max_examples=60, deadline=None)
@given(
    log=logs(),
    start=st.integers(0, 30),
    length=st.integers(0, 60),
    read_committed=st.booleans(),
    include_headers=st.booleans(),
)
def test_columnar_batch_equals_the_records_batch(
    decoder: str,
    log: tuple[bytes, list[tuple[int, int]]],
    start: int,
    length: int,
    read_committed: bool,
    include_headers: bool,
) -> None:
    data, aborted = log
    end = start + length
    by_records = fetch(data, start, read_committed, aborted)
    records = []
    done = False
    while not done:
        taken, done = by_records.take(7, None, None)
        records += [r for r in taken if r.offset < end]
    expected = records_to_batch(records, include_headers)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            columns, "append_columns", _columns.append_columns if decoder == "c" else None
        )
        builder = ArrowBatchBuilder(TP, include_headers)
        by_batches = fetch(data, start, read_committed, aborted)
        done = False
        while not done:
            fetched, _, done = by_batches.take_batches(5)
            for batch, first in fetched:
                builder.append(batch, first, end)
        got = builder.finish()
    assert got.schema.equals(expected.schema)
    assert got.num_rows == len(records)
    assert got.equals(expected), (got.to_pylist(), expected.to_pylist())
    got.validate(full=True)
    assert len(builder) == 0 and builder.finish().num_rows == 0


def test_an_empty_builder_gives_an_empty_batch_of_the_schema() -> None:
    for include_headers in (False, True):
        got = ArrowBatchBuilder(TP, include_headers).finish()
        assert got.equals(records_to_batch([], include_headers))
        assert isinstance(got, pa.RecordBatch)
