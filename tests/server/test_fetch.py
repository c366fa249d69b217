"""Fetch handler, in process: long polls on an injected clock, byte limits, offsets,
read_committed, errors and fetch sessions."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from kafkette.protocol.messages import FetchRequest
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.records import ControlRecordType, build_control_batch
from kafkette.server import Broker
from tests.server.dataplane import (
    NOW,
    FakeClock,
    batch,
    call,
    fetch_request,
    make_broker,
    produce,
    records_of,
)

pytestmark = pytest.mark.anyio


def one_batch(i: int) -> bytes:
    return batch([(b"key-%d" % i, b"value-%03d" % i)])


SIZE = len(one_batch(0))


async def setup(
    partitions: int = 1, batches: dict[int, int] | None = None
) -> tuple[Broker, FakeClock]:
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic("t", partitions)
    n = 0
    for partition, count in (batches or {}).items():
        for _ in range(count):
            assert (await produce(broker, "t", partition, one_batch(n))).error_code == 0
            n += 1
    return broker, clock


def offsets(part: Any) -> list[int]:
    return [r.offset for r in records_of(part.records)]


async def test_long_poll_returns_as_soon_as_data_arrives() -> None:
    broker, clock = await setup()
    result: list[Any] = []

    async def fetcher() -> None:
        result.append(await call(broker, fetch_request("t", {0: 0}, max_wait_ms=30_000), 12))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fetcher)
            await anyio.wait_all_tasks_blocked()
            assert result == []
            await produce(broker, "t", 0, one_batch(0))
    part = result[0].responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, offsets(part)) == (0, 1, [0])
    assert clock.now == NOW  # no time had to pass


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio shuffles what is runnable
async def test_a_woken_long_poll_answers_before_the_produce_that_woke_it() -> None:
    """As Kafka completes delayed fetches in the append's thread before it answers the
    produce: the records reach the consumer one answer sooner (``kafkette serve`` runs
    on asyncio, whose ready tasks run in order)."""
    broker, _ = await setup()
    answered: list[str] = []

    async def fetcher() -> None:
        response = await call(broker, fetch_request("t", {0: 0}, max_wait_ms=30_000), 12)
        answered.append(f"fetch {offsets(response.responses[0].partitions[0])}")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fetcher)
            await anyio.wait_all_tasks_blocked()
            result = await produce(broker, "t", 0, one_batch(0))
            answered.append(f"produce {result.error_code} at {result.base_offset}")
    assert answered == ["fetch [0]", "produce 0 at 0"]


async def test_long_poll_returns_empty_after_max_wait_on_the_broker_clock() -> None:
    broker, clock = await setup()
    result: list[Any] = []

    async def fetcher() -> None:
        result.append(await call(broker, fetch_request("t", {0: 0}, max_wait_ms=500), 12))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fetcher)
            await anyio.wait_all_tasks_blocked()
            clock.advance(499)
            broker.data_changed.notify()  # woken early, nothing to read: waits on
            await anyio.wait_all_tasks_blocked()
            assert result == []
            clock.advance(1)
            broker.data_changed.notify()
    part = result[0].responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, bytes(part.records)) == (0, 0, b"")


async def test_long_poll_ends_in_real_time_when_the_broker_clock_stands_still() -> None:
    """A test's clock held still does not park a consumer's fetch for ever."""
    broker, clock = await setup()
    started = anyio.current_time()
    with anyio.fail_after(5):
        result = await call(broker, fetch_request("t", {0: 0}, max_wait_ms=200), 12)
    assert anyio.current_time() - started >= 0.2
    assert clock.now == NOW
    part = result.responses[0].partitions[0]
    assert (part.error_code, bytes(part.records)) == (0, b"")


async def test_long_poll_waits_for_min_bytes() -> None:
    broker, _ = await setup()
    result: list[Any] = []
    request = fetch_request("t", {0: 0}, max_wait_ms=30_000, min_bytes=SIZE + 1)

    async def fetcher() -> None:
        result.append(await call(broker, request, 12))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fetcher)
            await anyio.wait_all_tasks_blocked()
            await produce(broker, "t", 0, one_batch(0))
            await anyio.wait_all_tasks_blocked()
            assert result == []
            await produce(broker, "t", 0, one_batch(1))
    assert offsets(result[0].responses[0].partitions[0]) == [0, 1]


async def test_no_wait_when_max_wait_is_zero() -> None:
    broker, _ = await setup()
    response = await call(broker, fetch_request("t", {0: 0}, max_wait_ms=0), 12)
    assert bytes(response.responses[0].partitions[0].records) == b""


async def test_partition_max_bytes_cuts_at_whole_batches() -> None:
    broker, _ = await setup(1, {0: 3})
    response = await call(broker, fetch_request("t", {0: 0}, partition_max_bytes=2 * SIZE + 10), 12)
    part = response.responses[0].partitions[0]
    assert len(part.records) == 2 * SIZE
    assert offsets(part) == [0, 1]


async def test_first_partition_gets_one_batch_even_over_the_limits() -> None:
    """The first partition with data gets one whole batch however small the limits;
    a later partition whose batch does not fit gets nothing."""
    broker, _ = await setup(2, {0: 2, 1: 2})
    response = await call(
        broker, fetch_request("t", {0: 0, 1: 0}, max_bytes=10, partition_max_bytes=10), 12
    )
    first, second = response.responses[0].partitions
    assert offsets(first) == [0]
    assert (second.error_code, second.high_watermark, offsets(second)) == (0, 2, [])


async def test_max_bytes_spans_partitions() -> None:
    broker, _ = await setup(2, {0: 1, 1: 3})
    response = await call(broker, fetch_request("t", {0: 0, 1: 0}, max_bytes=2 * SIZE + 5), 12)
    first, second = response.responses[0].partitions
    assert (offsets(first), offsets(second)) == ([0], [0])


async def test_empty_first_partition_does_not_use_up_the_one_batch_allowance() -> None:
    broker, _ = await setup(2, {1: 1})
    response = await call(broker, fetch_request("t", {0: 0, 1: 0}, max_bytes=1), 12)
    first, second = response.responses[0].partitions
    assert (offsets(first), offsets(second)) == ([], [0])


async def test_offset_out_of_range() -> None:
    broker, _ = await setup(1, {0: 2})
    for offset in (3, -1):
        response = await call(broker, fetch_request("t", {0: offset}), 12)
        part = response.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.log_start_offset) == (1, 2, 0)
    at_end = (await call(broker, fetch_request("t", {0: 2}), 12)).responses[0].partitions[0]
    assert (at_end.error_code, offsets(at_end)) == (0, [])


async def test_error_partitions_answer_at_once() -> None:
    """A long poll with a partition in error does not wait."""
    broker, _ = await setup()
    request = fetch_request("t", {0: 0, 7: 0}, max_wait_ms=60_000)
    with anyio.fail_after(5):
        response = await call(broker, request, 12)
    codes = [(p.partition_index, p.error_code) for p in response.responses[0].partitions]
    assert codes == [(0, 0), (7, 3)]


async def test_unknown_topic_by_name_and_by_id() -> None:
    broker, _ = await setup(1, {0: 1})
    by_name = await call(broker, fetch_request("nope", {0: 0}), 12)
    assert by_name.responses[0].partitions[0].error_code == 3
    topic_id = broker.cluster.topics["t"].topic_id
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        topics=[
            FetchTopic(
                topic_id=topic_id,
                partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=1 << 20)],
            ),
            FetchTopic(
                topic_id=uuid.uuid4(), partitions=[FetchPartition(0, partition_max_bytes=1)]
            ),
            FetchTopic(topic_id=topic_id, partitions=[FetchPartition(4, partition_max_bytes=1)]),
        ],
    )
    response = await call(broker, request, 13)
    known, unknown, no_partition = response.responses
    assert known.topic_id == topic_id and offsets(known.partitions[0]) == [0]
    assert unknown.partitions[0].error_code == 100  # UNKNOWN_TOPIC_ID
    assert no_partition.partitions[0].error_code == 3


async def test_leader_epoch_checks() -> None:
    broker, _ = await setup(1, {0: 1})
    request = fetch_request("t", {0: 0})
    request.topics[0].partitions[0].current_leader_epoch = 1
    response = await call(broker, request, 12)
    assert response.responses[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH


async def test_sessions_are_never_created() -> None:
    broker, _ = await setup(1, {0: 1})
    request = fetch_request("t", {0: 0})
    request.session_epoch = 0  # asks for a new session
    response = await call(broker, request, 12)
    assert (response.error_code, response.session_id) == (0, 0)
    assert offsets(response.responses[0].partitions[0]) == [0]
    request.session_id, request.session_epoch = 1234, 1
    response = await call(broker, request, 12)
    assert response.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND


async def test_read_committed_stops_at_the_last_stable_offset() -> None:
    broker, _ = await setup(1, {0: 1})
    txn = batch(
        [(b"k", b"in-txn")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    assert (await produce(broker, "t", 0, txn, transactional_id="txn")).error_code == 0
    committed = await call(broker, fetch_request("t", {0: 0}, isolation_level=1), 12)
    part = committed.responses[0].partitions[0]
    assert (part.high_watermark, part.last_stable_offset, offsets(part)) == (2, 1, [0])
    assert part.aborted_transactions == []
    uncommitted = await call(broker, fetch_request("t", {0: 0}), 12)
    part = uncommitted.responses[0].partitions[0]
    assert (part.last_stable_offset, offsets(part), part.aborted_transactions) == (1, [0, 1], None)
    log = broker.cluster.get_partition("t", 0).log
    log.append(
        build_control_batch(
            ControlRecordType.ABORT,
            producer_id=5,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=NOW,
        )
    )
    log.update_high_watermark(log.log_end_offset)
    committed = await call(broker, fetch_request("t", {0: 0}, isolation_level=1), 12)
    part = committed.responses[0].partitions[0]
    assert (part.high_watermark, part.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(5, 1)]


async def test_fetch_v4_is_served_by_name() -> None:
    broker, _ = await setup(1, {0: 2})
    response = await call(broker, fetch_request("t", {0: 1}), 4)
    assert offsets(response.responses[0].partitions[0]) == [1]


async def test_disk_broker_reads_from_file(tmp_path: Any) -> None:
    clock = FakeClock()
    broker = make_broker(clock, str(tmp_path / "d"))
    broker.cluster.create_topic("t", 1)
    for i in range(3):
        await produce(broker, "t", 0, one_batch(i))
    response = await call(broker, fetch_request("t", {0: 1}, partition_max_bytes=SIZE), 12)
    assert [
        (r.offset, r.value) for r in records_of(response.responses[0].partitions[0].records)
    ] == [(1, b"value-001")]
    broker.close()


async def test_io_error_is_kafka_storage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing read answers KAFKA_STORAGE_ERROR for that partition; the others are served."""
    broker, _ = await setup(2, {0: 1, 1: 1})
    log = broker.cluster.get_partition("t", 0).log

    def broken(offset: int, max_bytes: int, upper_bound: int | None = None) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(log, "read", broken)
    response = await call(broker, fetch_request("t", {0: 0, 1: 0}), 12)
    first, second = response.responses[0].partitions
    assert (first.error_code, second.error_code, offsets(second)) == (56, 0, [0])
